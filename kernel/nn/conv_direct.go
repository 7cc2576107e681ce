package nn

import (
	"sync"
	"unsafe"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/parallel"
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
)

// directPack is a layer's packed weights: panel q (channels 16q..) at
// panels[q*K*16:], step kk at [kk*16:], channels past M zero; the bias
// likewise zero-padded to whole panels; and the tap offsets.
type directPack struct {
	w, b    unsafe.Pointer // the weights and bias they were packed from
	panels  []float32
	bias    []float32
	offs    []int32
	wp, hwp int
}

// directOK reports whether s can run as TacticDirect here: a fast CPU,
// one group, two spatial dimensions, and an epilogue whose residual is
// not the output itself.
func directOK(s *convSetup, y []float32, ep epi) bool {
	return fastKernels && s.G == 1 && len(s.g.in) == 2 && !(ep.on && overlaps(ep.r, y))
}

// pack returns s's packed weights for w and bias, packing them on first
// use (or when called with other slices).
func (s *convSetup) pack(w, bias []float32, wp, hwp int) *directPack {
	var bp unsafe.Pointer
	if bias != nil {
		bp = unsafe.Pointer(&bias[0])
	}
	if d := s.direct.Load(); d != nil && d.w == unsafe.Pointer(&w[0]) && d.b == bp && d.wp == wp && d.hwp == hwp {
		return d
	}
	K := s.Cg * prod(s.g.k)
	np := (s.M + dirNR - 1) / dirNR
	d := &directPack{w: unsafe.Pointer(&w[0]), b: bp, wp: wp, hwp: hwp,
		panels: make([]float32, np*K*dirNR), offs: make([]int32, K)}
	for m := 0; m < s.M; m++ {
		pan := d.panels[m/dirNR*K*dirNR+m%dirNR:]
		for kk, v := range w[m*K : (m+1)*K] {
			pan[kk*dirNR] = v
		}
	}
	if bias != nil {
		d.bias = make([]float32, np*dirNR)
		copy(d.bias, bias[:s.M])
	}
	g := s.g
	kk := 0
	for c := 0; c < s.Cg; c++ {
		for ky := 0; ky < g.k[0]; ky++ {
			for kx := 0; kx < g.k[1]; kx++ {
				d.offs[kk] = int32(c*hwp + ky*g.dil[0]*wp + kx*g.dil[1])
				kk++
			}
		}
	}
	s.direct.Store(d)
	return d
}

// convDirect runs TacticDirect (directOK(s) must hold).
func convDirect(pool *parallel.Pool, s *convSetup, x, w, bias, y []float32, ep epi) {
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
	d := s.pack(w, bias, wp, hp*wp)
	j := directJobs.Get().(*directJob)
	for ni := 0; ni < s.N; ni++ {
		xn := x[ni*s.C*inSz : (ni+1)*s.C*inSz]
		if padded {
			padPlanes(pool, xn, s.C, g, hp, wp, *pad)
			xn = *pad
		}
		*j = directJob{s: s, d: d, x: xn, y: y[ni*s.M*P : (ni+1)*s.M*P], ep: ep.at(ni * s.M * P), P: P,
			nch: (P + dirPC - 1) / dirPC}
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
}

var directJobs = sync.Pool{New: func() any { return new(directJob) }}

func (j *directJob) Run(lo, hi int) {
	var scratch [dirPC * dirNR]float32
	var px [dirMR]*float32
	s, d, g := j.s, j.d, j.s.g
	K := len(d.offs)
	OW, sh, sw, wp := g.out[1], g.stride[0], g.stride[1], d.wp
	_ = j.x[(g.out[0]-1)*sh*wp+(OW-1)*sw+int(d.offs[K-1])]
	for u := lo; u < hi; u++ {
		q, ch := u/j.nch, u%j.nch
		p0 := ch * dirPC
		n := min(dirPC, j.P-p0)
		var bias *float32
		if d.bias != nil {
			bias = &d.bias[q*dirNR]
		}
		pan := &d.panels[q*K*dirNR]
		for t := 0; t < n; t += dirMR {
			for i := range px {
				p := p0 + min(t+i, n-1)
				px[i] = &j.x[p/OW*sh*wp+p%OW*sw]
			}
			amd64.Conv6x16(K, &px, &d.offs[0], pan, bias, &scratch[t*dirNR], dirNR)
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
