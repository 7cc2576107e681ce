//go:build !amd64

package q8

const hasDirect = false

var dq8Tiles [2][2][17]func(kp int, w *int8, x0, x1 *int16, offs *int, acc *int32)

func epi16(acc *int32, y *float32, ldy, n, rows int, mult, bias, res *float32, relu int) {
	panic("q8: no vector kernels")
}

func qzip(dst *int16, a, b *float32, inv float32, n int) { panic("q8: no vector kernels") }
