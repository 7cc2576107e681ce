package amd64

import (
	"fmt"
	"testing"
	"unsafe"
)

// aligned returns n float32s starting at a multiple of 64 bytes plus off.
func alignedF32(n, off int) []float32 {
	s := make([]float32, n+32)
	p := uintptr(unsafe.Pointer(&s[0]))
	i := int((64-p%64)%64) / 4
	return s[i+off : i+off+n]
}

// BenchmarkSgemm6x16Micro runs the packed 6x16 tile on L1-resident
// panels (k=256), separating the microkernel from packing and memory.
func BenchmarkSgemm6x16Micro(b *testing.B) {
	if !Enabled {
		b.Skip("no AVX2+FMA")
	}
	for _, off := range []int{0, 4, 1} {
		name := map[int]string{0: "align64", 4: "align16", 1: "align4"}[off]
		b.Run(name, func(b *testing.B) {
			const k = 256
			a, bb := alignedF32(6*k, off), alignedF32(16*k, off)
			c := alignedF32(6*16, 0)
			for i := range a {
				a[i] = float32(i%7) * 0.25
			}
			for i := range bb {
				bb[i] = float32(i%5) * 0.5
			}
			for i := 0; i < b.N; i++ {
				Sgemm6x16(k, &a[0], &bb[0], &c[0], 16, 0, nil)
			}
			b.ReportMetric(2*6*16*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
	b.Run("RB", func(b *testing.B) {
		const k = 256
		a, bb := alignedF32(6*k, 0), alignedF32(16*k, 0)
		c := alignedF32(6*16, 0)
		rows := [6]*float32{}
		for i := range rows {
			rows[i] = &a[i*k]
		}
		for i := 0; i < b.N; i++ {
			Sgemm6x16RB(k, &rows, &bb[0], 16, &c[0], 16, 0, nil)
		}
		b.ReportMetric(2*6*16*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("peak", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			FMALoop(256 * 8 / 12)
		}
		b.ReportMetric(192*float64(256*8/12)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

// BenchmarkSgemmBlockMicro runs one k block (256) of one row group (96
// rows) over 16 column panels as the GEMM's unit does: A read in place
// (stride lda), B packed (a 256 KiB block) or read in place (stride ldb),
// C at stride ldc, loaded and stored by each tile.
func BenchmarkSgemmBlockMicro(b *testing.B) {
	if !Enabled {
		b.Skip("no AVX2+FMA")
	}
	const k, mr, np, nq = 256, 6, 16, 16
	for _, ld := range []int{512, 528} {
		for _, rb := range []bool{false, true} {
			b.Run(fmt.Sprintf("ld%d/RB=%v", ld, rb), func(b *testing.B) {
				a := alignedF32(np*mr*ld, 0)
				bp := alignedF32(nq*16*k, 0)
				bd := alignedF32(k*ld, 0)
				c := alignedF32(np*mr*ld, 0)
				for i := range a {
					a[i] = float32(i%7) * 0.25
				}
				for i := range bp {
					bp[i] = float32(i%5) * 0.5
				}
				for i := range bd {
					bd[i] = float32(i%5) * 0.5
				}
				var rows [np][6]*float32
				for p := range rows {
					for i := range rows[p] {
						rows[p][i] = &a[(p*mr+i)*ld]
					}
				}
				for i := 0; i < b.N; i++ {
					for q := 0; q < nq; q++ {
						for p := 0; p < np; p++ {
							if rb {
								Sgemm6x16RB(k, &rows[p], &bd[q*16], ld, &c[p*mr*ld+q*16], ld, 1, nil)
							} else {
								Sgemm6x16R(k, &rows[p], &bp[q*16*k], &c[p*mr*ld+q*16], ld, 1, nil)
							}
						}
					}
				}
				b.ReportMetric(2*mr*16*k*np*nq*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
