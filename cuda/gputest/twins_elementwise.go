package gputest

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/tensor"
)

// The elementwise family's twins (cuda/engine/elementwise.go): each GPU
// kernel against the CPU registry's operator on the same data.
func init() {
	extraTwins = append(extraTwins, (*suite).ewArith, (*suite).ewCast, (*suite).ewActs, (*suite).ewScaleShift, (*suite).ewResize)
}

// bcastShapes draws a pair of shapes that broadcast: rank 1 to 6, odd
// edges, each axis of one operand 1 (or missing) at random.
func (s *suite) bcastShapes() ([]int, []int) {
	r := 1 + s.r.Intn(exact.MaxCopyRank)
	out := s.randShape(r)
	a, b := make([]int, r), make([]int, r)
	for d := range out {
		a[d], b[d] = out[d], out[d]
		switch s.r.Intn(4) {
		case 0:
			a[d] = 1
		case 1:
			b[d] = 1
		}
	}
	if s.r.Intn(3) == 0 {
		b = b[s.r.Intn(r):] // a lower rank
	}
	return a, b
}

func (s *suite) ewArith() error {
	for _, op := range []exact.Arith{exact.ArithSub, exact.ArithMul, exact.ArithAdd, exact.ArithDiv} {
		n := 100003
		a, b := s.data(n, 3, 0.05), s.data(n, 3, 0.05)
		t, err := cpuOp(op.String(), 14, nil, tensor.From(a, n), tensor.From(b, n))
		if err != nil {
			return err
		}
		gpu, err := s.run(n, [][]float32{a, b}, func(in []uint64, out uint64) error { return s.e.Arith(nil, op, in[0], in[1], out, int64(n)) })
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("%v [%d]", op, n), gpu, f32(t), false)
		cases := [][2][]int{{{2, 16, 7, 9}, {2, 16, 1, 1}}, {{1}, {3, 5}}, {{}, {4, 3}}, {{5, 1, 3}, {}}}
		for range max(s.cfg.Cases, 1) {
			x, y := s.bcastShapes()
			cases = append(cases, [2][]int{x, y})
		}
		for _, c := range cases {
			sa, sb := c[0], c[1]
			a, b := s.data(tensor.NumElems(sa), 3, 0.1), s.data(tensor.NumElems(sb), 3, 0.1)
			t, err := cpuOp(op.String(), 14, nil, tensor.From(a, sa...), tensor.From(b, sb...))
			if err != nil {
				return err
			}
			g, err := exact.Broadcast(sa, sb)
			if err != nil {
				return err
			}
			gpu, err := s.run(g.N(), [][]float32{a, b}, func(in []uint64, out uint64) error {
				return s.e.ArithBroadcast(nil, op, g, in[0], len(a), in[1], len(b), out)
			})
			if err != nil {
				return err
			}
			s.record(fmt.Sprintf("%v broadcast %v, %v", op, sa, sb), gpu, f32(t), false)
		}
	}
	return nil
}

func (s *suite) ewCast() error {
	n := 50001
	i64 := make([]int64, n)
	i32 := make([]int32, n)
	bs := make([]bool, n)
	hard := []int64{0, 1, -1, 1 << 24, 1<<24 + 1, 1<<24 + 3, -(1<<25 + 3), 1<<53 + 1, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1<<39, 1<<62 + 1<<38, -(1<<62 + 1<<38 + 1)}
	for i := range i64 {
		switch s.r.Intn(4) {
		case 0:
			i64[i] = hard[s.r.Intn(len(hard))]
		case 1:
			i64[i] = int64(s.r.Uint64())
		case 2:
			i64[i] = int64(s.r.Uint64()) >> s.r.Intn(64)
		default:
			i64[i] = int64(s.r.Intn(1<<26)) - 1<<25
		}
		i32[i] = int32(i64[i])
		bs[i] = s.r.Intn(2) == 0
	}
	f := s.data(n, 4, 0.2)
	to := &ir.Attr{Name: "to", Kind: ir.AttrInt, I: int64(tensor.Float32)}
	for _, c := range []struct {
		from exact.CastFrom
		t    *tensor.Tensor
	}{{exact.FromInt64, tensor.From(i64, n)}, {exact.FromInt32, tensor.From(i32, n)}, {exact.FromBool, tensor.From(bs, n)}, {exact.FromFloat32, tensor.From(f, n)}} {
		want, err := cpuOp("Cast", 19, []*ir.Attr{to}, c.t)
		if err != nil {
			return err
		}
		raw := f
		if c.from != exact.FromFloat32 {
			if raw, err = engine.CastWords(c.t); err != nil {
				return err
			}
		}
		gpu, err := s.run(n, [][]float32{raw}, func(in []uint64, out uint64) error { return s.e.Cast(nil, c.from, in[0], out, int64(n)) })
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("Cast %v -> float32 [%d]", c.t.DType, n), gpu, f32(want), true)
	}
	return nil
}

// ewActs runs every vx_act activation and the vx_unary ops the family
// places against the CPU registry's operator (SiLU and HardSigmoidMul:
// the gate, then the Mul in the model's operand order).
func (s *suite) ewActs() error {
	n := 1 << 18
	x := s.data(n, 6, 0.01)
	for i := 0; i < n/8; i++ {
		x[s.r.Intn(n)] = float32(s.r.NormFloat64() * 60)
	}
	xt := tensor.From(x, n)
	type c struct {
		op     string
		ver    int64
		attrs  []*ir.Attr
		a      exact.ActOp
		p0, p1 float32
	}
	cases := []c{
		{"LeakyRelu", 16, []*ir.Attr{floatAttr("alpha", 0.1)}, exact.EwLeakyRelu, 0.1, 0},
		{"HardSigmoid", 6, nil, exact.EwHardSigmoid, 0.2, 0.5},
		{"HardSigmoid", 6, []*ir.Attr{floatAttr("alpha", 1.0/6), floatAttr("beta", 0.5)}, exact.EwHardSigmoid, 1.0 / 6, 0.5},
		{"HardSwish", 14, nil, exact.EwHardSwish, 0, 0},
		{"Neg", 13, nil, exact.EwNeg, 0, 0},
		{"Abs", 13, nil, exact.EwAbs, 0, 0},
		{"Sqrt", 13, nil, exact.EwSqrt, 0, 0},
		{"Reciprocal", 13, nil, exact.EwReciprocal, 0, 0},
		{"Elu", 6, []*ir.Attr{floatAttr("alpha", 0.7)}, exact.EwElu, 0.7, 0},
		{"Softplus", 1, nil, exact.EwSoftplus, 0, 0},
		{"Softsign", 1, nil, exact.EwSoftsign, 0, 0},
		{"Mish", 18, nil, exact.EwMish, 0, 0},
		{"Selu", 6, nil, exact.EwSelu, 1.67326319217681884765625, 1.05070102214813232421875},
		{"Celu", 12, []*ir.Attr{floatAttr("alpha", 0.6)}, exact.EwCelu, 0.6, 0},
		{"ThresholdedRelu", 10, []*ir.Attr{floatAttr("alpha", 0.3)}, exact.EwThresholdedRelu, 0.3, 0},
		{"Sign", 13, nil, exact.EwSign, 0, 0},
		{"Floor", 13, nil, exact.EwFloor, 0, 0},
		{"Ceil", 13, nil, exact.EwCeil, 0, 0},
		{"Round", 11, nil, exact.EwRound, 0, 0},
	}
	for _, k := range cases {
		want, err := cpuOp(k.op, k.ver, k.attrs, xt)
		if err != nil {
			return err
		}
		gpu, err := s.run(n, [][]float32{x}, func(in []uint64, out uint64) error {
			return s.e.Activation(nil, k.a, in[0], out, int64(n), k.p0, k.p1)
		})
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("%v(%v, %v) [%d]", k.a, k.p0, k.p1, n), gpu, f32(want), false)
	}
	// The gated activations: the gate node, then the Mul.
	for _, g := range []struct {
		gate     string
		ver      int64
		attrs    []*ir.Attr
		a, sf    exact.ActOp
		p0, p1   float32
		sigFirst bool
	}{
		{"Sigmoid", 13, nil, exact.EwSiLU, exact.EwSiLUSigmoidFirst, 0, 0, false},
		{"HardSigmoid", 6, []*ir.Attr{floatAttr("alpha", 1.0/6), floatAttr("beta", 0.5)}, exact.EwHardSigmoidMul, exact.EwHardSigmoidMulSF, 1.0 / 6, 0.5, false},
	} {
		gate, err := cpuOp(g.gate, g.ver, g.attrs, xt)
		if err != nil {
			return err
		}
		for _, first := range []bool{false, true} {
			ins := []*tensor.Tensor{xt, gate}
			op := g.a
			if first {
				ins, op = []*tensor.Tensor{gate, xt}, g.sf
			}
			want, err := cpuOp("Mul", 14, nil, ins...)
			if err != nil {
				return err
			}
			gpu, err := s.run(n, [][]float32{x}, func(in []uint64, out uint64) error {
				return s.e.Activation(nil, op, in[0], out, int64(n), g.p0, g.p1)
			})
			if err != nil {
				return err
			}
			s.record(fmt.Sprintf("%v [%d]", op, n), gpu, f32(want), false)
		}
	}
	// The vx_unary operators as the registry runs them (its vector paths).
	for _, u := range []struct {
		op    string
		ver   int64
		attrs []*ir.Attr
		u     exact.Unary
	}{{"Exp", 13, nil, exact.Exp}, {"Log", 13, nil, exact.Log}, {"Tanh", 13, nil, exact.Tanh}, {"Sigmoid", 13, nil, exact.Sigmoid},
		{"Erf", 13, nil, exact.Erf}, {"Gelu", 20, nil, exact.GeluErf}, {"Gelu", 20, []*ir.Attr{{Name: "approximate", Kind: ir.AttrString, S: "tanh"}}, exact.GeluTanh}} {
		want, err := cpuOp(u.op, u.ver, u.attrs, xt)
		if err != nil {
			return err
		}
		gpu, err := s.run(n, [][]float32{x}, func(in []uint64, out uint64) error { return s.e.Unary(nil, u.u, in[0], out, int64(n)) })
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("%s (registry) [%d]", u.op, n), gpu, f32(want), false)
	}
	// In place (y = x), as a fused layer's activation runs.
	want, err := cpuOp("HardSwish", 14, nil, xt)
	if err != nil {
		return err
	}
	inplace := append([]float32{}, x...)
	b, err := s.dev(inplace)
	if err != nil {
		return err
	}
	defer b.Free()
	if err := s.e.Activation(nil, exact.EwHardSwish, b.Ptr, b.Ptr, int64(n), 0, 0); err != nil {
		return err
	}
	got, err := s.fetch(b, n)
	if err != nil {
		return err
	}
	s.record(fmt.Sprintf("HardSwish in place [%d]", n), got, f32(want), false)
	return nil
}

func (s *suite) ewScaleShift() error {
	for _, sh := range [][]int{{1, 64, 56, 56}, {2, 7, 5, 3}, {3, 5}, {1, 13, 1, 1}} {
		C := sh[1]
		x := s.data(tensor.NumElems(sh), 3, 0.05)
		a, b := s.data(C, 1, 0.1), s.data(C, 1, 0.1)
		for _, relu := range []bool{false, true} {
			n := &ir.Node{OpType: nn.OpScaleShift, Domain: fused.Domain, Version: 1, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{}}
			if relu {
				n.Attrs["relu"] = intAttr("relu", 1)
			}
			want, err := runNode(n, []*tensor.Tensor{tensor.From(x, sh...), tensor.From(a, C), tensor.From(b, C)})
			if err != nil {
				return err
			}
			S := tensor.NumElems(sh[2:])
			gpu, err := s.run(len(x), [][]float32{x, a, b}, func(in []uint64, out uint64) error {
				return s.e.ScaleShift(nil, in[0], in[1], in[2], out, int64(sh[0]*C), S, C, relu)
			})
			if err != nil {
				return err
			}
			s.record(fmt.Sprintf("ScaleShift %v relu=%v", sh, relu), gpu, f32(want[0]), false)
		}
	}
	return nil
}

// ewResize checks linear and cubic Resize (every coordinate mode but
// tf_crop_and_resize, scales and sizes, up and down, exclude_outside,
// antialias, an axis other than the last two resized) against the CPU's.
func (s *suite) ewResize() error {
	for _, c := range LinearResizeCases(s.r, 3*max(s.cfg.Cases, 1)) {
		n, sh := c.Node, c.Shape
		x := s.data(tensor.NumElems(sh), 2, 0.05)
		want, err := runNode(n, append([]*tensor.Tensor{tensor.From(x, sh...)}, c.Consts...))
		if err != nil {
			return err
		}
		g, tab, err := engine.ResizeStencilTable(n, sh, c.Host)
		if err != nil {
			return fmt.Errorf("gputest: %s: %w", n.Name, err)
		}
		bits := make([]float32, len(tab))
		for j, v := range tab {
			bits[j] = math.Float32frombits(uint32(v))
		}
		gpu, err := s.run(g.OutLen(), [][]float32{x, bits}, func(in []uint64, out uint64) error { return s.e.Resize(nil, g, in[1], in[0], out) })
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("%s %v -> %v", n.Name, sh, want[0].Shape), gpu, f32(want[0]), false)
	}
	return nil
}

// ResizeCase is one linear or cubic Resize: the node (inputs x, roi,
// scales, sizes, absent ones ""), the input's shape and the constants
// (roi, scales, sizes; nil where absent).
type ResizeCase struct {
	Node   *ir.Node
	Shape  []int
	Consts []*tensor.Tensor
}

// Host returns the case's constant input name (ResizeStencilTable's
// host).
func (c ResizeCase) Host(name string) (*tensor.Tensor, error) {
	for i, in := range c.Node.Inputs[1:] {
		if in == name && in != "" && c.Consts[i] != nil {
			return c.Consts[i], nil
		}
	}
	return nil, fmt.Errorf("gputest: no constant %q", name)
}

// LinearResizeCases draws linear and cubic Resizes of rank-4 values:
// every coordinate transformation but tf_crop_and_resize, scales up and
// down (some not integral) and sizes, cubic's coefficient,
// exclude_outside, antialias, and now and then an outer axis resized too.
func LinearResizeCases(r interface {
	Intn(int) int
	Float64() float64
}, count int) []ResizeCase {
	ctms := []string{"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"}
	var cs []ResizeCase
	for i := range count {
		sh := []int{1 + r.Intn(2), 1 + r.Intn(4), 1 + r.Intn(13), 1 + r.Intn(13)}
		mode := []string{"linear", "cubic"}[i%2]
		attrs := map[string]*ir.Attr{
			"mode":                           {Name: "mode", Kind: ir.AttrString, S: mode},
			"coordinate_transformation_mode": {Name: "coordinate_transformation_mode", Kind: ir.AttrString, S: ctms[r.Intn(len(ctms))]},
		}
		if mode == "cubic" && r.Intn(2) == 0 {
			attrs["cubic_coeff_a"] = &ir.Attr{Name: "cubic_coeff_a", Kind: ir.AttrFloat, F: -0.5}
		}
		if r.Intn(4) == 0 {
			attrs["exclude_outside"] = &ir.Attr{Name: "exclude_outside", Kind: ir.AttrInt, I: 1}
		}
		if r.Intn(5) == 0 {
			attrs["antialias"] = &ir.Attr{Name: "antialias", Kind: ir.AttrInt, I: 1}
		}
		n := &ir.Node{Name: fmt.Sprintf("Resize %s %d", mode, i), OpType: "Resize", Version: 19, Outputs: []string{"y"}, Attrs: attrs}
		var consts []*tensor.Tensor
		if i%3 != 2 {
			pick := func() float32 { return []float32{0.5, 2, 3, 0.7, 1.5, 1.25, 0.6, 1}[r.Intn(8)] }
			sc := []float32{1, 1, pick(), pick()}
			if r.Intn(6) == 0 {
				sc[1] = pick()
			}
			n.Inputs = []string{"x", "", "scales"}
			consts = []*tensor.Tensor{nil, tensor.From(sc, 4)}
		} else {
			sz := []int64{int64(sh[0]), int64(sh[1]), int64(1 + r.Intn(17)), int64(1 + r.Intn(17))}
			n.Inputs = []string{"x", "", "", "sizes"}
			consts = []*tensor.Tensor{nil, nil, tensor.From(sz, 4)}
		}
		cs = append(cs, ResizeCase{Node: n, Shape: sh, Consts: consts})
	}
	return cs
}
