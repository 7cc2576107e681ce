package nn

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
)

// TacticDirect is the direct convolution (amd64.Conv6x16): no im2col and
// no per-call packing. Each output is the same chain as the im2col GEMM's
// (acc = FMA over k = (channel, ky, kx) ascending from +0, padding taps
// included as FMA(0, w, acc)), so the bits are those of every other
// tactic. The GEMM runs transposed: 16 output channels are the vector
// lanes, with their weights packed once into panels (w[kk*16+c]), and 6
// output pixels are the rows, each tap broadcast straight from the
// (zero-padded) input planes through a table of tap offsets. All k steps
// stay in registers (no k blocks: no partial sums parked in memory), the
// tile goes to a pixel-major scratch block in L1, and that block is
// transposed into the NCHW output with the epilogue. It needs constant
// weights: they are packed on first use and kept with the layer's setup.
const TacticDirect = "conv.direct"

func init() { kernel.RegisterConstInputs(TacticDirect, 1) }

const (
	dirMR = 6  // pixels per tile
	dirNR = 16 // output channels per panel
	dirPC = 96 // pixels per unit (16 tiles)
	// dirKB is the k block of the AVX2 kernel in steps: a unit runs its
	// tiles' chains dirKB steps at a time, the partial sums parked in the
	// unit's scratch (amd64.DirLoad/DirFinal: the same bits), so that a
	// block's weights (dirKB*64 bytes) are read from L1 by all the unit's
	// tiles instead of from L2 by each: a panel of a layer of K = Cin*9
	// >= 4096 steps is 256 KiB. Layers of fewer than dirKBMin steps run
	// their chains in one block (no gain measured there).
	dirKB    = 256
	dirKBMin = 2048
)

// directPack is a layer's packed weights: panel q (channels 16q..) at
// panels[q*K*16:], step kk at [kk*16:], channels past M zero; the bias
// likewise zero-padded to whole panels; and the tap offsets.
type directPack struct {
	w, b    unsafe.Pointer // the weights and bias they were packed from
	cw      int            // channels per panel (16 or, for ConvZ, 16C)
	panels  []float32
	bias    []float32
	offs    []int32
	wp, hwp int
	px      int         // floats between pixels (packPx)
	rows    *directRows // shorter chains of output rows (planar), or nil
}

// directOK reports whether s can run as TacticDirect here: a fast CPU,
// one group or groups of whole 16-channel panels (directGroups), two
// spatial dimensions, and an epilogue whose residual is not the output
// itself.
func directOK(pool machine, s *convSetup, y []float32, ep epi) bool {
	return pool.fast && directGroups(s) && len(s.g.in) == 2 && !(ep.on && overlaps(ep.r, y))
}

// directGroups reports whether s's groups suit TacticDirect: one group,
// or groups whose output channels fill whole 16-channel panels, so that
// each panel reads one group's input planes (RegNet's and ResNeXt's 3x3
// convolutions of 16 or 32 channels a group). A panel's chain is the
// group's chain: its Cg channels' taps in order, from its first plane.
func directGroups(s *convSetup) bool { return s.G == 1 || s.Mg%dirNR == 0 }

// groupAt returns, for a panel width of cw channels, how many panels a
// group has and the floats between consecutive groups' input planes
// (hwp floats a plane); one group gives a stride of 0.
func (s *convSetup) groupAt(cw, hwp int) (pg, gx int) {
	if s.G == 1 {
		return 1, 0
	}
	return s.Mg / cw, s.Cg * hwp
}

// pack returns s's packed weights for w and bias, packing them on first
// use (or when called with other slices).
func (s *convSetup) pack(w, bias []float32, cw, wp, hwp int) *directPack {
	return s.packPx(w, bias, cw, wp, hwp, 1)
}

// packPx is pack for an input whose pixels are px floats apart: 1 for
// planes (channel c's plane at c*hwp), 16 for 16-channel blocks (block
// c/16 at (c/16)*hwp, channel c at lane c%16 of each pixel).
func (s *convSetup) packPx(w, bias []float32, cw, wp, hwp, px int) *directPack {
	var bp unsafe.Pointer
	if bias != nil {
		bp = unsafe.Pointer(&bias[0])
	}
	if d := s.direct.Load(); d != nil && d.w == unsafe.Pointer(&w[0]) && d.b == bp && d.cw == cw && d.wp == wp && d.hwp == hwp && d.px == px {
		return d
	}
	K := s.Cg * prod(s.g.k)
	np := (s.M + cw - 1) / cw
	d := &directPack{w: unsafe.Pointer(&w[0]), b: bp, cw: cw, wp: wp, hwp: hwp, px: px,
		panels: make([]float32, np*K*cw), offs: make([]int32, K)}
	for m := 0; m < s.M; m++ {
		pan := d.panels[m/cw*K*cw+m%cw:]
		for kk, v := range w[m*K : (m+1)*K] {
			pan[kk*cw] = v
		}
	}
	if bias != nil {
		d.bias = make([]float32, np*cw)
		copy(d.bias, bias[:s.M])
	}
	g := s.g
	kk := 0
	for c := 0; c < s.Cg; c++ {
		for ky := 0; ky < g.k[0]; ky++ {
			for kx := 0; kx < g.k[1]; kx++ {
				d.offs[kk] = int32(c/px*hwp + ky*g.dil[0]*wp + kx*g.dil[1]*px + c%px)
				kk++
			}
		}
	}
	d.rows = newDirectRows(s, d, w)
	s.direct.Store(d)
	return d
}

// convDirect runs TacticDirect (directOK(s) must hold).
func convDirect(pool machine, s *convSetup, x, w, bias, y []float32, ep epi) {
	g := s.g
	P, inSz := prod(g.out), prod(g.in)
	hp, wp := g.padded()
	var pad *[]float32
	padded := g.padB[0] != 0 || g.padB[1] != 0 || hp != g.in[0] || wp != g.in[1]
	if padded {
		pad = getF32(s.C*hp*wp + 2*gemmNR)
	} else {
		hp, wp = g.in[0], g.in[1]
	}
	if z, ok := zTile(pool, s); ok {
		convDirectZ(pool, s, x, w, bias, y, ep, z)
		if pad != nil {
			putF32(pad)
		}
		return
	}
	d := s.pack(w, bias, dirNR, wp, hp*wp)
	j := directJobs.Get().(*directJob)
	for ni := 0; ni < s.N; ni++ {
		xn := x[ni*s.C*inSz : (ni+1)*s.C*inSz]
		if padded {
			padPlanes(pool, xn, s.C, g, hp, wp, *pad)
			xn = *pad
		}
		*j = directJob{s: s, d: d, x: xn, y: y[ni*s.M*P : (ni+1)*s.M*P], ep: ep.at(ni * s.M * P), P: P,
			nch: (P + dirPC - 1) / dirPC, kb: len(d.offs)}
		if len(d.offs) >= dirKBMin {
			j.kb = dirKB
		}
		if f := pool.f().dirKB; f > 0 {
			j.kb = f
		}
		j.pg, j.gx = s.groupAt(dirNR, hp*wp)
		np := (s.M + dirNR - 1) / dirNR
		pool.Run(np*j.nch, s.M*P*len(d.offs), j)
	}
	*j = directJob{}
	directJobs.Put(j)
	if pad != nil {
		putF32(pad)
	}
}

// directJob is one image of convDirect; units are (panel, pixel chunk),
// panel-major, so that a worker's consecutive units share a panel.
type directJob struct {
	s    *convSetup
	d    *directPack
	x, y []float32
	ep   epi
	P    int
	nch  int
	// pg panels a group, gx floats between groups' planes (groupAt).
	pg, gx int
	kb     int // k block (steps)
}

var directJobs = sync.Pool{New: func() any { return new(directJob) }}

func (j *directJob) Run(lo, hi int) {
	var scratch [dirPC * dirNR]float32
	var px [dirPC / dirMR][dirMR]*float32
	s, d, g := j.s, j.d, j.s.g
	K := len(d.offs)
	OW, sh, sw, wp := g.out[1], g.stride[0], g.stride[1], d.wp
	_ = j.x[(s.G-1)*j.gx+(g.out[0]-1)*sh*wp+(OW-1)*sw+int(d.offs[K-1])]
	for u := lo; u < hi; u++ {
		q, ch := u/j.nch, u%j.nch
		xg := j.x[q/j.pg*j.gx:]
		p0 := ch * dirPC
		n := min(dirPC, j.P-p0)
		var bias *float32
		if d.bias != nil {
			bias = &d.bias[q*dirNR]
		}
		nt := (n + dirMR - 1) / dirMR
		for ti := range px[:nt] {
			for i := range px[ti] {
				p := p0 + min(ti*dirMR+i, n-1)
				px[ti][i] = &xg[p/OW*sh*wp+p%OW*sw]
			}
		}
		// The chains dirKB steps at a time, every tile of the unit per
		// block (one chain each, its steps in order: the same bits).
		for k0 := 0; k0 < K; k0 += j.kb {
			kn, fl := min(j.kb, K-k0), 0
			if k0 > 0 {
				fl |= amd64.DirLoad
			}
			if k0+kn == K {
				fl |= amd64.DirFinal
			}
			pan := &d.panels[(q*K+k0)*dirNR]
			for ti := range px[:nt] {
				amd64.Conv6x16(kn, &px[ti], &d.offs[k0], pan, bias, &scratch[ti*dirMR*dirNR], dirNR, fl)
			}
		}
		rows := min(dirNR, s.M-q*dirNR)
		off := q*dirNR*j.P + p0
		for c := 0; c < rows; c++ {
			yr := j.y[off+c*j.P : off+c*j.P+n]
			for i := range yr {
				yr[i] = scratch[i*dirNR+c]
			}
		}
		if j.ep.on {
			ep := j.ep.tile(off, 0)
			ep.block(j.y[off:], j.P, rows, n)
			ep.activate(j.y[off:], j.P, rows, n)
		}
	}
}

// pfMax is the most tiles per panel at which convDirectZ's tiles
// prefetch the next panel: with few tiles per panel, the weights' first
// pass is a large part of the layer and would otherwise wait on memory
// (mobilenet_v2's 7x7 and 14x14 stages, 1.5-2.5% of the model; no change
// on layers whose weights each serve many tiles).
const pfMax = 32

// pfTiles reports whether tiles tiles per panel prefetch the next panel.
func (m machine) pfTiles(tiles int) bool { return tiles <= pfMax && !m.f().noPanelPF }

// zShape is a ConvZ tile: R output rows by T pixels by C vectors of 16
// output channels.
type zShape struct{ R, T, C int }

// zTile picks s's ConvZ tile, where the CPU has AVX-512 and a kernel
// fits the column stride: the one with the fewest multiply-adds (padding
// lanes included), weighted by the tile's channel vectors (zTileCost),
// against tiles whose weights are shared by few pixels and for tiles of
// 16 pixels where rows are whole vectors
// (their stores fill cache lines: resnet18's stem, 88 -> 101 GFLOP/s);
// ties go to the larger tile.
func zTile(pool machine, s *convSetup) (zShape, bool) {
	if !pool.z {
		return zShape{}, false
	}
	if z := pool.f().tileZ; z.R != 0 && (s.G == 1 || s.Mg%(16*z.C) == 0) {
		return z, true
	}
	return zTileAt(s, s.g.stride[1], true)
}

// zTileCost is the cost of a multiply-add in a ConvZ tile of C vectors
// of channels, relative to C = 2. Measured per layer (thread CPU time, one
// worker, every tile of the shape, planar and B16): C = 1 tiles (a
// broadcast per multiply-add) took 1.2-1.35x the best C = 2 tile's time on
// every layer of more than 16 output channels (unet's 64-channel 3x3s at
// 128x128: 1_16_1 1.33x 1_8_2; googlenet's 96->208 3x3: 1_14_1 1.21x
// 1_14_2; resnet18's stem 1.18x), and C = 4 tiles (28 accumulators and 4
// weight vectors: each broadcast comes from memory 4 times) 1.13-1.3x on
// 7x7 planes (resnet50's layer4 1x1s, B16: 1_7_4 671 vs 1_7_2 487 us;
// googlenet's inception 5: 1.22x) and 1.3-1.6x elsewhere. The weights
// were 1.05 for C = 1 and 1 for C = 4, which picked those tiles wherever
// they computed fewer padding lanes.
var zTileCost = [5]float64{1: 1.3, 2: 1, 4: 1.25}

// zTileAt picks s's cheapest ConvZ tile among those at column stride S
// floats (see zTile); rowBonus favours 16-pixel tiles over whole rows
// (for the transposed stores of planar outputs).
func zTileAt(s *convSetup, S int, rowBonus bool) (zShape, bool) {
	OH, OW := s.g.out[0], s.g.out[1]
	best, bestCost := zShape{}, 0.0
	for _, k := range amd64.ConvZShapes {
		R, T, C := k[0], k[1], k[2]
		if k[3] != S || s.G > 1 && s.Mg%(16*C) != 0 {
			continue // a panel's channels must lie in one group
		}
		tiles := (OH + R - 1) / R * ((OW + T - 1) / T) * ((s.M + 16*C - 1) / (16 * C))
		cost := float64(tiles*R*T*C) * (1 + 1/float64(R*T)) * zTileCost[C]
		if rowBonus && T == 16 && OW%16 == 0 {
			cost *= 0.9 // each channel's row stored in whole 64-byte lines
		}
		if best.R == 0 || cost < bestCost || cost == bestCost && R*T*C > best.R*best.T*best.C {
			best, bestCost = zShape{R, T, C}, cost
		}
	}
	return best, best.R != 0
}

// convDirectZ is convDirect on the AVX-512 kernels (amd64.ConvZ) with
// tile z. Padding pixels of a tile (past the row or the last row) are
// computed from whatever the planes hold there and thrown away; the
// planes are copied, padded, with slack behind them, whenever those reads
// would leave the input.
func convDirectZ(pool machine, s *convSetup, x, w, bias, y []float32, ep epi, z zShape) {
	g := s.g
	P, inSz := prod(g.out), prod(g.in)
	OH, OW, sh, sw := g.out[0], g.out[1], g.stride[0], g.stride[1]
	hp, wp := g.padded()
	K := s.Cg * prod(g.k)
	padded := g.padB[0] != 0 || g.padB[1] != 0 || hp != g.in[0] || wp != g.in[1]
	// The last tap of the last group reads channel C-1.
	lastOff := (s.C-1)*hp*wp + (g.k[0]-1)*g.dil[0]*wp + (g.k[1]-1)*g.dil[1]
	if !padded {
		lastOff = (s.C-1)*inSz + (g.k[0]-1)*g.dil[0]*g.in[1] + (g.k[1]-1)*g.dil[1]
	}
	owt := (OW + z.T - 1) / z.T * z.T
	// The farthest float a tile reads: the last row's last (padding)
	// pixel's last tap.
	reach := func(wp int) int { return (OH-1)*sh*wp + (owt-1)*sw + lastOff + 1 }
	if !padded && reach(g.in[1]) > s.C*inSz {
		padded = true
		lastOff = (s.C-1)*hp*wp + (g.k[0]-1)*g.dil[0]*wp + (g.k[1]-1)*g.dil[1]
	}
	var pad *[]float32
	if padded {
		pad = getF32(max(s.C*hp*wp, reach(wp)) + 2*gemmNR)
	} else {
		hp, wp = g.in[0], g.in[1]
	}
	d := s.pack(w, bias, 16*z.C, wp, hp*wp)
	// Units: (panel, group of output rows); a group holds whole tiles of
	// rows and at most 256/C pixels' outputs, at least one tile row.
	// Panel-major where the weights are larger than the input (each
	// panel is read once), row-major otherwise (each group's input rows
	// are read once).
	rpu := max(1, 256/z.C/owt/z.R) * z.R
	ngr := (OH + rpu - 1) / rpu
	np := (s.M + 16*z.C - 1) / (16 * z.C)
	j := directZJobs.Get().(*directZJob)
	for ni := 0; ni < s.N; ni++ {
		xn := x[ni*s.C*inSz : (ni+1)*s.C*inSz]
		if padded {
			padPlanes(pool, xn, s.C, g, hp, wp, *pad)
			xn = *pad
		}
		*j = directZJob{s: s, d: d, z: z, x: xn, y: y[ni*s.M*P : (ni+1)*s.M*P], ep: ep.at(ni * s.M * P), P: P,
			rpu: rpu, ngr: ngr, np: np, owt: owt, rowsOuter: K*s.M < s.C*hp*wp,
			pfTiles: pool.pfTiles((OH + z.R - 1) / z.R * ((OW + z.T - 1) / z.T))}
		j.pg, j.gx = s.groupAt(16*z.C, hp*wp)
		pool.Run(np*ngr, s.M*P*K, j)
	}
	*j = directZJob{}
	directZJobs.Put(j)
	if pad != nil {
		putF32(pad)
	}
	_ = OW
}

// directZJob is one image of convDirectZ; units are (panel, row group).
type directZJob struct {
	s             *convSetup
	d             *directPack
	z             zShape
	x, y          []float32
	ep            epi
	P             int
	rpu, ngr, owt int
	np            int  // panels
	rowsOuter     bool // units row-group-major
	pfTiles       bool // tiles prefetch the next panel
	pg, gx        int  // panels a group, floats between groups' planes (groupAt)
}

var directZJobs = sync.Pool{New: func() any { return new(directZJob) }}

func (j *directZJob) Run(lo, hi int) {
	// 16 pixels' rows of up to 64 channels (TransposeZ16 reads 16
	// rows), and one more row of slack.
	var scratch [17 * 64]float32
	var base [2]*float32
	s, d, g, z := j.s, j.d, j.s.g, j.z
	K := len(d.offs)
	OH, OW, sh, sw, wp := g.out[0], g.out[1], g.stride[0], g.stride[1], d.wp
	cw := d.cw
	// An epilogue without a residual is a clamp (and perhaps an
	// activation after it): the kernel clamps as it stores.
	var clamp *[2]float32
	var lohi [2]float32
	if j.ep.on && j.ep.r == nil {
		lohi = [2]float32{j.ep.lo, j.ep.hi}
		clamp = &lohi
	}
	// A residual (laid out as the output, not sharing its memory:
	// directOK) and the clamp after it go into the transpose's store.
	var res []float32
	if j.ep.on && j.ep.r != nil {
		res = j.ep.r
		lohi = [2]float32{j.ep.lo, j.ep.hi}
	}
	for u := lo; u < hi; u++ {
		q, gr := u/j.ngr, u%j.ngr
		if j.rowsOuter {
			q, gr = u%j.np, u/j.np
		}
		oy0, oy1 := gr*j.rpu, min(OH, (gr+1)*j.rpu)
		xg := j.x[q/j.pg*j.gx:]
		var bias *float32
		if d.bias != nil {
			bias = &d.bias[q*cw]
		}
		pan := &d.panels[q*K*cw]
		chans := min(cw, s.M-q*cw)
		// Where a panel serves few tiles, each tile prefetches K lines (one
		// per step) of the next unit's panel into L2, a different stretch
		// per tile, so that that panel's first pass does not wait on memory.
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
					base[r] = &xg[min(oy+r, OH-1)*sh*wp+ox*sw]
				}
				tk, toffs, tpan := K, &d.offs[0], pan
				if d.rows != nil {
					// The row's shorter chain (directRows), where the
					// tile's rows share one.
					c := d.rows.class[oy]
					for r := 1; r < z.R && oy+r < OH; r++ {
						if d.rows.class[oy+r] != c {
							c = -1
						}
					}
					if c >= 0 {
						rc := &d.rows.cls[c]
						tk, toffs, tpan, pf = rc.k, &rc.offs[0], &rc.panels[q*rc.k*cw], nil
					}
				}
				if !amd64.ConvZ(z.R, z.T, z.C, sw, tk, &base, toffs, tpan, bias, &scratch[0], clamp, pf) {
					panic(fmt.Sprintf("nn: no ConvZ kernel for tile %+v, stride %d", z, sw)) // zTile picks listed tiles only
				}
				nt := min(z.T, OW-ox)
				for r := 0; r < z.R && oy+r < oy1; r++ {
					// Pixel-major tile to the NCHW rows of its channels.
					o := q*cw*j.P + (oy+r)*OW + ox
					_ = j.y[o+(chans-1)*j.P+nt-1]
					if res != nil {
						_ = res[o+(chans-1)*j.P+nt-1]
					}
					for c0 := 0; c0 < chans; c0 += 16 {
						if res != nil {
							// The residual and the clamp in the store.
							amd64.TransposeZ16E(&scratch[r*z.T*cw+c0], cw, nt, &j.y[o+c0*j.P], j.P, min(16, chans-c0), &res[o+c0*j.P], &lohi)
							continue
						}
						amd64.TransposeZ16(&scratch[r*z.T*cw+c0], cw, nt, &j.y[o+c0*j.P], j.P, min(16, chans-c0))
					}
				}
			}
		}
		if j.ep.on {
			off := q*cw*j.P + oy0*OW
			ep := j.ep.tile(off, 0)
			if clamp == nil && res == nil {
				ep.block(j.y[off:], j.P, chans, (oy1-oy0)*OW)
			}
			ep.activate(j.y[off:], j.P, chans, (oy1-oy0)*OW)
		}
	}
}
