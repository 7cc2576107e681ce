//go:build !amd64

package q8

func noVNNI(kq int, b *uint8, ldb int, p *int8, init *int32, acc *int32) {
	panic("q8: no vector kernels")
}

var rowsTiles = [4]func(kq int, b *uint8, ldb int, p *int8, init *int32, acc *int32){noVNNI, noVNNI, noVNNI, noVNNI}
var colsTiles = rowsTiles

func epiCols(y *float32, acc *int32, mult, bias, res *float32, n int, relu int) {
	panic("q8: no vector kernels")
}

func quantU8(dst *uint8, src *float32, inv float32, n int) { panic("q8: no vector kernels") }

func packQuad(dst *uint8, src *float32, ld int, inv float32, n int) { panic("q8: no vector kernels") }

var vq8Tiles [2][2][17]func(kq int, w *int8, x0, x1 *uint8, offs *int, init *int32, acc *int32)

func mulInPlace(x, h *float32, n int) { panic("q8: no vector kernels") }

func clipInPlace(y *float32, n int, lo, hi float32) { panic("q8: no vector kernels") }

func zipQuad(dst, src *uint8, ld int, n int) { panic("q8: no vector kernels") }

func dwBlocks(nb int, x *uint8, offs *int, toff *int, w *int32, nt int, idx *uint8, init int32, acc *int32, aoffs *int) {
	panic("q8: no vector kernels")
}

func copyRows(dst *uint8, ldd int, src *uint8, lds int, n int, rows int) {
	panic("q8: no vector kernels")
}
