//go:build !amd64

package q8

func noQ7(kq int, b *uint8, ldb int, p *int8, init, acc *int32) { panic("q8: no vector kernels") }

var q7Tiles = [2][2]func(kq int, b *uint8, ldb int, p *int8, init, acc *int32){{noQ7, noQ7}, {noQ7, noQ7}}

func q7packQuad(dst *uint8, src *float32, ld int, inv float32, n int) { panic("q8: no vector kernels") }

func q7zipQuad(dst, src *uint8, ld int, n int) { panic("q8: no vector kernels") }
