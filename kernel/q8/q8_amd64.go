package q8

import "golang.org/x/sys/cpu"

// hasAVX2 reports whether the vector twins may run (AVX2 for the integer
// tile and the quantizer, F16C for half conversion).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasAVX
var hasF16C = hasAVX2 && cpu.X86.HasF16C

// hasVNNI reports whether tile6x16vnni may run (AVX512_VNNI on 256-bit
// registers: AVX512VL; x/sys/cpu also checks that the OS saves the state).
var hasVNNI = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

// tile6x16 computes a 6x16 int32 tile from packed int16 panels over kp
// k-pairs: a holds kp steps of 6 rows × 2 values, b kp steps of 16
// columns × 2 values; c (row stride ldc int32s) receives the sums, added
// to what c holds when load is 1.
//
//go:noescape
func tile6x16(kp int, a, b *int16, c *int32, ldc int, load int)

// tile6x16vnni is tile6x16 with VPDPWSSD (the same exact sums).
//
//go:noescape
func tile6x16vnni(kp int, a, b *int16, c *int32, ldc int, load int)

// halfToFloat converts n (a multiple of 8) float16 values with F16C.
//
//go:noescape
func halfToFloat(dst *float32, src *uint16, n int)

// quant8 quantizes n (a multiple of 8) float32 values (see quantize).
//
//go:noescape
func quant8(dst *int16, src *float32, inv float32, n int)

// interleave packs kp k-pairs of a full 16-column panel: for each kk,
// rows src[2kk*ldb:][:16] and src[(2kk+1)*ldb:][:16] become dst[kk*32:]
// as (r0[0], r1[0], r0[1], r1[1], ...).
//
//go:noescape
func interleave(dst, src *int16, ldb int, kp int)

// epiRow is the vector twin of epilogueRow over n (a multiple of 8)
// values; res may be nil, relu is 0 or 1.
//
//go:noescape
func epiRow(y *float32, acc *int32, n int, m, b float32, res *float32, relu int)

// gatherPairs packs kp k-pairs of a full 16-column panel whose rows lie at
// int16 offsets offs[2kk] and offs[2kk+1] from src (see packDirect).
//
//go:noescape
func gatherPairs(dst, src *int16, offs *int, kp int)
