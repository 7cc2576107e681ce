package amd64

import "golang.org/x/sys/cpu"

// Enabled reports whether this CPU (and OS) supports the AVX2 and FMA
// instructions the kernels use.
var Enabled = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasAVX

// Store is what a GEMM microkernel does with a tile's finished chains in
// its final store (the field offsets are fixed: the assembly reads them).
// Each lane's value is canon(acc), then + Bias[i] (row i) when Bias is
// not nil, then + R[i*LDR+j] when R is not nil (v + r, v the first
// operand), then, when Clamp, v = Lo > v ? Lo : v and v = Hi < v ? Hi : v:
// amd64.Epi's operations in its order, applied before the tile is
// written instead of in a pass over it.
type Store struct {
	Bias   *float32 // 0: 6 floats, or nil
	R      *float32 // 8: the residual tile, or nil
	LDR    int      // 16: its row stride in floats
	Lo, Hi float32  // 24, 28
	Clamp  bool     // 32
}

// Sgemm6x16 computes one 6x16 tile of C from a packed A panel (k steps of
// 6 floats, a[kk*6+i]) and a packed B panel (k steps of 16 floats,
// b[kk*16+j]): for each of the 96 outputs acc = FMA(a, b, acc) for kk
// ascending, starting from +0 when load is 0 and from the float32 already
// in C when load is 1 (a chain parked in memory between k blocks). The
// tile is stored to c with a row stride of ldc floats; a NaN lane is
// stored as the canonical quiet NaN 0x7fc00000. When st is not nil, the
// stored value is canon(acc) followed by st's operations (see Store).
//
//go:noescape
func Sgemm6x16(k int, a, b, c *float32, ldc int, load int, st *Store)

// Sgemm6x16R is Sgemm6x16 with A read in place: row i's step kk is
// rows[i][kk] (rows[i] pointing at the k block's first element), so A
// needs no packing. Rows past the matrix may point at any readable row:
// their lanes are separate chains that the caller throws away.
//
//go:noescape
func Sgemm6x16R(k int, rows *[6]*float32, b, c *float32, ldc int, load int, st *Store)

// Sgemm6x16RB is Sgemm6x16R with B read in place too: step kk's 16
// floats at b[kk*ldb:].
//
//go:noescape
func Sgemm6x16RB(k int, rows *[6]*float32, b *float32, ldb int, c *float32, ldc int, load int, st *Store)

// Sgemm6x8R is the left half of Sgemm6x16R: the 6x8 tile of lanes 0-7 of
// a packed B panel (steps still 16 floats apart), stored as 6 rows of 8.
// It takes only a bias (row i stores canon(acc) + bias[i] when bias is
// not nil, 6 floats).
//
//go:noescape
func Sgemm6x8R(k int, rows *[6]*float32, b, c *float32, ldc int, load int, bias *float32)

// FMALoop runs n iterations of 12 independent VFMADD231PS on ymm
// registers (192 flops each): a measure of the core's FMA peak.
//
//go:noescape
func FMALoop(n int)

// MaxRowS1 sets y[j] (n outputs, n a multiple of 8) to the first largest
// non-NaN value of x[j .. j+kw-1]: best = -inf, then for each tap in order
// best = v > best ? v : best.
//
//go:noescape
func MaxRowS1(x *float32, kw int, y *float32, n int)

// MaxRowS2 is MaxRowS1 at stride 2: the taps of y[j] are x[2j .. 2j+kw-1].
// It reads x[0 .. 2n-1+((kw-1)&^1)].
//
//go:noescape
func MaxRowS2(x *float32, kw int, y *float32, n int)

// MaxInto sets dst[i] = src[i] > dst[i] ? src[i] : dst[i] for i < n (n a
// multiple of 8).
//
//go:noescape
func MaxInto(dst, src *float32, n int)

// NaNFirstS1 sets y[i] = x[i] where x[i] is a NaN, for i < n (n a
// multiple of 8).
//
//go:noescape
func NaNFirstS1(x, y *float32, n int)

// NaNFirstS2 sets y[i] = x[2i] where x[2i] is a NaN, for i < n (n a
// multiple of 8). It reads x[0 .. 2n-1].
//
//go:noescape
func NaNFirstS2(x, y *float32, n int)

// GemvG16 computes 16 outputs of one row of a GEMM without packing: for
// lane j < 16 with mask[j] = -1, y[j] is the chain over kk < k ascending
// from +0 of acc = FMA(x[kk*xs], b[kk*brs + idx[j]], acc) (B's elements
// fetched with a gather); a NaN is stored as 0x7fc00000. Lanes with
// mask[j] = 0 read nothing and store an unspecified value.
//
//go:noescape
func GemvG16(k int, x *float32, xs int, b *float32, brs int, idx, mask *int32, y *float32)

// GemvC16 is GemvG16 for B's columns contiguous: idx[j] = j, the 16 (or,
// masked, fewer) values of each step read with masked loads.
//
//go:noescape
func GemvC16(k int, x *float32, xs int, b *float32, brs int, mask *int32, y *float32)

// Copy16s copies n groups of 16 floats, the i-th from src[16i:] to
// dst[i*stride:] (a packed panel's step written into n panels).
//
//go:noescape
func Copy16s(dst *float32, stride int, src *float32, n int)

// Even sets dst[i] = src[2i] for i < n (n a multiple of 8); it reads
// src[0 .. 2n-1].
//
//go:noescape
func Even(dst, src *float32, n int)

// Epi applies a fused layer's epilogue (kernel.Epilogue) to a rows x cols
// block of y (row stride ldy floats), in place: for each element,
// v = y (+ r when r is not nil: v = y + r, y the first operand, r's row
// stride ldr), then v = lo > v ? lo : v, then v = hi < v ? hi : v (the
// comparisons of Relu and Clip, so a NaN passes through and -0 stays -0;
// lo = -Inf and hi = +Inf leave v as it is). Hand-written in epi_amd64.s.
//
//go:noescape
func Epi(y *float32, ldy int, r *float32, ldr int, rows, cols int, lo, hi float32)

// Features lists the CPU features the vector kernels use on this machine
// (a plan records them: a machine without them runs the portable twins,
// which give the same bits).
func Features() []string {
	var f []string
	if Enabled {
		f = append(f, "avx", "avx2", "fma")
	}
	if EnabledZ {
		f = append(f, "avx512f")
	}
	return f
}
