package q8

// The u8 x s8 VPDPBUSD kernels (vnni_amd64.s, gen_vnni.py; vnni.go
// documents the arithmetic). They run where twins.vnni is set (AVX-512F
// and AVX512_VNNI: hasVNNI).

// rowsR computes R rows by 64 columns of int32 sums over kq k-quads for a
// linear layer: row r's unsigned activation bytes at b + r*ldb, the
// weights' panel at p (kq quads of 64 columns by 4 signed bytes), the 64
// columns' starting values at init; acc receives R*64 sums, row-major.
//
//go:noescape
func rows1(kq int, b *uint8, ldb int, p *int8, init *int32, acc *int32)

//go:noescape
func rows2(kq int, b *uint8, ldb int, p *int8, init *int32, acc *int32)

//go:noescape
func rows3(kq int, b *uint8, ldb int, p *int8, init *int32, acc *int32)

//go:noescape
func rows4(kq int, b *uint8, ldb int, p *int8, init *int32, acc *int32)

// colsR is rowsR for a pointwise convolution: R output channels' signed
// weight rows at b + r*ldb (read as bytes), the unsigned activations'
// panel at p (kq quads of 64 positions by 4 bytes), one starting value
// per row at init.
//
//go:noescape
func cols1(kq int, b *uint8, ldb int, p *int8, init *int32, acc *int32)

//go:noescape
func cols2(kq int, b *uint8, ldb int, p *int8, init *int32, acc *int32)

//go:noescape
func cols3(kq int, b *uint8, ldb int, p *int8, init *int32, acc *int32)

//go:noescape
func cols4(kq int, b *uint8, ldb int, p *int8, init *int32, acc *int32)

// epiCols is the vector twin of epiColsGo over n (a multiple of 16)
// columns; res may be nil, relu is 0 or 1.
//
//go:noescape
func epiCols(y *float32, acc *int32, mult, bias, res *float32, n int, relu int)

// quantU8 is the vector twin of quantizeU8 over n (a multiple of 16)
// values.
//
//go:noescape
func quantU8(dst *uint8, src *float32, inv float32, n int)

var rowsTiles = [4]func(kq int, b *uint8, ldb int, p *int8, init *int32, acc *int32){rows1, rows2, rows3, rows4}
var colsTiles = [4]func(kq int, b *uint8, ldb int, p *int8, init *int32, acc *int32){cols1, cols2, cols3, cols4}

// packQuad quantizes 4 channels (rows ld floats apart) by n (a multiple
// of 16) positions into 4n bytes, position major (packPanel's layout).
//
//go:noescape
func packQuad(dst *uint8, src *float32, ld int, inv float32, n int)

// mulInPlace sets x[i] *= h[i] for i < n (a multiple of 16), AVX-512F.
//
//go:noescape
func mulInPlace(x, h *float32, n int)

// clipInPlace clamps y[i] for i < n (a multiple of 16) to [lo, hi] as
// Clip does (actor.apply), AVX-512F.
//
//go:noescape
func clipInPlace(y *float32, n int, lo, hi float32)

// zipQuad is packQuad's interleaving of bytes already in u8 form (a
// chained layer's input): dst[4j+e] = src[e*ld+j] for j < n (a multiple
// of 16), e < 4.
//
//go:noescape
func zipQuad(dst, src *uint8, ld int, n int)

// dwBlocks computes nb (a multiple of 4) blocks of 16 depthwise outputs of
// one channel (dw.go; AVX512_VNNI and AVX512_VBMI): block i's window at
// byte offs[i] of x, nt tap dwords at byte offsets toff with weights w,
// lane bytes picked by idx, sums from init into acc at int32 offsets
// aoffs[i] (in block order).
//
//go:noescape
func dwBlocks(nb int, x *uint8, offs *int, toff *int, w *int32, nt int, idx *uint8, init int32, acc *int32, aoffs *int)

// copyRows copies rows rows of n bytes from src (stride lds) to dst
// (stride ldd), AVX512BW.
//
//go:noescape
func copyRows(dst *uint8, ldd int, src *uint8, lds int, n int, rows int)
