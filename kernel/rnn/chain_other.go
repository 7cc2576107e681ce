//go:build !amd64

package rnn

// haveZ and haveY are false without the assembly: the portable chains
// run.
const (
	haveZ = false
	haveY = false
)

func chainRowsZ(k int, x *float32, b *float32, ldb int, y *float32, n int) {
	panic("rnn: chainRowsZ without AVX-512")
}

func chainRows8Z(k int, xp *float32, b *float32, ldb int, y *float32, ldy int, n int) {
	panic("rnn: chainRows8Z without AVX-512")
}

func chainRowsY(k int, x *float32, b *float32, ldb int, y *float32, n int) {
	panic("rnn: chainRowsY without AVX2")
}
