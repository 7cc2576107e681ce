package nn

import (
	"sync"

	"github.com/vouchml/vouch/kernel/amd64"
)

// blockATile is the tile of the AVX2 blocked convolution: 6 output pixels
// (consecutive in a run of rows, so a tile may wrap to the next row) of
// one 16-channel block (amd64.BlockA; a unit's last tile has 1 to 6). Each output's chain is ConvZ's:
// packPx orders the steps by input channel and tap whatever the panel
// width, so the bits do not depend on the tile.
var blockATile = zShape{R: 1, T: 6, C: 1}

// blockedAJob is convBlocked's job without AVX-512: units are (block of
// output channels, run of rows), as blockedJob's.
type blockedAJob struct {
	s         *convSetup
	d         *directPack
	bi, bo    B16
	x, y, res []float32
	clamp     *[2]float32
	rpu, ngr  int
	np        int
	rowsOuter bool
}

var blockedAJobs = sync.Pool{New: func() any { return new(blockedAJob) }}

// convBlockedA is convBlocked on AVX2 (d packed in panels of 16 channels).
func convBlockedA(pool machine, s *convSetup, d *directPack, bi, bo B16, xb, yb, res []float32, clamp *[2]float32) {
	g := s.g
	OH, OW := g.out[0], g.out[1]
	// About 32 tiles a unit: the panel is read once per tile, the rows
	// of the unit's input stay in cache across the panels.
	rpu := max(1, 192/OW)
	np := s.M / 16
	j := blockedAJobs.Get().(*blockedAJob)
	*j = blockedAJob{s: s, d: d, bi: bi, bo: bo, x: xb, y: yb, res: res, clamp: clamp, rpu: rpu,
		ngr: (OH + rpu - 1) / rpu, np: np, rowsOuter: len(d.offs)*s.M < bi.Len()}
	pool.Run(np*j.ngr, s.M*prod(g.out)*len(d.offs), j)
	*j = blockedAJob{}
	blockedAJobs.Put(j)
}

func (j *blockedAJob) Run(lo, hi int) {
	var px, out, rp [6]*float32
	s, d, g := j.s, j.d, j.s.g
	K := len(d.offs)
	OH, OW, sh, sw := g.out[0], g.out[1], g.stride[0], g.stride[1]
	pt, pl := g.padB[0], g.padB[1]
	rsi, rso, bso := j.bi.RowStride(), j.bo.RowStride(), j.bo.BlockStride()
	var resp *[6]*float32
	if j.res != nil {
		resp = &rp
	}
	for u := lo; u < hi; u++ {
		q, gr := u/j.ngr, u%j.ngr
		if j.rowsOuter {
			q, gr = u%j.np, u/j.np
		}
		oy0, oy1 := gr*j.rpu, min(OH, (gr+1)*j.rpu)
		var bias *float32
		if d.bias != nil {
			bias = &d.bias[q*16]
		}
		pan := &d.panels[q*K*16]
		// The block's group's first input block (as blockedJob's).
		gx := q * 16 / s.Mg * (s.Cg / 16) * j.bi.BlockStride()
		n := 0
		for oy := oy0; oy < oy1; oy++ {
			xr := gx + (oy*sh-pt+1)*rsi - pl*16 + 16
			yr := q*bso + (oy+1)*rso + 16
			for ox := 0; ox < OW; ox++ {
				px[n] = &j.x[xr+ox*sw*16]
				o := yr + ox*16
				_ = j.y[o+15]
				out[n] = &j.y[o]
				if resp != nil {
					_ = j.res[o+15]
					rp[n] = &j.res[o]
				}
				n++
				if n == 6 {
					amd64.BlockA(6, K, &px, &d.offs[0], pan, bias, &out, resp, j.clamp)
					n = 0
				}
			}
		}
		if n > 0 {
			amd64.BlockA(n, K, &px, &d.offs[0], pan, bias, &out, resp, j.clamp)
		}
	}
}

// toB16A is ToB16 without AVX-512 (the ring is zeroed after).
func toB16A(b B16, x, dst []float32) {
	H, W := b.H, b.W
	HW := H * W
	rs, bs := b.RowStride(), b.BlockStride()
	for q := 0; q < b.C/16; q++ {
		for yy := 0; yy < H; yy++ {
			row := dst[q*bs+(yy+1)*rs+16 : q*bs+(yy+2)*rs-16]
			for c := 0; c < 16; c++ {
				src := x[(q*16+c)*HW+yy*W : (q*16+c)*HW+yy*W+W]
				for i, v := range src {
					row[i*16+c] = v
				}
			}
		}
	}
	zeroRing(b, dst)
}

// fromB16A is FromB16 without AVX-512.
func fromB16A(b B16, src, y []float32) {
	H, W := b.H, b.W
	HW := H * W
	rs, bs := b.RowStride(), b.BlockStride()
	for q := 0; q < b.C/16; q++ {
		for yy := 0; yy < H; yy++ {
			row := src[q*bs+(yy+1)*rs+16 : q*bs+(yy+2)*rs-16]
			for c := 0; c < 16; c++ {
				dst := y[(q*16+c)*HW+yy*W : (q*16+c)*HW+yy*W+W]
				for i := range dst {
					dst[i] = row[i*16+c]
				}
			}
		}
	}
}
