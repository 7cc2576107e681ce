package emu

import (
	"fmt"
	"math"
	"slices"

	"github.com/vouchml/vouch/cuda/mma"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// The layers are read as the GPU engine reads them (cuda/engine's conv,
// gemm and matmulFused, which the fast path shares): a fused layer's base
// inputs, then at most one Add (a Conv's residual), then the activation's
// inputs; Relu and Clip run in the kernels' epilogue, a fast MatMul's
// Adds and activation after it as exact passes.

func floats(t *tensor.Tensor, what string) ([]float32, error) {
	if t == nil {
		return nil, fmt.Errorf("emu: %s is missing", what)
	}
	v, ok := t.Data.([]float32)
	if !ok {
		return nil, fmt.Errorf("emu: %s is %v, want float32", what, t.DType)
	}
	return v, nil
}

// layer is a fast layer's fused layout; a plain node has its own inputs
// as base inputs and no epilogue.
func layer(n *ir.Node) (h fused.Layer, err error) {
	if n.OpType != fused.OpFused {
		return fused.Layer{Base: n.OpType, BaseInputs: len(n.Inputs)}, nil
	}
	h, _ = fused.LayerOf(n)
	return h, h.Check(len(n.Inputs))
}

// epilogue is the Relu or Clip of a fused layer (inputs from first on).
func epilogue(n *ir.Node, h fused.Layer, in []*tensor.Tensor, first int) (mma.Epilogue, error) {
	var e mma.Epilogue
	switch h.Activation {
	case "":
	case "Relu":
		e.Relu = true
	case "Clip":
		if h.ActVersion > 0 && h.ActVersion < 11 {
			e.Lo = n.Float(fused.ActPrefix+"min", float32(math.Inf(-1)))
			e.Hi = n.Float(fused.ActPrefix+"max", float32(math.Inf(1)))
			e.HasLo, e.HasHi = true, true
			break
		}
		for i, p := range []*float32{&e.Lo, &e.Hi} {
			if first+i >= len(in) || in[first+i] == nil {
				continue
			}
			v, err := floats(in[first+i], "a Clip bound")
			if err != nil || len(v) != 1 {
				return e, fmt.Errorf("emu: Clip bound %d is not one float32", i)
			}
			*p = v[0]
			if i == 0 {
				e.HasLo = true
			} else {
				e.HasHi = true
			}
		}
	default:
		return e, fmt.Errorf("emu: fused activation %s has no fast epilogue", h.Activation)
	}
	return e, nil
}

func ints(n *ir.Node, name string, def ...int) []int { return n.IntList(name, def...) }

// product is a fast layer's arithmetic on the operands as the engine
// reads them: the convolution g of x by w ([M][C*KH*KW]), epilogue e,
// into y. mmaProduct is the 16-bit kernels' (mma's Conv2D), int8.go's
// the INT8 kernels' (their Go twin).
type product func(g mma.ConvGeom, x, w []float32, e mma.Epilogue, y []float32) error

func mmaProduct(m mma.Model, f mma.Format) product {
	return func(g mma.ConvGeom, x, w []float32, e mma.Epilogue, y []float32) error {
		return m.Conv2D(f, g, x, w, e, y)
	}
}

// conv is a fast Conv layer: the product with the layer's bias, residual
// and Relu/Clip in its epilogue.
func conv(pr product, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	h, err := layer(n)
	if err != nil {
		return nil, err
	}
	if h.Adds > 1 || h.BaseInputs < 2 {
		return nil, fmt.Errorf("emu: fast Conv of layout %+v", h)
	}
	x, err := floats(in[0], "the Conv input")
	if err != nil {
		return nil, err
	}
	w, err := floats(in[1], "the Conv weights")
	if err != nil {
		return nil, err
	}
	xs, ws := in[0].Shape, in[1].Shape
	if len(xs) != 4 || len(ws) != 4 || n.Int("group", 1) != 1 || ws[1] != xs[1] {
		return nil, fmt.Errorf("emu: fast Conv of %v by %v in %d groups (one group of 2-D convolutions)", xs, ws, n.Int("group", 1))
	}
	p := ints(n, "pads", 0, 0, 0, 0)
	st, d := ints(n, "strides", 1, 1), ints(n, "dilations", 1, 1)
	if len(p) != 4 || p[0] != p[2] || p[1] != p[3] || len(st) != 2 || len(d) != 2 {
		return nil, fmt.Errorf("emu: fast Conv pads %v strides %v dilations %v", p, st, d)
	}
	g := mma.ConvGeom{N: xs[0], C: xs[1], H: xs[2], W: xs[3], M: ws[0], KH: ws[2], KW: ws[3],
		SH: st[0], SW: st[1], PH: p[0], PW: p[1], DH: d[0], DW: d[1]}
	e, err := epilogue(n, h, in, h.BaseInputs+h.Adds)
	if err != nil {
		return nil, err
	}
	if h.BaseInputs == 3 && in[2] != nil {
		if e.Bias, err = floats(in[2], "the Conv bias"); err != nil {
			return nil, err
		}
	}
	oh, ow := g.Out()
	if oh < 1 || ow < 1 {
		return nil, fmt.Errorf("emu: Conv kernel larger than its padded input %v", xs)
	}
	if h.Adds == 1 {
		r := in[h.BaseInputs]
		if r == nil || !slices.Equal(r.Shape, []int{g.N, g.M, oh, ow}) {
			return nil, fmt.Errorf("emu: fast Conv residual of shape %v for an output of %v", shapeOf(r), []int{g.N, g.M, oh, ow})
		}
		if e.Res, err = floats(r, "the residual"); err != nil {
			return nil, err
		}
	}
	y := tensor.New(tensor.Float32, g.N, g.M, oh, ow)
	if err := pr(g, x, w, e, y.Data.([]float32)); err != nil {
		return nil, err
	}
	return []*tensor.Tensor{y}, nil
}

func shapeOf(t *tensor.Tensor) []int {
	if t == nil {
		return nil
	}
	return t.Shape
}

// gemm is a fast Gemm (alpha = beta = 1, A not transposed): the 1×1
// convolution of A's rows by B's columns, C (a row) as the bias.
func gemm(pr product, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	h, err := layer(n)
	if err != nil {
		return nil, err
	}
	if h.Adds != 0 || n.Int("transA", 0) != 0 || n.Float("alpha", 1) != 1 || n.Float("beta", 1) != 1 {
		return nil, fmt.Errorf("emu: fast Gemm with an Add, transA, alpha or beta")
	}
	a, err := floats(in[0], "Gemm's A")
	if err != nil {
		return nil, err
	}
	b, err := floats(in[1], "Gemm's B")
	if err != nil {
		return nil, err
	}
	as, bs := in[0].Shape, in[1].Shape
	if len(as) != 2 || len(bs) != 2 {
		return nil, fmt.Errorf("emu: fast Gemm of %v and %v", as, bs)
	}
	M, K := as[0], as[1]
	trans := n.Int("transB", 0) != 0
	N := bs[1]
	if trans {
		N = bs[0]
	}
	if trans && bs[1] != K || !trans && bs[0] != K {
		return nil, fmt.Errorf("emu: fast Gemm of %v and %v (transB %v)", as, bs, trans)
	}
	w := b // [N][K]
	if !trans {
		w = make([]float32, N*K)
		for k := 0; k < K; k++ {
			for j := 0; j < N; j++ {
				w[j*K+k] = b[k*N+j]
			}
		}
	}
	e, err := epilogue(n, h, in, h.BaseInputs+h.Adds)
	if err != nil {
		return nil, err
	}
	if len(in) > 2 && in[2] != nil {
		if e.Bias, err = floats(in[2], "Gemm's C"); err != nil {
			return nil, err
		}
		if len(e.Bias) != N {
			return nil, fmt.Errorf("emu: fast Gemm C of shape %v (the fast kernel adds a row of %d)", in[2].Shape, N)
		}
	}
	y := tensor.New(tensor.Float32, M, N)
	g := mma.ConvGeom{N: M, C: K, H: 1, W: 1, M: N, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
	if err := pr(g, a, w, e, y.Data.([]float32)); err != nil {
		return nil, err
	}
	return []*tensor.Tensor{y}, nil
}

// matmul is a fast MatMul by a constant 2-D B: the product on the
// emulated tensor cores, then the fused layer's Adds and activation run by
// the CPU kernels of those ops (the exact passes the GPU runs after it).
func (o *fastOp) matmul(c *kernel.Ctx, m mma.Model, f mma.Format, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	h, err := layer(n)
	if err != nil {
		return nil, err
	}
	a, err := floats(in[0], "MatMul's A")
	if err != nil {
		return nil, err
	}
	b, err := floats(in[1], "MatMul's B")
	if err != nil {
		return nil, err
	}
	as, bs := in[0].Shape, in[1].Shape
	if len(as) < 2 || len(bs) != 2 || as[len(as)-1] != bs[0] {
		return nil, fmt.Errorf("emu: fast MatMul of %v by %v", as, bs)
	}
	K, N := bs[0], bs[1]
	rows := tensor.NumElems(as) / max(K, 1)
	w := make([]float32, N*K)
	for k := 0; k < K; k++ {
		for j := 0; j < N; j++ {
			w[j*K+k] = b[k*N+j]
		}
	}
	y := tensor.New(tensor.Float32, append(slices.Clone(as[:len(as)-1]), N)...)
	if rows > 0 && N > 0 {
		g := mma.ConvGeom{N: rows, C: K, H: 1, W: 1, M: N, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
		if err := m.Conv2D(f, g, a, w, mma.Epilogue{}, y.Data.([]float32)); err != nil {
			return nil, err
		}
	}
	if n.OpType != fused.OpFused {
		return []*tensor.Tensor{y}, nil
	}
	// The exact passes: each Add takes the running value first, then the
	// activation (its inputs after the Adds').
	for i := range h.Adds {
		add := &ir.Node{Name: n.Name + "/add", OpType: "Add", Version: 14, Inputs: []string{n.Name + "/add/a", n.Name + "/add/b"}}
		if y, err = o.one(c, add, []*tensor.Tensor{y, in[h.BaseInputs+i]}); err != nil {
			return nil, err
		}
	}
	if h.Activation == "" {
		return []*tensor.Tensor{y}, nil
	}
	switch h.Activation {
	case "Relu", "Gelu", "Clip":
	default:
		return nil, fmt.Errorf("emu: fused activation %s after a fast MatMul", h.Activation)
	}
	act := &ir.Node{Name: n.Name + "/act", OpType: h.Activation, Version: h.ActVersion, Attrs: map[string]*ir.Attr{}}
	for k, v := range n.Attrs {
		if name, ok := cutPrefix(k, fused.ActPrefix); ok && k != fused.AttrSigmoidFirst {
			c := *v
			c.Name = name
			act.Attrs[name] = &c
		}
	}
	args := append([]*tensor.Tensor{y}, in[h.BaseInputs+h.Adds:]...)
	act.Inputs = make([]string, len(args))
	for i, t := range args {
		if t != nil {
			act.Inputs[i] = fmt.Sprintf("%s/in%d", act.Name, i)
		}
	}
	if y, err = o.one(c, act, args); err != nil {
		return nil, err
	}
	return []*tensor.Tensor{y}, nil
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}

// one runs a single op with the base registry's CPU kernel.
func (o *fastOp) one(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) (*tensor.Tensor, error) {
	n.Outputs = []string{n.Name}
	op, err := o.base.Lookup(n)
	if err != nil {
		return nil, err
	}
	out, err := op.Run(c, n, in)
	if err != nil {
		return nil, fmt.Errorf("emu: %s: %w", n.OpType, err)
	}
	return out[0], nil
}
