package nn

import (
	"fmt"
	"sync"

	"github.com/vouchml/vouch/kernel/amd64"
)

// B16 is the blocked layout of a float32 activation of C channels (a
// multiple of 16) and H x W pixels: C/16 blocks, each (H+2) x (W+2)
// pixels of 16 floats (the block's 16 channels), the outer ring of pixels
// zero. A chain of direct convolutions on B16 tensors needs neither a
// padded copy of each input (the ring is the padding of a 3x3, pad-1
// convolution) nor a transpose of each output into planes (a tile of 16
// channels by T pixels is stored as it is computed), the two costs that
// separate conv.direct's kernel from its layer (see docs/benchmarks.md).
// Every output is still conv.direct's chain, so the bits are those of the
// planar convolution.
type B16 struct{ C, H, W int }

// RowStride and BlockStride are the floats between rows and between blocks.
func (b B16) RowStride() int   { return (b.W + 2) * 16 }
func (b B16) BlockStride() int { return (b.H + 2) * b.RowStride() }

// Len is the tensor's length in floats; a buffer holding it needs Slack
// more floats behind it (the kernels read past the last row's end for the
// padding pixels of a tile, whose results are not stored).
func (b B16) Len() int { return b.C / 16 * b.BlockStride() }

// B16Slack is the floats a B16 buffer needs after Len (see Len).
const B16Slack = 64 * 16

// At is the index of channel c at pixel (y, x), y in [-1, H], x in [-1, W].
func (b B16) At(c, y, x int) int {
	return c/16*b.BlockStride() + (y+1)*b.RowStride() + (x+1)*16 + c%16
}

// ToB16 writes the planar tensor x (C planes of H x W) into dst in layout
// b, its ring zero.
func ToB16(b B16, x, dst []float32) {
	clear(dst[:b.Len()])
	for c := 0; c < b.C; c++ {
		for y := 0; y < b.H; y++ {
			for xx := 0; xx < b.W; xx++ {
				dst[b.At(c, y, xx)] = x[(c*b.H+y)*b.W+xx]
			}
		}
	}
}

// FromB16 writes the tensor src in layout b into the planes of y.
func FromB16(b B16, src, y []float32) {
	for c := 0; c < b.C; c++ {
		for yy := 0; yy < b.H; yy++ {
			for x := 0; x < b.W; x++ {
				y[(c*b.H+yy)*b.W+x] = src[b.At(c, yy, x)]
			}
		}
	}
}

// zTileB picks s's ConvZ tile for a B16 input, as zTile does for planes
// (tests of every blocked kernel shape force one: forced.tileZB).
func zTileB(pool machine, s *convSetup) (zShape, bool) {
	if z := pool.f().tileZB; z.R != 0 {
		return z, true
	}
	return zTileAt(s, 16*s.g.stride[1], false)
}

// convBlockedOK reports whether s runs on B16 tensors here (AVX2; one
// group, or groups of whole blocks of input and output channels, so that
// a panel reads its group's blocks: RegNetX's 16-channel groups; 2-D;
// channels in whole blocks; pads of at most 1, the ring; no dilation; the
// same stride, 1 or 2, both ways), and with which tile (zTileAt keeps a
// panel's channels in one group; without AVX-512, blockATile).
func convBlockedOK(pool machine, s *convSetup) (zShape, bool) {
	g := s.g
	if !pool.fast || s.G != 1 && (s.Cg%16 != 0 || s.Mg%16 != 0) || len(g.in) != 2 || s.C%16 != 0 || s.M%16 != 0 ||
		g.dil[0] != 1 || g.dil[1] != 1 || g.stride[0] != g.stride[1] || g.stride[0] > 2 {
		return zShape{}, false
	}
	for i := range g.padB {
		if g.padB[i] > 1 || g.padE[i] > 1 {
			return zShape{}, false
		}
	}
	if !pool.z {
		return blockATile, true
	}
	return zTileB(pool, s)
}

// convBlocked computes the convolution s (convBlockedOK) of the B16
// tensor xb (layout s.C, g.in; B16Slack floats after it) into yb (layout
// s.M, g.out), one image: each output canon(acc) + bias, then + the B16
// residual res (laid out as yb) when not nil, then clamped to [lo, hi]
// when clamp (amd64.Epi's order). yb's ring is zeroed.
func convBlocked(pool machine, s *convSetup, z zShape, xb, w, bias, yb, res []float32, clamp *[2]float32) {
	g := s.g
	bi, bo := B16{s.C, g.in[0], g.in[1]}, B16{s.M, g.out[0], g.out[1]}
	if len(xb) < bi.Len()+B16Slack || len(yb) < bo.Len() || (res != nil && len(res) < bo.Len()) {
		panic(fmt.Sprintf("nn: convBlocked: buffers of %d, %d floats for %v -> %v", len(xb), len(yb), bi, bo))
	}
	if !pool.z {
		z = blockATile
	} else if z == blockATile {
		// Prepared without AVX-512 (a chain planned at ISAAVX2), run with it.
		var ok bool
		if z, ok = zTileB(pool, s); !ok {
			panic(fmt.Sprintf("nn: convBlocked: no ConvZ tile for %v -> %v", bi, bo))
		}
	}
	d := s.packPx(w, bias, 16*z.C, bi.RowStride(), bi.BlockStride(), 16)
	if !pool.z {
		convBlockedA(pool, s, d, bi, bo, xb, yb, res, clamp)
		zeroRing(bo, yb)
		return
	}
	OH, OW := g.out[0], g.out[1]
	owt := (OW + z.T - 1) / z.T * z.T
	rpu := max(1, 256/z.C/owt/z.R) * z.R
	np := (s.M + 16*z.C - 1) / (16 * z.C)
	j := blockedJobs.Get().(*blockedJob)
	*j = blockedJob{s: s, d: d, z: z, bi: bi, bo: bo, x: xb, y: yb, res: res, clamp: clamp, rpu: rpu,
		ngr: (OH + rpu - 1) / rpu, np: np, rowsOuter: len(d.offs)*s.M < bi.Len(),
		pfTiles: pool.pfTiles((OH + z.R - 1) / z.R * ((OW + z.T - 1) / z.T))}
	pool.Run(np*j.ngr, s.M*prod(g.out)*len(d.offs), j)
	*j = blockedJob{}
	blockedJobs.Put(j)
	zeroRing(bo, yb)
}

// zeroRing zeroes the ring of each block of the B16 tensor t.
func zeroRing(b B16, t []float32) {
	rs, bs := b.RowStride(), b.BlockStride()
	for q := 0; q < b.C/16; q++ {
		blk := t[q*bs : (q+1)*bs]
		clear(blk[:rs])
		clear(blk[bs-rs:])
		for y := 1; y <= b.H; y++ {
			clear(blk[y*rs : y*rs+16])
			clear(blk[(y+1)*rs-16 : (y+1)*rs])
		}
	}
}

// blockedJob is one image of convBlocked; units are (panel, row group),
// as directZJob's.
type blockedJob struct {
	s                  *convSetup
	d                  *directPack
	z                  zShape
	bi, bo             B16
	x, y, res          []float32
	clamp              *[2]float32
	rpu, ngr, np       int
	rowsOuter, pfTiles bool
}

var blockedJobs = sync.Pool{New: func() any { return new(blockedJob) }}

func (j *blockedJob) Run(lo, hi int) {
	var scratch zScratchB
	var base [2]*float32
	s, d, g, z := j.s, j.d, j.s.g, j.z
	K := len(d.offs)
	OH, OW, sh, sw := g.out[0], g.out[1], g.stride[0], g.stride[1]
	pt, pl := g.padB[0], g.padB[1]
	cw := d.cw
	rsi, rso, bso := j.bi.RowStride(), j.bo.RowStride(), j.bo.BlockStride()
	for u := lo; u < hi; u++ {
		q, gr := u/j.ngr, u%j.ngr
		if j.rowsOuter {
			q, gr = u%j.np, u/j.np
		}
		oy0, oy1 := gr*j.rpu, min(OH, (gr+1)*j.rpu)
		var bias *float32
		if d.bias != nil {
			bias = &d.bias[q*cw]
		}
		pan := &d.panels[q*K*cw]
		blocks := min(z.C, s.M/16-q*z.C)
		// The panel's group's first input block (the tap offsets are
		// within a group: packPx over s.Cg channels).
		gx := q * cw / s.Mg * (s.Cg / 16) * j.bi.BlockStride()
		var pfb []float32
		if j.pfTiles {
			nq := (q + 1) % j.np
			pfb = d.panels[nq*K*cw : (nq+1)*K*cw]
		}
		tile := 0
		for oy := oy0; oy < oy1; oy += z.R {
			for ox := 0; ox < OW; ox += z.T {
				var pf *float32
				if pfb != nil {
					pf = &pfb[(tile*K*16)%len(pfb)]
				}
				tile++
				for r := 0; r < z.R; r++ {
					// Input pixel (oy*sh - pt, ox*sw - pl), the ring at -1.
					base[r] = &j.x[gx+(min(oy+r, OH-1)*sh-pt+1)*rsi+(ox*sw-pl+1)*16]
				}
				if !amd64.ConvZ(z.R, z.T, z.C, 16*sw, K, &base, &d.offs[0], pan, bias, &scratch[0], nil, pf) {
					panic(fmt.Sprintf("nn: no ConvZ kernel for tile %+v, stride %d", z, 16*sw)) // zTileB picks listed tiles only
				}
				nt := min(z.T, OW-ox)
				for r := 0; r < z.R && oy+r < oy1; r++ {
					o := q*z.C*bso + (oy+r+1)*rso + (ox+1)*16
					_ = j.y[o+(blocks-1)*bso+nt*16-1]
					var rp *float32
					if j.res != nil {
						_ = j.res[o+(blocks-1)*bso+nt*16-1]
						rp = &j.res[o]
					}
					amd64.StoreZB(&scratch[r*z.T*cw], cw, nt, &j.y[o], bso, blocks, rp, j.clamp)
				}
			}
		}
	}
}

// zScratchB is a tile's pixel-major outputs (at most 32 pixels of 32
// channels, or 16 of 64).
type zScratchB [32 * 32]float32
