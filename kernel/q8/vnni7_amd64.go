package q8

// The AVX2 u8 × s7 tiles (vnni7_amd64.s, gen_vnni7.py; vnni7.go
// documents the arithmetic). They run where twins.s7 is set.

// q7rowsN writes to acc (N rows of 32 int32s, 64 apart) init (one value
// per lane) plus the sums over kq k-quads of N broadcast unsigned rows (b + r*ldb, dword kk at 4kk) by
// a half panel of signed bytes at p (32 lanes × 4 bytes per quad, quads
// 256 bytes apart); q7colsN is the same with the broadcast rows signed,
// the panel unsigned and init one value per row.
//
//go:noescape
func q7rows1(kq int, b *uint8, ldb int, p *int8, init, acc *int32)

//go:noescape
func q7rows2(kq int, b *uint8, ldb int, p *int8, init, acc *int32)

//go:noescape
func q7cols1(kq int, b *uint8, ldb int, p *int8, init, acc *int32)

//go:noescape
func q7cols2(kq int, b *uint8, ldb int, p *int8, init, acc *int32)

var q7Tiles = [2][2]func(kq int, b *uint8, ldb int, p *int8, init, acc *int32){{q7rows1, q7rows2}, {q7cols1, q7cols2}}

// q7packQuad is packQuad on AVX2 (n a multiple of 8): 4 channels (rows
// ld floats apart) by n positions quantized to 4n bytes, position major.
//
//go:noescape
func q7packQuad(dst *uint8, src *float32, ld int, inv float32, n int)

// q7zipQuad is zipQuad on AVX2 (n a multiple of 8).
//
//go:noescape
func q7zipQuad(dst, src *uint8, ld int, n int)
