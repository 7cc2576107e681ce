package gputest

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// cpuOp runs one operator of vouch's CPU kernel registry: the twin.
func cpuOp(op string, version int64, attrs []*ir.Attr, ins ...*tensor.Tensor) (*tensor.Tensor, error) {
	n := &ir.Node{OpType: op, Version: version, Attrs: map[string]*ir.Attr{}, Outputs: []string{"y"}}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	k, err := builtin.Registry().Lookup(n)
	if err != nil {
		return nil, err
	}
	out, err := k.Run(&kernel.Ctx{}, n, ins)
	if err != nil {
		return nil, fmt.Errorf("gputest: CPU %s: %w", op, err)
	}
	return out[0], nil
}

func f32(t *tensor.Tensor) []float32 { return t.Data.([]float32) }

func ints(name string, v ...int) *ir.Attr {
	a := &ir.Attr{Name: name, Kind: ir.AttrInts}
	for _, x := range v {
		a.Ints = append(a.Ints, int64(x))
	}
	return a
}

func intAttr(name string, v int) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInt, I: int64(v)} }

func floatAttr(name string, v float32) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrFloat, F: v}
}

func (s *suite) unary() error {
	fns := map[exact.Unary]func(float32) float32{
		exact.Exp: vmath.Exp32, exact.Log: vmath.Log32, exact.Tanh: vmath.Tanh32, exact.Sigmoid: vmath.Sigmoid32,
		exact.Erf: vmath.Erf32, exact.GeluErf: vmath.GeluErf32, exact.GeluTanh: vmath.GeluTanh32,
	}
	// Wide ranges reach every branch: the polynomials' intervals, the
	// overflow and underflow cut-offs, subnormal arguments and results.
	n := 1 << 20
	x := s.data(n, 6, 0.01)
	for i := 0; i < n/8; i++ {
		x[s.r.Intn(n)] = float32(s.r.NormFloat64() * 60)
	}
	for op := exact.Relu; op <= exact.GeluTanh; op++ {
		var cpu []float32
		if op == exact.Relu {
			t, err := cpuOp("Relu", 14, nil, tensor.From(x, n))
			if err != nil {
				return err
			}
			cpu = f32(t)
		} else {
			cpu = make([]float32, n)
			for i, v := range x {
				cpu[i] = fns[op](v)
			}
		}
		gpu, err := s.run(n, [][]float32{x}, func(in []uint64, out uint64) error { return s.e.Unary(nil, op, in[0], out, int64(n)) })
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("%v [%d]", op, n), gpu, cpu, false)
	}
	// Clip (opset 13) as ReLU6 and with one bound only.
	f := func(v float32) *float32 { return &v }
	for _, c := range []struct{ lo, hi *float32 }{{f(0), f(6)}, {f(-1.5), nil}, {nil, f(0.25)}, {f(float32(math.Copysign(0, -1))), f(0)}} {
		ins := []*tensor.Tensor{tensor.From(x, n), nil, nil}
		var lo, hi float32
		if c.lo != nil {
			lo, ins[1] = *c.lo, tensor.Scalar(*c.lo)
		}
		if c.hi != nil {
			hi, ins[2] = *c.hi, tensor.Scalar(*c.hi)
		}
		t, err := cpuOp("Clip", 13, nil, ins...)
		if err != nil {
			return err
		}
		gpu, err := s.run(n, [][]float32{x}, func(in []uint64, out uint64) error {
			return s.e.Clip(nil, in[0], out, int64(n), lo, hi, c.lo != nil, c.hi != nil)
		})
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("Clip(%v, %v) [%d]", fmtBound(c.lo), fmtBound(c.hi), n), gpu, f32(t), false)
	}
	return nil
}

func fmtBound(p *float32) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

func (s *suite) add() error {
	n := 100003
	a, b := s.data(n, 3, 0.05), s.data(n, 3, 0.05)
	t, err := cpuOp("Add", 14, nil, tensor.From(a, n), tensor.From(b, n))
	if err != nil {
		return err
	}
	gpu, err := s.run(n, [][]float32{a, b}, func(in []uint64, out uint64) error { return s.e.Add(nil, in[0], in[1], out, int64(n)) })
	if err != nil {
		return err
	}
	s.record(fmt.Sprintf("Add [%d]", n), gpu, f32(t), false)
	return nil
}

// gemm checks SGEMM against MatMul on random shapes (odd edges, K tails),
// the 128x128 path on aligned shapes, and transposed strides.
func (s *suite) gemm() error {
	type shape struct{ m, n, k int }
	shapes := []shape{{1, 1, 1}, {1, 1000, 512}, {7, 13, 5}, {64, 64, 16}, {65, 63, 17}, {128, 128, 16}, {256, 384, 48}, {384, 256, 1024}, {128, 256, 8}, {256, 128, 24}, {129, 257, 33},
		{128, 768, 3072}, {128, 2304, 768}, {64, 128, 512}} // BERT-base's FF2 and QKV and tiny_bert's FF1 at batch 1
	for i := 0; i < s.cfg.Cases; i++ {
		shapes = append(shapes, shape{1 + s.r.Intn(300), 1 + s.r.Intn(300), 1 + s.r.Intn(700)})
	}
	for _, sh := range shapes {
		a, b := s.data(sh.m*sh.k, 1, 0.002), s.data(sh.k*sh.n, 1, 0.002)
		t, err := cpuOp("MatMul", 13, nil, tensor.From(a, sh.m, sh.k), tensor.From(b, sh.k, sh.n))
		if err != nil {
			return err
		}
		gpu, err := s.run(sh.m*sh.n, [][]float32{a, b}, func(in []uint64, out uint64) error {
			return s.e.SGEMM(nil, sh.m, sh.n, sh.k, exact.Mat{Ptr: in[0], RS: int64(sh.k), CS: 1}, exact.Mat{Ptr: in[1], RS: int64(sh.n), CS: 1}, out, int64(sh.n))
		})
		if err != nil {
			return err
		}
		path := "general"
		if sh.m%128 == 0 && sh.n%128 == 0 && sh.k%8 == 0 {
			path = "128x128"
		}
		s.record(fmt.Sprintf("SGEMM %dx%dx%d (%s)", sh.m, sh.n, sh.k, path), gpu, f32(t), true)
		// The same product through the general kernel with B read
		// transposed from B^T: the strides change, the chains do not.
		bt := make([]float32, len(b))
		for k := 0; k < sh.k; k++ {
			for j := 0; j < sh.n; j++ {
				bt[j*sh.k+k] = b[k*sh.n+j]
			}
		}
		gpu, err = s.run(sh.m*sh.n, [][]float32{a, bt}, func(in []uint64, out uint64) error {
			return s.e.SGEMMGeneral(nil, sh.m, sh.n, sh.k, exact.Mat{Ptr: in[0], RS: int64(sh.k), CS: 1}, exact.Mat{Ptr: in[1], RS: 1, CS: int64(sh.k)}, out, int64(sh.n), 1, 0, 0, 0)
		})
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("SGEMM %dx%dx%d (B transposed)", sh.m, sh.n, sh.k), gpu, f32(t), true)
		if err := s.gemmAsConv(sh.m, sh.n, sh.k, a, bt, f32(t)); err != nil {
			return err
		}
	}
	return nil
}

// convCase is one Conv: input [N,C,H,W], M filters of KHxKW, group G.
type convCase struct {
	exact.ConvGeom
	bias, res, relu bool
}

func (s *suite) convCases() []convCase {
	g := func(n, c, h, w, m, k, st, p, d, gr int) exact.ConvGeom {
		return exact.ConvGeom{N: n, C: c, H: h, W: w, M: m, G: gr, KH: k, KW: k, SH: st, SW: st, PH: p, PW: p, DH: d, DW: d}
	}
	cs := []convCase{
		// resnet18's convolutions (batch 1; the 56x56 ones at batch 2).
		{g(1, 3, 224, 224, 64, 7, 2, 3, 1, 1), true, false, true},
		{g(2, 64, 56, 56, 64, 3, 1, 1, 1, 1), true, false, true},
		{g(1, 64, 56, 56, 64, 3, 1, 1, 1, 1), true, true, true},
		{g(1, 64, 56, 56, 128, 3, 2, 1, 1, 1), true, false, true},
		{g(1, 64, 56, 56, 128, 1, 2, 0, 1, 1), true, false, false},
		{g(1, 128, 28, 28, 128, 3, 1, 1, 1, 1), true, true, true},
		{g(1, 128, 28, 28, 256, 3, 2, 1, 1, 1), true, false, true},
		{g(1, 256, 14, 14, 256, 3, 1, 1, 1, 1), true, true, true},
		{g(1, 256, 14, 14, 512, 3, 2, 1, 1, 1), true, false, true},
		{g(1, 512, 7, 7, 512, 3, 1, 1, 1, 1), true, true, true},
		// Depthwise and grouped (mobilenet_v2's and odd ones), dilation.
		{g(1, 32, 17, 19, 32, 3, 1, 1, 1, 32), true, false, false},
		{g(2, 24, 15, 15, 48, 3, 2, 1, 1, 3), false, false, false},
		{g(1, 5, 9, 11, 7, 3, 1, 2, 2, 1), true, false, true},
		{g(3, 3, 8, 5, 2, 5, 3, 2, 1, 1), false, true, false},
		// 1x1 stride 1 with P a multiple of 4 (the 16-byte input loads),
		// M past a tile's edge, across images; ResNet-50's 7x7 1x1.
		{g(2, 64, 14, 14, 96, 1, 1, 0, 1, 1), true, true, true},
		{g(3, 36, 7, 8, 130, 1, 1, 0, 1, 1), true, false, false},
		{g(2, 128, 7, 7, 200, 1, 1, 0, 1, 1), true, true, true},
		{g(2, 20, 9, 9, 136, 3, 1, 1, 1, 1), true, false, true},
	}
	for i := 0; i < s.cfg.Cases; i++ {
		gr := []int{1, 1, 2, 3}[s.r.Intn(4)]
		k := 1 + s.r.Intn(5)
		c := convCase{ConvGeom: g(1+s.r.Intn(3), gr*(1+s.r.Intn(9)), 1+s.r.Intn(20)+k, 1+s.r.Intn(20)+k, gr*(1+s.r.Intn(70)), k, 1+s.r.Intn(3), s.r.Intn(k), 1+s.r.Intn(2), gr),
			bias: s.r.Intn(2) == 0, res: s.r.Intn(3) == 0, relu: s.r.Intn(2) == 0}
		c.KW = 1 + s.r.Intn(4)
		c.PW = s.r.Intn(c.KW)
		// Every case is a valid Conv: the (dilated) kernel fits the padded
		// input in both dimensions.
		if ek := (c.KH-1)*c.DH + 1; ek > c.H+2*c.PH {
			c.DH = 1
		}
		if ek := (c.KW-1)*c.DW + 1; ek > c.W+2*c.PW {
			c.DW = 1
		}
		c.W = max(c.W, c.KW)
		cs = append(cs, c)
	}
	return cs
}

// cpuConv runs Conv (+ Add) (+ Relu) through the CPU registry and returns
// the output and its geometry's output size.
func cpuConv(c convCase, x, w, b, res []float32) ([]float32, []int, error) {
	attrs := []*ir.Attr{ints("kernel_shape", c.KH, c.KW), ints("strides", c.SH, c.SW), ints("pads", c.PH, c.PW, c.PH, c.PW),
		ints("dilations", c.DH, c.DW), intAttr("group", c.G)}
	ins := []*tensor.Tensor{tensor.From(x, c.N, c.C, c.H, c.W), tensor.From(w, c.M, c.C/c.G, c.KH, c.KW)}
	if b != nil {
		ins = append(ins, tensor.From(b, c.M))
	}
	y, err := cpuOp("Conv", 11, attrs, ins...)
	if err != nil {
		return nil, nil, err
	}
	if res != nil {
		if y, err = cpuOp("Add", 14, nil, y, tensor.From(res, y.Shape...)); err != nil {
			return nil, nil, err
		}
	}
	if c.relu {
		if y, err = cpuOp("Relu", 14, nil, y); err != nil {
			return nil, nil, err
		}
	}
	return f32(y), y.Shape, nil
}

func (s *suite) conv() error {
	for _, c := range s.convCases() {
		if err := s.convOne(c); err != nil {
			return err
		}
	}
	return nil
}

func (s *suite) convOne(c convCase) error {
	oh := (c.H+2*c.PH-((c.KH-1)*c.DH+1))/c.SH + 1
	ow := (c.W+2*c.PW-((c.KW-1)*c.DW+1))/c.SW + 1
	c.OH, c.OW = oh, ow
	x := s.data(c.N*c.C*c.H*c.W, 1, 0.001)
	w := s.data(c.M*c.C/c.G*c.KH*c.KW, 0.2, 0.001)
	var b, res []float32
	if c.bias {
		b = s.data(c.M, 0.5, 0)
	}
	if c.res {
		res = s.data(c.OutLen(), 1, 0)
	}
	cpu, shape, err := cpuConv(c, x, w, b, res)
	if err != nil {
		return err
	}
	if shape[2] != oh || shape[3] != ow {
		return fmt.Errorf("gputest: conv %+v: CPU output %v, GPU geometry %dx%d", c.ConvGeom, shape, oh, ow)
	}
	ep := ""
	if c.bias {
		ep += "+bias"
	}
	if c.res {
		ep += "+res"
	}
	if c.relu {
		ep += "+relu"
	}
	// Every kernel that can run it: the per-image tiles, the batch-folded
	// ones (and their 1x1 variants), one thread per output.
	defer func() { s.e.ConvKernel = "" }()
	for _, kn := range exact.ConvKernels(c.ConvGeom) {
		s.e.ConvKernel = kn
		gpu, err := s.run(len(cpu), [][]float32{x, w, b, res}, func(in []uint64, out uint64) error {
			return s.e.Conv2D(nil, c.ConvGeom, in[0], in[1], in[2], in[3], c.relu, out)
		})
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("Conv %dx%dx%dx%d M%d k%dx%d s%d p%d,%d d%d g%d%s %s", c.N, c.C, c.H, c.W, c.M, c.KH, c.KW, c.SH, c.PH, c.PW, c.DH, c.G, ep, kn), gpu, cpu, !c.res)
	}
	if c.relu || c.res {
		return nil
	}
	// The fused Clip epilogue (ReLU6) against Conv then Clip on the CPU.
	clipped, err := cpuOp("Clip", 6, []*ir.Attr{floatAttr("min", 0), floatAttr("max", 6)}, tensor.From(cpu, shape...))
	if err != nil {
		return err
	}
	for _, kn := range []string{s.e.ConvChoice(c.ConvGeom), kernels.Conv2D, kernels.ConvDirect} {
		s.e.ConvKernel = kn
		gpu, err := s.run(len(cpu), [][]float32{x, w, b, nil}, func(in []uint64, out uint64) error {
			return s.e.Conv2DAct(nil, c.ConvGeom, in[0], in[1], in[2], 0, exact.Act{HasLo: true, HasHi: true, Lo: 0, Hi: 6}, out)
		})
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("Conv %dx%dx%dx%d M%d k%dx%d s%d p%d,%d d%d g%d%s+clip(0,6) %s", c.N, c.C, c.H, c.W, c.M, c.KH, c.KW, c.SH, c.PH, c.PW, c.DH, c.G, ep, kn), gpu, f32(clipped), false)
	}
	return nil
}

func (s *suite) pools() error {
	type pc struct {
		planes, h, w, k, st, p, d int
		ceil, avg, incl           bool
	}
	cases := []pc{{64, 112, 112, 3, 2, 1, 1, false, false, false}, {5, 9, 13, 2, 2, 0, 1, true, false, false}, {3, 10, 7, 3, 1, 1, 2, false, false, false},
		{7, 11, 11, 3, 2, 1, 1, false, true, false}, {7, 11, 11, 3, 2, 1, 1, false, true, true}, {4, 8, 9, 2, 2, 0, 1, false, true, false}}
	for i := 0; i < s.cfg.Cases; i++ {
		k := 1 + s.r.Intn(4)
		c := pc{1 + s.r.Intn(20), k + s.r.Intn(30), k + s.r.Intn(30), k, 1 + s.r.Intn(3), s.r.Intn(k), 1, false, s.r.Intn(2) == 0, s.r.Intn(2) == 0}
		if !c.avg {
			c.ceil = s.r.Intn(2) == 0
			c.d = 1 + s.r.Intn(2)
			if (k-1)*c.d+1 > c.h+2*c.p || (k-1)*c.d+1 > c.w+2*c.p {
				c.d = 1
			}
		}
		cases = append(cases, c)
	}
	for _, c := range cases {
		x := s.data(c.planes*c.h*c.w, 2, 0.01)
		attrs := []*ir.Attr{ints("kernel_shape", c.k, c.k), ints("strides", c.st, c.st), ints("pads", c.p, c.p, c.p, c.p)}
		op := "MaxPool"
		if c.avg {
			op = "AveragePool"
			if c.incl {
				attrs = append(attrs, intAttr("count_include_pad", 1))
			}
		} else {
			attrs = append(attrs, ints("dilations", c.d, c.d))
		}
		if c.ceil {
			attrs = append(attrs, intAttr("ceil_mode", 1))
		}
		t, err := cpuOp(op, 12, attrs, tensor.From(x, 1, c.planes, c.h, c.w))
		if err != nil {
			return err
		}
		g := exact.PoolGeom{Planes: c.planes, H: c.h, W: c.w, OH: t.Shape[2], OW: t.Shape[3], KH: c.k, KW: c.k, SH: c.st, SW: c.st,
			PBH: c.p, PBW: c.p, PEH: c.p, PEW: c.p, DH: c.d, DW: c.d}
		gpu, err := s.run(len(f32(t)), [][]float32{x}, func(in []uint64, out uint64) error {
			if c.avg {
				return s.e.AvgPool2D(nil, g, c.incl, in[0], out)
			}
			return s.e.MaxPool2D(nil, g, in[0], out)
		})
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("%s %dx%dx%d k%d s%d p%d d%d ceil=%v incl=%v", op, c.planes, c.h, c.w, c.k, c.st, c.p, c.d, c.ceil, c.incl), gpu, f32(t), false)
	}
	for _, sh := range [][2]int{{512, 49}, {37, 1}, {3, 1000}} {
		x := s.data(sh[0]*sh[1], 1, 0.01)
		t, err := cpuOp("GlobalAveragePool", 1, nil, tensor.From(x, 1, sh[0], sh[1], 1))
		if err != nil {
			return err
		}
		gpu, err := s.run(sh[0], [][]float32{x}, func(in []uint64, out uint64) error { return s.e.GlobalAvg(nil, in[0], out, int64(sh[0]), sh[1]) })
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("GlobalAveragePool %dx%d", sh[0], sh[1]), gpu, f32(t), false)
	}
	return nil
}

func (s *suite) softmax() error {
	for _, sh := range [][2]int{{1, 1000}, {96, 128}, {7, 1}, {33, 77}, {4, 30522}} {
		x := s.data(sh[0]*sh[1], 4, 0.001)
		t, err := cpuOp("Softmax", 13, nil, tensor.From(x, sh[0], sh[1]))
		if err != nil {
			return err
		}
		gpu, err := s.run(len(x), [][]float32{x}, func(in []uint64, out uint64) error { return s.e.Softmax(nil, in[0], out, int64(sh[0]), sh[1]) })
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("Softmax %dx%d", sh[0], sh[1]), gpu, f32(t), false)
	}
	return nil
}

func (s *suite) layerNorm() error {
	for _, sh := range [][2]int{{128, 768}, {5, 13}, {9, 1}, {64, 312}} {
		x := s.data(sh[0]*sh[1], 2, 0.001)
		sc, bs := s.data(sh[1], 1, 0), s.data(sh[1], 1, 0)
		attrs := []*ir.Attr{intAttr("axis", -1), {Name: "epsilon", Kind: ir.AttrFloat, F: 1e-5}}
		for _, withBias := range []bool{true, false} {
			ins := []*tensor.Tensor{tensor.From(x, sh[0], sh[1]), tensor.From(sc, sh[1])}
			var bb []float32
			if withBias {
				ins = append(ins, tensor.From(bs, sh[1]))
				bb = bs
			}
			t, err := cpuOp("LayerNormalization", 17, attrs, ins...)
			if err != nil {
				return err
			}
			gpu, err := s.run(len(x), [][]float32{x, sc, bb}, func(in []uint64, out uint64) error {
				return s.e.LayerNorm(nil, in[0], in[1], in[2], 1e-5, out, int64(sh[0]), sh[1])
			})
			if err != nil {
				return err
			}
			s.record(fmt.Sprintf("LayerNorm %dx%d bias=%v", sh[0], sh[1], withBias), gpu, f32(t), true)
		}
	}
	return nil
}

// invariance: an image's output alone equals its output inside a batch,
// and products run on two streams at once equal the serial ones.
func (s *suite) invariance() error {
	c := convCase{ConvGeom: exact.ConvGeom{N: 5, C: 16, H: 23, W: 23, M: 40, G: 1, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, OH: 23, OW: 23}, bias: true, relu: true}
	x := s.data(c.N*c.C*c.H*c.W, 1, 0.001)
	w := s.data(c.M*c.C*9, 0.2, 0)
	b := s.data(c.M, 0.5, 0)
	batch, err := s.run(c.OutLen(), [][]float32{x, w, b}, func(in []uint64, out uint64) error {
		return s.e.Conv2D(nil, c.ConvGeom, in[0], in[1], in[2], 0, true, out)
	})
	if err != nil {
		return err
	}
	one := c
	one.N = 1
	per := c.C * c.H * c.W
	alone, err := s.run(one.OutLen(), [][]float32{x[3*per : 4*per], w, b}, func(in []uint64, out uint64) error {
		return s.e.Conv2D(nil, one.ConvGeom, in[0], in[1], in[2], 0, true, out)
	})
	if err != nil {
		return err
	}
	s.record("batch invariance: image 3 of 5 alone", alone, batch[3*one.OutLen():4*one.OutLen()], true)

	m, n, k := 256, 512, 300
	a, bm := s.data(m*k, 1, 0.001), s.data(k*n, 1, 0.001)
	serial, err := s.run(m*n, [][]float32{a, bm}, func(in []uint64, out uint64) error {
		return s.e.SGEMM(nil, m, n, k, exact.Mat{Ptr: in[0], RS: int64(k), CS: 1}, exact.Mat{Ptr: in[1], RS: int64(n), CS: 1}, out, int64(n))
	})
	if err != nil {
		return err
	}
	var streams []*cuda.Stream
	defer func() {
		for _, st := range streams {
			st.Destroy()
		}
	}()
	for i := 0; i < 4; i++ {
		st, err := s.c.NewStream()
		if err != nil {
			return err
		}
		streams = append(streams, st)
	}
	outs := make([]*cuda.Buffer, len(streams))
	da, err := s.dev(a)
	if err != nil {
		return err
	}
	defer da.Free()
	db, err := s.dev(bm)
	if err != nil {
		return err
	}
	defer db.Free()
	for i, st := range streams {
		if outs[i], err = s.out(m * n); err != nil {
			return err
		}
		defer outs[i].Free()
		if err := s.c.Synchronize(); err != nil {
			return err
		}
		if err := s.e.SGEMM(st, m, n, k, exact.Mat{Ptr: da.Ptr, RS: int64(k), CS: 1}, exact.Mat{Ptr: db.Ptr, RS: int64(n), CS: 1}, outs[i].Ptr, int64(n)); err != nil {
			return err
		}
	}
	for i := range streams {
		got, err := s.fetch(outs[i], m*n)
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("stream invariance: stream %d of 4", i), got, serial, true)
	}
	return nil
}

// graph captures conv -> maxpool -> global average into a CUDA graph and
// checks that its replays give the bits of the direct launches.
func (s *suite) graph() error {
	c := exact.ConvGeom{N: 2, C: 8, H: 32, W: 32, M: 16, G: 1, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, OH: 32, OW: 32}
	pg := exact.PoolGeom{Planes: 2 * 16, H: 32, W: 32, OH: 16, OW: 16, KH: 2, KW: 2, SH: 2, SW: 2, DH: 1, DW: 1}
	x, w, b := s.data(c.N*c.C*c.H*c.W, 1, 0.001), s.data(c.M*c.C*9, 0.3, 0), s.data(c.M, 0.2, 0)
	bufs := map[string]*cuda.Buffer{}
	defer func() {
		for _, v := range bufs {
			v.Free()
		}
	}()
	var err error
	for name, v := range map[string][]float32{"x": x, "w": w, "b": b} {
		if bufs[name], err = s.dev(v); err != nil {
			return err
		}
	}
	for name, n := range map[string]int{"y": c.OutLen(), "p": pg.Planes * 256, "g": pg.Planes} {
		if bufs[name], err = s.out(n); err != nil {
			return err
		}
	}
	launch := func(st *cuda.Stream) error {
		if err := s.e.Conv2D(st, c, bufs["x"].Ptr, bufs["w"].Ptr, bufs["b"].Ptr, 0, true, bufs["y"].Ptr); err != nil {
			return err
		}
		if err := s.e.MaxPool2D(st, pg, bufs["y"].Ptr, bufs["p"].Ptr); err != nil {
			return err
		}
		return s.e.GlobalAvg(st, bufs["p"].Ptr, bufs["g"].Ptr, int64(pg.Planes), 256)
	}
	if err := launch(nil); err != nil {
		return err
	}
	direct, err := s.fetch(bufs["g"], pg.Planes)
	if err != nil {
		return err
	}
	st, err := s.c.NewStream()
	if err != nil {
		return err
	}
	defer st.Destroy()
	g, err := s.c.Capture(st, func() error { return launch(st) })
	if err != nil {
		return err
	}
	defer g.Destroy()
	for rep := 0; rep < 3; rep++ {
		if err := s.c.Fill32(st, bufs["g"].Ptr, 0x7fbadbad, uint64(pg.Planes)); err != nil {
			return err
		}
		if err := g.Launch(st); err != nil {
			return err
		}
		got, err := s.fetch(bufs["g"], pg.Planes)
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("CUDA graph replay %d (conv, pool, average)", rep+1), got, direct, true)
	}
	return nil
}
