package nn

import "math"

// directRows is, for a planar TacticDirect convolution some of whose
// output rows have kernel rows that read only padding (a dilated
// convolution over a small plane: DeepLabV3's ASPP 3x3s of dilation 12 on
// 14x14 planes, where most output rows see the middle kernel row alone),
// each output row's shorter chain: the taps of its kernel rows that read
// the input (all of each such row's columns), in the chain's order, with
// their own packed panels. The taps left out read +0 from the padded
// planes, and FMA(+0, w, acc) is acc for a finite w and any acc a chain
// from +0 holds (never -0 in round-to-nearest): dropping them leaves each
// output's bits as they are, so the rows are used only where every weight
// is finite. A tile of one output row runs its row's chain (ConvZ with the
// class's steps); a tile of two rows of different classes runs all taps.
type directRows struct {
	class []int8 // output row -> class, -1: all taps
	cls   []rowClass
}

// rowClass is the chain of the output rows whose reading kernel rows are
// one set: k steps, their tap offsets, np panels of k steps (panel q at
// panels[q*k*cw:]).
type rowClass struct {
	k      int
	offs   []int32
	panels []float32
}

// newDirectRows returns s's row classes for the packed d (planar, px 1),
// or nil where they would save less than a quarter of the steps, a row's
// taps all read padding, or a weight is not finite.
func newDirectRows(s *convSetup, d *directPack, w []float32) *directRows {
	g := s.g
	if len(g.in) != 2 || d.px != 1 || g.k[0] < 2 {
		return nil
	}
	H, OH, KH, KW := g.in[0], g.out[0], g.k[0], g.k[1]
	masks := make([]uint64, OH)
	steps, full := 0, OH*len(d.offs)
	for oy := range masks {
		n := 0
		for ky := 0; ky < KH && ky < 64; ky++ {
			if iy := oy*g.stride[0] + ky*g.dil[0] - g.padB[0]; iy >= 0 && iy < H {
				masks[oy] |= 1 << ky
				n++
			}
		}
		if n == 0 || KH > 64 {
			return nil
		}
		steps += s.Cg * n * KW
	}
	if 4*steps > 3*full {
		return nil
	}
	for _, v := range w {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return nil
		}
	}
	r := &directRows{class: make([]int8, OH)}
	byMask := map[uint64]int8{}
	K, cw := len(d.offs), d.cw
	np := len(d.panels) / (K * cw)
	for oy, m := range masks {
		if m == 1<<KH-1 {
			r.class[oy] = -1
			continue
		}
		c, ok := byMask[m]
		if !ok {
			if len(r.cls) == 127 {
				return nil
			}
			// The chain's steps kk = (c*KH + ky)*KW + kx whose ky is in m.
			var keep []int
			for kk := 0; kk < K; kk++ {
				if m>>(kk/KW%KH)&1 != 0 {
					keep = append(keep, kk)
				}
			}
			rc := rowClass{k: len(keep), offs: make([]int32, len(keep)), panels: make([]float32, np*len(keep)*cw)}
			for i, kk := range keep {
				rc.offs[i] = d.offs[kk]
				for q := 0; q < np; q++ {
					copy(rc.panels[(q*len(keep)+i)*cw:(q*len(keep)+i+1)*cw], d.panels[(q*K+kk)*cw:(q*K+kk+1)*cw])
				}
			}
			c = int8(len(r.cls))
			r.cls = append(r.cls, rc)
			byMask[m] = c
		}
		r.class[oy] = c
	}
	if len(r.cls) == 0 {
		return nil
	}
	return r
}
