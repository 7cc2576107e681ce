package nn

import (
	"bytes"
	"math"
	"sync"
	"unsafe"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
)

// convTransposeTiled computes a float32 ConvTranspose whose kernel tiles
// the output (stride equal to the kernel, dilation 1, no pads or output
// padding, one group: U-Net's 2x2/2 up-convolutions) as one GEMM over all
// kernel taps: output (oy, ox) of tap (ky, kx) = (oy mod sh, ox mod sw)
// reads only input (oy div sh, ox div sw), so row (m, t) of T = W'·X with
// W'[(m, t)][c] = W[c][m][t] is that tap's output plane, scattered into
// place with the bias, y = acc + B[m], when bias is not nil. convGEMM's
// chain for that output runs over every (c, tap) of the zero-inserted
// columns; the taps of the other residues read +0, and FMA(+0, w, acc) is
// acc for a finite w and any acc a chain from +0 can hold (never -0 in
// round-to-nearest), so dropping them leaves the chain over c of the one
// live tap: the same bits, and the bias is the same float32 addition
// addBias makes. The GEMM runs over bands
// of input rows (ctBand), each band's T kept in cache for its scatter,
// the bands spread over the workers; W' is kept in the node's kernel.State (one GEMM of M*taps rows instead of
// one of M rows per tap: unet_small's 16- and 32-row up-convolutions
// filled few register tiles, and a whole-plane T went out to memory
// between the GEMM and the scatter). It reports false, computing nothing,
// when the geometry differs or a weight is not finite.
func convTransposeTiled(pool machine, n *ir.Node, s *convSetup, x, w, bias, y []float32) bool {
	g := s.g
	if s.G != 1 || len(g.in) != 2 {
		return false
	}
	for i := 0; i < 2; i++ {
		if g.stride[i] != g.k[i] || g.dil[i] != 1 || g.padB[i] != 0 || g.padE[i] != 0 || g.out[i] != g.in[i]*g.k[i] {
			return false
		}
	}
	kn := g.k[0] * g.k[1]
	rows := s.M * kn
	ws, _ := kernel.Prepared(pool.k, ctWeightsKey{n}, func(e *ctWeights) bool {
		return len(e.w) == len(w) && bytes.Equal(f32Bytes(e.w), f32Bytes(w))
	}, func() (*ctWeights, error) { return newCTWeights(w, s.C, rows), nil })
	if !ws.finite {
		return false
	}
	j := ctJobs.Get().(*ctJob)
	*j = ctJob{s: s, x: x, wt: ws.wt, bias: bias, y: y, pool: pool, rows: rows, band: ctBand(rows, g.in[0], g.in[1])}
	j.pool.Pool = nil
	nb := (g.in[0] + j.band - 1) / j.band
	pool.Run(s.N*nb, s.N*rows*g.in[0]*g.in[1]*s.C, j)
	*j = ctJob{}
	ctJobs.Put(j)
	return true
}

// ctWeightsKey keys a ConvTranspose node's ctWeights in its kernel.State.
type ctWeightsKey struct{ n *ir.Node }

// ctWeights is W' for convTransposeTiled, kept with the W it was made
// from (a W that differs from it, an input that is not an initializer,
// is transposed again: the check is a comparison of W's bytes, far
// cheaper than the transposition) and whether every weight is finite.
type ctWeights struct {
	w, wt  []float32
	finite bool
}

func newCTWeights(w []float32, c, rows int) *ctWeights {
	e := &ctWeights{w: append([]float32(nil), w...), finite: true}
	for _, v := range w {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			e.finite = false
			return e
		}
	}
	e.wt = make([]float32, len(w))
	transpose32(e.wt, w, c, rows)
	return e
}

// f32Bytes views v's memory as bytes.
func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// ctBand is the input rows per band: a band's T (rows x band*W floats)
// at most 32 Ki floats (128 KiB, in L2), at least one row.
func ctBand(rows, H, W int) int {
	return min(H, max(1, (32<<10)/(rows*W)))
}

// ctJob is convTransposeTiled's units: (image, band of input rows).
type ctJob struct {
	s              *convSetup
	x, wt, bias, y []float32
	pool           machine // one worker: the units are spread already
	rows, band     int
}

var ctJobs = sync.Pool{New: func() any { return new(ctJob) }}

func (j *ctJob) Run(lo, hi int) {
	s, g := j.s, j.s.g
	H, W, KH, KW := g.in[0], g.in[1], g.k[0], g.k[1]
	P, kn, OW, OP := H*W, KH*KW, g.out[1], prod(g.out)
	nb := (H + j.band - 1) / j.band
	tmp := getF32(j.rows * j.band * W)
	for u := lo; u < hi; u++ {
		ni, y0 := u/nb, u%nb*j.band
		y1 := min(H, y0+j.band)
		bw := (y1 - y0) * W
		t := (*tmp)[:j.rows*bw]
		sgemmP(j.pool, j.rows, bw, s.C, j.wt, s.C, 1, j.x[ni*s.C*P+y0*W:], P, 1, t, bw)
		for m := 0; m < s.M; m++ {
			ym := j.y[(ni*s.M+m)*OP:]
			tm := t[m*kn*bw : (m+1)*kn*bw]
			var b float32
			if j.bias != nil {
				b = j.bias[m]
			}
			for iy := y0; iy < y1; iy++ {
				r := (iy - y0) * W
				for ky := 0; ky < KH; ky++ {
					row := ym[(iy*KH+ky)*OW : (iy*KH+ky+1)*OW]
					if KW == 2 {
						scatter2(row, tm[ky*2*bw+r:ky*2*bw+r+W], tm[(ky*2+1)*bw+r:(ky*2+1)*bw+r+W], b, j.bias != nil)
						continue
					}
					for kx := 0; kx < KW; kx++ {
						src := tm[(ky*KW+kx)*bw+r : (ky*KW+kx)*bw+r+W]
						if j.bias == nil {
							for ix, v := range src {
								row[ix*KW+kx] = v
							}
							continue
						}
						for ix, v := range src {
							row[ix*KW+kx] = v + b
						}
					}
				}
			}
		}
	}
	putF32(tmp)
}

// scatter2 interleaves one output row of a 2-wide kernel's two taps:
// row[2i] = a[i] (+ b), row[2i+1] = c[i] (+ b) where add is set.
func scatter2(row, a, c []float32, b float32, add bool) {
	row = row[:2*len(a)]
	c = c[:len(a)]
	if !add {
		for i, v := range a {
			row[2*i], row[2*i+1] = v, c[i]
		}
		return
	}
	for i, v := range a {
		row[2*i], row[2*i+1] = v+b, c[i]+b
	}
}

// transpose32 writes the r x c matrix src (row-major) transposed into
// dst (c x r), in 16x16 blocks: a row-by-row transpose writes each
// element to another cache line.
func transpose32(dst, src []float32, r, c int) {
	const bs = 16
	for i0 := 0; i0 < r; i0 += bs {
		i1 := min(r, i0+bs)
		for j0 := 0; j0 < c; j0 += bs {
			j1 := min(c, j0+bs)
			for i := i0; i < i1; i++ {
				row := src[i*c+j0 : i*c+j1]
				for jj, v := range row {
					dst[(j0+jj)*r+i] = v
				}
			}
		}
	}
}
