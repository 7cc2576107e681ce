package gputest

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// hostConvT is vx_convt (convt.cu) line for line on the host, with
// exact.ConvT's choice of mode (vx_convt_finite's flag): the kernel's
// index arithmetic and float32 operations, so that the suite's cases are
// known to give the CPU's bits before a GPU runs them.
func hostConvT(g exact.ConvTGeom, x, w, bias []float32) []float32 {
	mode := exact.ConvTGeneral
	if g.Tiled() {
		mode = exact.ConvTLive
		for _, v := range w[:g.C*(g.M/g.G)*g.KD*g.KH*g.KW] {
			if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
				mode = exact.ConvTGeneral
			}
		}
	}
	return hostConvTMode(g, mode, x, w, bias)
}

// hostConvTMode is vx_convt in mode (ConvTGeneral or ConvTLive).
func hostConvTMode(g exact.ConvTGeom, mode exact.ConvTMode, x, w, bias []float32) []float32 {
	Cg, Mg, kn := g.C/g.G, g.M/g.G, g.KD*g.KH*g.KW
	OHW, HW := g.OH*g.OW, g.H*g.W
	P, DHW := g.OD*OHW, g.D*HW
	wstep := Mg * kn
	canon := func(v float32) float32 {
		if v != v {
			return math.Float32frombits(0x7fc00000)
		}
		return v
	}
	// at is vx_convt's test of one dimension: o + pad - k*dil divides by
	// the stride (C's division truncates, as Go's) into [0, in).
	at := func(o, pad, k, dil, stride, in int) (int, bool) {
		v := o + pad - k*dil
		i := v / stride
		return i, v >= 0 && i*stride == v && i < in
	}
	y := make([]float32, g.OutLen())
	for t := range y {
		nm, p := t/P, t%P
		n, m := nm/g.M, nm%g.M
		gi, mm := m/Mg, m%Mg
		od, q := p/OHW, p%OHW
		oh, ow := q/g.OW, q%g.OW
		xc := x[(n*g.C+gi*Cg)*DHW:]
		wm := w[(gi*Cg*Mg+mm)*kn:]
		var acc float32
		if mode == exact.ConvTLive {
			kh, kw := oh%g.KH, ow%g.KW
			xp := xc[(oh/g.KH)*g.W+ow/g.KW:]
			wp := wm[kh*g.KW+kw:]
			for c := 0; c < Cg; c++ {
				acc = vmath.FMA32(wp[c*wstep], xp[c*DHW], acc)
			}
		} else {
			for c := 0; c < Cg; c++ {
				wt := c * wstep
				for kd := 0; kd < g.KD; kd++ {
					id, dok := at(od, g.PD, kd, g.DD, g.SD, g.D)
					for kh := 0; kh < g.KH; kh++ {
						ih, hok := at(oh, g.PH, kh, g.DH, g.SH, g.H)
						for kw := 0; kw < g.KW; kw++ {
							iw, wok := at(ow, g.PW, kw, g.DW, g.SW, g.W)
							var v float32
							if dok && hok && wok {
								v = xc[c*DHW+(id*g.H+ih)*g.W+iw]
							}
							acc = vmath.FMA32(wm[wt], v, acc)
							wt++
						}
					}
				}
			}
		}
		v := canon(acc)
		if bias != nil {
			v = canon(v + bias[m])
		}
		y[t] = v
	}
	return y
}

// cpuConvTAt is cpuConvT at one of the CPU's instruction-set levels.
func cpuConvTAt(isa kernel.ISA, c convtCase, x, w, b []float32) (*tensor.Tensor, error) {
	n := &ir.Node{OpType: "ConvTranspose", Version: 11, Attrs: c.n.Attrs, Outputs: []string{"y"}}
	k, err := builtin.Registry().Lookup(n)
	if err != nil {
		return nil, err
	}
	ins := []*tensor.Tensor{tensor.From(x, c.x...), tensor.From(w, c.w...)}
	if b != nil {
		ins = append(ins, tensor.From(b, len(b)))
	}
	out, err := k.Run(&kernel.Ctx{ISA: isa}, n, ins)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// The suite's ConvTranspose cases, computed with vx_convt's arithmetic on
// the host over engine.ConvTGeometry, give kernel/nn's bits for many
// seeds: the geometry, the choice of chain and the chains themselves are
// right before the GPU machine sees them (and the CPU's instruction-set
// levels agree on them).
func TestConvTHost(t *testing.T) {
	cases, tiled, negZero := 0, 0, 0
	for seed := int64(0); seed < 12; seed++ {
		s := &suite{cfg: Config{Cases: 12}, r: rand.New(rand.NewSource(seed))}
		for _, c := range s.convtCases() {
			x, w, b := s.convtData(c)
			want, err := cpuConvT(c, x, w, b)
			if err != nil {
				t.Fatalf("seed %d: %s: CPU: %v", seed, c.name, err)
			}
			g, err := engine.ConvTGeometry(c.n, c.x, c.w)
			if err != nil {
				t.Fatalf("seed %d: %s: %v", seed, c.name, err)
			}
			if fmt.Sprint(engine.ConvTShape(g)) != fmt.Sprint(want.Shape) {
				t.Fatalf("seed %d: %s: geometry gives %v, the CPU %v", seed, c.name, engine.ConvTShape(g), want.Shape)
			}
			got, wv := hostConvT(g, x, w, b), f32(want)
			same := func(what string, wv []float32) {
				for i := range wv {
					gb, cb := math.Float32bits(got[i]), math.Float32bits(wv[i])
					if gb != cb && !(c.bias && got[i] != got[i] && wv[i] != wv[i]) {
						t.Fatalf("seed %d: %s: output %d %#08x, %s %#08x", seed, c.name, i, gb, what, cb)
					}
				}
			}
			same("the CPU's", wv)
			if seed < 2 {
				// The CPU's portable and AVX2 levels give the same bits.
				for _, isa := range []kernel.ISA{kernel.ISAPortable, kernel.ISAAVX2} {
					out, err := cpuConvTAt(isa, c, x, w, b)
					if err != nil {
						t.Fatalf("seed %d: %s at %v: %v", seed, c.name, isa, err)
					}
					same("the CPU's at "+isa.String(), f32(out))
				}
			}
			if g.Tiled() {
				tiled++
			}
			if c.x0 != nil {
				// The case where the chains differ does tell them apart.
				gen := hostConvTMode(g, exact.ConvTGeneral, x, w, b)
				if math.Float32bits(gen[0]) == math.Float32bits(wv[0]) {
					t.Fatalf("%s: the general chain gives the CPU's %#08x too", c.name, math.Float32bits(wv[0]))
				}
				negZero++
			}
			cases++
		}
	}
	if cases < 12*(30+12) || tiled < 12*9 || negZero != 3*12 {
		t.Fatalf("%d cases, %d tiled, %d of the -0 case", cases, tiled, negZero)
	}
}
