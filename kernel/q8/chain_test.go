package q8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/elementwise"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// chainVariants are the paths TestQ8Chain runs: the portable twins, the
// AVX2 GEMM, the VNNI GEMM (tiles off), the pair tiles, and everything
// (quad, cols and rows tiles).
var chainVariants = []struct {
	name string
	l    kernel.ISA
	f    forced
}{
	{"portable", kernel.ISAPortable, forced{}},
	{"avx2", kernel.ISAAVX2, forced{}},
	{"vnni-gemm", kernel.ISABest, forced{noDirectQ8: true, noColsQ8: true, noRowsQ8: true}},
	{"pairs", kernel.ISABest, forced{noQuadQ8: true}},
	{"best", kernel.ISABest, forced{}},
}

// u8Of is the portable u8 form of x at inv.
func u8Of(x []float32, inv float32) []uint8 {
	u := make([]uint8, len(x))
	quantizeU8(portableTwins, u, x, inv)
	return u
}

// TestQ8Chain: a layer with y_scale writes exactly the u8 form of the
// float32 output the same layer gives without it, and a layer with x_u8
// given the u8 form of its input gives the bits of the same layer given
// the float32 input; both, and a layer with both attributes, on every
// path, at 1 and 2 workers, batch 1 and 2, through Run and Into.
func TestQ8Chain(t *testing.T) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add(fused.Domain, fused.Ops(reg))
	reg.Add(fused.Domain, Ops(reg))
	r := rand.New(rand.NewPCG(41, 42))
	type cs struct {
		c, h, w, m, k, stride, pad, group int
		act                               string // "", Relu, SiLU, HardSwish
		res                               bool
		tail                              int // more padding at the bottom and right
	}
	cases := []cs{
		{64, 14, 14, 64, 3, 1, 1, 1, "Relu", true, 0},     // quad tiles, residual
		{32, 9, 11, 48, 3, 2, 1, 1, "SiLU", false, 0},     // strided, a half-filled block
		{30, 7, 7, 40, 3, 1, 1, 1, "HardSwish", false, 0}, // narrow rows, a partial quad
		{24, 12, 20, 96, 1, 1, 0, 1, "Relu", false, 0},    // pointwise: cols tiles
		{20, 13, 13, 36, 1, 2, 0, 1, "", true, 0},         // strided 1x1: gathered
		{20, 12, 12, 36, 1, 2, 0, 1, "", false, 2},        // and its trailing padding
		{7, 6, 6, 17, 1, 1, 0, 1, "", false, 0},           // few channels
		{48, 10, 12, 48, 3, 2, 1, 6, "Relu", false, 0},    // groups of 8
		{3, 16, 17, 16, 7, 2, 3, 1, "Relu", false, 0},     // a stem
		{40, 3, 3, 24, 3, 1, 1, 1, "", false, 0},          // a 3x3 map (the GEMM)
		{96, 1, 1, 40, 1, 1, 0, 1, "Relu", false, 0},      // squeeze-excitation's 1x1 map: rows tiles
	}
	for i := 0; i < 8; i++ {
		k := []int{1, 3, 5}[r.IntN(3)]
		cases = append(cases, cs{c: 1 + r.IntN(50), h: 4 + r.IntN(20), w: 4 + r.IntN(24), m: 8 + r.IntN(60), k: k, stride: 1 + r.IntN(2),
			pad: r.IntN(k/2 + 1), group: 1, act: []string{"", "Relu", "SiLU", "HardSwish"}[r.IntN(4)], res: r.IntN(2) == 0})
	}
	for ci, s := range cases {
		for _, batch := range []int{1, 2} {
			t.Run(fmt.Sprintf("%d_b%d", ci, batch), func(t *testing.T) {
				oh := (s.h+2*s.pad+s.tail-s.k)/s.stride + 1
				ow := (s.w+2*s.pad+s.tail-s.k)/s.stride + 1
				cg := s.c / s.group
				if s.c%s.group != 0 {
					cg = s.c
				}
				group := s.c / cg
				wq := make([]int8, s.m*cg*s.k*s.k)
				for i := range wq {
					wq[i] = int8(r.IntN(255) - 127)
				}
				var xs, ys float32 = 0.02, 0.05
				x := randF32(r, batch*s.c*s.h*s.w)
				for i := range x {
					x[i] *= 2 // some values beyond ±127·x_scale: clamped
				}
				inputs := []string{"x", "w", "s", "b"}
				add := int64(0)
				in := []*tensor.Tensor{tensor.From(x, batch, s.c, s.h, s.w), tensor.From(wq, s.m, cg, s.k, s.k), tensor.From(randPos(r, s.m), s.m), tensor.From(randF32(r, s.m), s.m)}
				if s.res {
					inputs, add = append(inputs, "r"), 1
					in = append(in, tensor.From(randF32(r, batch*s.m*oh*ow), batch, s.m, oh, ow))
				}
				node := func(yScale float32, xU8 bool) *ir.Node {
					p := int64(s.pad)
					a := map[string]*ir.Attr{
						"base":    {Name: "base", Kind: ir.AttrString, S: "Conv"},
						"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: xs},
						"layout":  {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, add, 0}},
						"group":   {Name: "group", Kind: ir.AttrInt, I: int64(group)},
						"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(s.stride), int64(s.stride)}},
						"pads":    {Name: "pads", Kind: ir.AttrInts, Ints: []int64{p, p, p + int64(s.tail), p + int64(s.tail)}},
					}
					if s.act != "" {
						a[fused.AttrActivation] = &ir.Attr{Name: fused.AttrActivation, Kind: ir.AttrString, S: s.act}
						a[fused.AttrActVersion] = &ir.Attr{Name: fused.AttrActVersion, Kind: ir.AttrInt, I: 14}
						if s.act == ActHardSwish {
							a[fused.ActPrefix+"alpha"] = &ir.Attr{Name: fused.ActPrefix + "alpha", Kind: ir.AttrFloat, F: 1.0 / 6}
						}
					}
					if yScale > 0 {
						a["y_scale"] = &ir.Attr{Name: "y_scale", Kind: ir.AttrFloat, F: yScale}
					}
					if xU8 {
						a["x_u8"] = &ir.Attr{Name: "x_u8", Kind: ir.AttrInt, I: 1}
					}
					return &ir.Node{Name: "q", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: inputs, Outputs: []string{"y"}, Attrs: a}
				}
				plain, prod, cons, both := node(0, false), node(ys, false), node(0, true), node(ys, true)
				inU8 := slices.Clone(in)
				inU8[0] = tensor.From(u8Of(x, 1/xs), batch, s.c, s.h, s.w)
				// The reference: the plain layer, portable.
				op, err := reg.Lookup(plain)
				if err != nil {
					t.Fatal(err)
				}
				ref, err := op.Run(&kernel.Ctx{ISA: kernel.ISAPortable}, plain, in)
				if err != nil {
					t.Fatal(err)
				}
				want := ref[0].Data.([]float32)
				wantU := u8Of(want, 1/ys)
				for _, v := range chainVariants {
					for _, threads := range []int{1, 2} {
						f := v.f
						ctx := ctxAt(parallel.New(threads), v.l, &f)
						for _, k := range []struct {
							name string
							n    *ir.Node
							in   []*tensor.Tensor
						}{{"plain", plain, in}, {"y_scale", prod, in}, {"x_u8", cons, inU8}, {"both", both, inU8}} {
							dt := tensor.Float32
							if k.n == prod || k.n == both {
								dt = tensor.Uint8
							}
							got, err := op.Run(ctx, k.n, k.in)
							if err != nil {
								t.Fatal(err)
							}
							into := tensor.New(dt, ref[0].Shape...)
							if err := op.Into(ctx, k.n, k.in, []*tensor.Tensor{into}); err != nil {
								t.Fatal(err)
							}
							for w, g := range []*tensor.Tensor{got[0], into} {
								if g.DType != dt {
									t.Fatalf("%s %s: output %v, want %v", v.name, k.name, g.DType, dt)
								}
								where := fmt.Sprintf("%+v: %s, %s on %d workers (%s)", s, k.name, v.name, threads, []string{"Run", "Into"}[w])
								if dt == tensor.Uint8 {
									if i := firstDiffU8(g.Data.([]uint8), wantU); i >= 0 {
										t.Fatalf("%s: u[%d] = %d, want %d", where, i, g.Data.([]uint8)[i], wantU[i])
									}
									continue
								}
								gd := g.Data.([]float32)
								for i := range want {
									if math.Float32bits(gd[i]) != math.Float32bits(want[i]) {
										t.Fatalf("%s: y[%d] = %v, want %v", where, i, gd[i], want[i])
									}
								}
							}
						}
						ctx.Pool.Close()
					}
				}
			})
		}
	}
}

func firstDiffU8(a, b []uint8) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestQ8ChainLinear: the same for a Gemm layer (the rows tiles and the
// GEMM) of 1, 3 and 7 rows.
func TestQ8ChainLinear(t *testing.T) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add(fused.Domain, Ops(reg))
	r := rand.New(rand.NewPCG(43, 44))
	for _, rows := range []int{1, 3, 7} {
		for _, kn := range [][2]int{{100, 70}, {1280, 1000}, {5, 3}} {
			K, N := kn[0], kn[1]
			wq := make([]int8, N*K)
			for i := range wq {
				wq[i] = int8(r.IntN(255) - 127)
			}
			x := randF32(r, rows*K)
			var xs, ys float32 = 0.03, 0.07
			node := func(yScale float32, xU8 bool) *ir.Node {
				a := map[string]*ir.Attr{
					"base":    {Name: "base", Kind: ir.AttrString, S: "Gemm"},
					"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: xs},
					"layout":  {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, 0, 0}},
				}
				if yScale > 0 {
					a["y_scale"] = &ir.Attr{Name: "y_scale", Kind: ir.AttrFloat, F: yScale}
				}
				if xU8 {
					a["x_u8"] = &ir.Attr{Name: "x_u8", Kind: ir.AttrInt, I: 1}
				}
				return &ir.Node{Name: "g", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: []string{"x", "w", "s", "b"}, Outputs: []string{"y"}, Attrs: a}
			}
			in := []*tensor.Tensor{tensor.From(x, rows, K), tensor.From(wq, N, K), tensor.From(randPos(r, N), N), tensor.From(randF32(r, N), N)}
			inU8 := slices.Clone(in)
			inU8[0] = tensor.From(u8Of(x, 1/xs), rows, K)
			plain := node(0, false)
			op, err := reg.Lookup(plain)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := op.Run(&kernel.Ctx{ISA: kernel.ISAPortable}, plain, in)
			if err != nil {
				t.Fatal(err)
			}
			want := ref[0].Data.([]float32)
			wantU := u8Of(want, 1/ys)
			for _, v := range chainVariants {
				for _, threads := range []int{1, 2} {
					f := v.f
					ctx := ctxAt(parallel.New(threads), v.l, &f)
					got, err := op.Run(ctx, node(ys, true), inU8)
					if err != nil {
						t.Fatal(err)
					}
					if i := firstDiffU8(got[0].Data.([]uint8), wantU); i >= 0 {
						t.Fatalf("rows %d %v %s %d workers: u[%d] differs", rows, kn, v.name, threads, i)
					}
					got, err = op.Run(ctx, node(0, true), inU8)
					if err != nil {
						t.Fatal(err)
					}
					for i, g := range got[0].Data.([]float32) {
						if math.Float32bits(g) != math.Float32bits(want[i]) {
							t.Fatalf("rows %d %v %s %d workers: y[%d] = %v, want %v", rows, kn, v.name, threads, i, g, want[i])
						}
					}
					ctx.Pool.Close()
				}
			}
		}
	}
}

// TestQ8ChainBadInput: an x_u8 layer given float32, and a y_scale layer
// given a float32 output slot, fail with an error naming the dtype.
func TestQ8ChainBadInput(t *testing.T) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add(fused.Domain, Ops(reg))
	a := map[string]*ir.Attr{
		"base":    {Name: "base", Kind: ir.AttrString, S: "Gemm"},
		"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: 0.03},
		"layout":  {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, 0, 0}},
		"x_u8":    {Name: "x_u8", Kind: ir.AttrInt, I: 1},
	}
	n := &ir.Node{Name: "g", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: []string{"x", "w", "s", ""}, Outputs: []string{"y"}, Attrs: a}
	op, err := reg.Lookup(n)
	if err != nil {
		t.Fatal(err)
	}
	in := []*tensor.Tensor{tensor.From(make([]float32, 8), 2, 4), tensor.From(make([]int8, 12), 3, 4), tensor.From([]float32{1, 1, 1}, 3), nil}
	if _, err := op.Run(nil, n, in); err == nil {
		t.Fatal("an x_u8 layer ran on a float32 input")
	}
	delete(a, "x_u8")
	a["y_scale"] = &ir.Attr{Name: "y_scale", Kind: ir.AttrFloat, F: 0.5}
	if err := op.Into(nil, n, in, []*tensor.Tensor{tensor.New(tensor.Float32, 2, 3)}); err == nil {
		t.Fatal("a y_scale layer wrote into a float32 slot")
	}
	a["y_scale"].F = float32(math.Inf(1))
	if _, err := op.Run(nil, n, in); err == nil {
		t.Fatal("an infinite y_scale was taken")
	}
}
