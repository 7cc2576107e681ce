//go:build !amd64

package q8

const hasAVX2, hasF16C, hasVNNI = false, false, false

func tile6x16(kp int, a, b *int16, c *int32, ldc int, load int) { panic("q8: no vector kernels") }
func tile6x16vnni(kp int, a, b *int16, c *int32, ldc int, load int) {
	panic("q8: no vector kernels")
}
func halfToFloat(dst *float32, src *uint16, n int)        { panic("q8: no vector kernels") }
func quant8(dst *int16, src *float32, inv float32, n int) { panic("q8: no vector kernels") }

func interleave(dst, src *int16, ldb int, kp int) { panic("q8: no vector kernels") }

func epiRow(y *float32, acc *int32, n int, m, b float32, res *float32, relu int) {
	panic("q8: no vector kernels")
}

func gatherPairs(dst, src *int16, offs *int, kp int) { panic("q8: no vector kernels") }
