package q8

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/elementwise"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// refConv is the documented Q8 Conv arithmetic, written directly: exact
// integer sums, one rounded multiply, the bias, the residual, the Relu.
func refConv(x []float32, xs float32, s [4]int, w []int8, ws, bias []float32, M, KH, KW, stride, pad, group int, res []float32, relu bool) []float32 {
	N, C, H, W := s[0], s[1], s[2], s[3]
	OH, OW := (H+2*pad-KH)/stride+1, (W+2*pad-KW)/stride+1
	Cg, Mg := C/group, M/group
	y := make([]float32, N*M*OH*OW)
	inv := 1 / xs
	for n := 0; n < N; n++ {
		for m := 0; m < M; m++ {
			gi := m / Mg
			mult := float32(xs * ws[m])
			for oy := 0; oy < OH; oy++ {
				for ox := 0; ox < OW; ox++ {
					var sum int64
					for c := 0; c < Cg; c++ {
						for ky := 0; ky < KH; ky++ {
							for kx := 0; kx < KW; kx++ {
								iy, ix := oy*stride+ky-pad, ox*stride+kx-pad
								if iy < 0 || iy >= H || ix < 0 || ix >= W {
									continue
								}
								xv := quantize1(x[((n*C+gi*Cg+c)*H+iy)*W+ix], inv)
								sum += int64(xv) * int64(w[((m*Cg+c)*KH+ky)*KW+kx])
							}
						}
					}
					i := ((n*M+m)*OH+oy)*OW + ox
					t := float32(float32(int32(sum))*mult) + bias[m]
					if res != nil {
						t += res[i]
					}
					if relu && t < 0 {
						t = 0
					}
					y[i] = t
				}
			}
		}
	}
	return y
}

// TestQ8ConvReference checks Q8 Conv layers (strided, grouped, small and
// large position counts, so both GEMM orientations; with the fused Add
// and Relu) against refConv bit for bit, through both twins, on 1 and 3
// threads, through Run and Into.
func TestQ8ConvReference(t *testing.T) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add("vouch", Ops(reg))
	r := rand.New(rand.NewPCG(7, 8))
	type cs struct{ n, c, h, w, m, kh, kw, stride, pad, group int }
	convs := []cs{{1, 3, 23, 23, 8, 7, 7, 2, 3, 1}, {2, 4, 7, 5, 6, 3, 3, 2, 1, 2}, {1, 32, 7, 7, 64, 3, 3, 1, 1, 1},
		{1, 16, 5, 5, 40, 1, 1, 1, 0, 1}, {1, 64, 21, 21, 16, 3, 3, 1, 1, 1}, {1, 3, 40, 40, 8, 7, 7, 2, 3, 1}, {1, 40, 19, 19, 24, 1, 1, 1, 0, 1}, {1, 8, 9, 9, 16, 1, 1, 2, 0, 1}, {1, 5, 12, 13, 7, 3, 3, 3, 1, 1}, {2, 24, 4, 4, 48, 3, 3, 1, 1, 1},
		// stride 1, direct path: odd K, no padding, 5×5 grouped, several chunks
		{1, 5, 17, 30, 12, 3, 3, 1, 1, 1}, {1, 7, 12, 12, 9, 3, 3, 1, 0, 1}, {2, 16, 15, 15, 32, 5, 5, 1, 2, 2}, {1, 64, 30, 30, 8, 3, 3, 1, 1, 1}}
	for _, s := range convs {
		for _, mode := range []int{0, 1, 2, 3} { // bit 0: residual, bit 1: relu
			x := randF32(r, s.n*s.c*s.h*s.w)
			wq := make([]int8, s.m*(s.c/s.group)*s.kh*s.kw)
			for i := range wq {
				wq[i] = int8(r.IntN(255) - 127)
			}
			ws, bias := randPos(r, s.m), randF32(r, s.m)
			oh, ow := (s.h+2*s.pad-s.kh)/s.stride+1, (s.w+2*s.pad-s.kw)/s.stride+1
			var res []float32
			inputs := []string{"x", "w", "s", "b"}
			add := int64(0)
			if mode&1 != 0 {
				res = randF32(r, s.n*s.m*oh*ow)
				inputs, add = append(inputs, "r"), 1
			}
			node := &ir.Node{Name: "q", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: inputs, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{
				"base":    {Name: "base", Kind: ir.AttrString, S: "Conv"},
				"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: 0.02},
				"layout":  {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, add, 0}},
				"group":   {Name: "group", Kind: ir.AttrInt, I: int64(s.group)},
				"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(s.stride), int64(s.stride)}},
				"pads":    {Name: "pads", Kind: ir.AttrInts, Ints: []int64{int64(s.pad), int64(s.pad), int64(s.pad), int64(s.pad)}},
			}}
			if mode&2 != 0 {
				node.Attrs["activation"] = &ir.Attr{Name: "activation", Kind: ir.AttrString, S: "Relu"}
				node.Attrs["act_version"] = &ir.Attr{Name: "act_version", Kind: ir.AttrInt, I: 14}
			}
			in := []*tensor.Tensor{tensor.From(x, s.n, s.c, s.h, s.w), tensor.From(wq, s.m, s.c/s.group, s.kh, s.kw), tensor.From(ws, s.m), tensor.From(bias, s.m)}
			if res != nil {
				in = append(in, tensor.From(res, s.n, s.m, oh, ow))
			}
			want := refConv(x, 0.02, [4]int{s.n, s.c, s.h, s.w}, wq, ws, bias, s.m, s.kh, s.kw, s.stride, s.pad, s.group, res, mode&2 != 0)
			op, err := reg.Lookup(node)
			if err != nil {
				t.Fatal(err)
			}
			for _, portable := range kernel.ISAs() {
				for _, threads := range []int{1, 3} {
					ctx := ctxAt(parallel.New(threads), portable, nil)
					o, err := op.Run(ctx, node, in)
					if err != nil {
						t.Fatal(err)
					}
					out := []*tensor.Tensor{tensor.New(tensor.Float32, 1)}
					out[0] = tensor.New(tensor.Float32, o[0].Shape...)
					if err := op.Into(ctx, node, in, out); err != nil {
						t.Fatal(err)
					}
					ctx.Pool.Close()
					for k, got := range [][]float32{o[0].Data.([]float32), out[0].Data.([]float32)} {
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("conv %+v mode %d %v threads %d path %d: y[%d] = %v, want %v", s, mode, portable, threads, k, i, got[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestEpilogueTwins compares epiRow with its portable loop on special
// values (NaN, ±0, ±Inf, large sums).
func TestEpilogueTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	n := 203
	a := make([]int32, n)
	res := make([]float32, n)
	for i := range a {
		a[i] = int32(r.Uint32())
		res[i] = float32(r.NormFloat64())
	}
	a[0], a[1], a[2] = 0, math.MaxInt32, math.MinInt32
	res[3], res[4], res[5], res[6] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1))
	for _, m := range []float32{1e-3, 0, -2, 1e30} {
		for _, b := range []float32{0, float32(math.Copysign(0, -1)), 3.5, float32(math.NaN())} {
			for mode := 0; mode < 4; mode++ {
				var rr []float32
				if mode&1 != 0 {
					rr = res
				}
				var got [2][]float32
				for v, tw := range []twins{portableTwins, best} {
					got[v] = make([]float32, n)
					epilogueRow(tw, got[v], a, m, b, rr, mode&2 != 0)
				}
				for i := range got[0] {
					if math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
						t.Fatalf("m %v b %v mode %d: [%d] portable %v fast %v", m, b, mode, i, got[0][i], got[1][i])
					}
				}
			}
		}
	}
}

// TestDirectConv compares the direct stride-1 path with the im2col path
// bit for bit on geometries refConv does not cover (dilation, asymmetric
// pads, auto_pad), through both twins.
func TestDirectConv(t *testing.T) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add("vouch", Ops(reg))
	r := rand.New(rand.NewPCG(11, 12))
	type cs struct {
		c, h, w, m, kh, kw int
		pads, dil          []int64
		auto               string
	}
	for _, s := range []cs{
		{8, 20, 19, 8, 3, 3, []int64{2, 2, 2, 2}, []int64{2, 2}, ""},
		{6, 16, 21, 10, 3, 5, []int64{0, 2, 1, 2}, []int64{1, 1}, ""},
		{9, 18, 18, 6, 3, 3, nil, []int64{1, 2}, "SAME_UPPER"},
		{4, 24, 20, 5, 2, 2, nil, nil, "SAME_LOWER"},
	} {
		x := randF32(r, s.c*s.h*s.w)
		wq := make([]int8, s.m*s.c*s.kh*s.kw)
		for i := range wq {
			wq[i] = int8(r.IntN(255) - 127)
		}
		node := &ir.Node{Name: "q", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: []string{"x", "w", "s", "b"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{
			"base":        {Name: "base", Kind: ir.AttrString, S: "Conv"},
			"x_scale":     {Name: "x_scale", Kind: ir.AttrFloat, F: 0.02},
			"layout":      {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, 0, 0}},
			"activation":  {Name: "activation", Kind: ir.AttrString, S: "Relu"},
			"act_version": {Name: "act_version", Kind: ir.AttrInt, I: 14},
		}}
		if s.pads != nil {
			node.Attrs["pads"] = &ir.Attr{Name: "pads", Kind: ir.AttrInts, Ints: s.pads}
		}
		if s.dil != nil {
			node.Attrs["dilations"] = &ir.Attr{Name: "dilations", Kind: ir.AttrInts, Ints: s.dil}
		}
		if s.auto != "" {
			node.Attrs["auto_pad"] = &ir.Attr{Name: "auto_pad", Kind: ir.AttrString, S: s.auto}
		}
		in := []*tensor.Tensor{tensor.From(x, 1, s.c, s.h, s.w), tensor.From(wq, s.m, s.c, s.kh, s.kw), tensor.From(randPos(r, s.m), s.m), tensor.From(randF32(r, s.m), s.m)}
		op, err := reg.Lookup(node)
		if err != nil {
			t.Fatal(err)
		}
		var outs [4][]float32
		for v := range outs {
			l := kernel.ISABest
			if v&1 == 1 {
				l = kernel.ISAPortable
			}
			o, err := op.Run(ctxAt(nil, l, &forced{noDirect: v&2 != 0}), node, in)
			if err != nil {
				t.Fatal(err)
			}
			outs[v] = o[0].Data.([]float32)
		}
		for v := 1; v < 4; v++ {
			for i := range outs[0] {
				if math.Float32bits(outs[v][i]) != math.Float32bits(outs[0][i]) {
					t.Fatalf("conv %+v: variant %d (bit 0 portable, bit 1 im2col) y[%d] = %v, direct fast %v", s, v, i, outs[v][i], outs[0][i])
				}
			}
		}
	}
}
