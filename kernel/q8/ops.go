package q8

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// Layout of a "vouch" Q8 node:
//
//	inputs:  X (float32), W (int8 constant), w_scale (float32 [M]), bias (float32 [M] or ""),
//	         [add operand], activation inputs...
//	attrs:   base         string  Conv, Gemm or MatMul
//	         base_version int
//	         x_scale      float   the input's scale (per tensor)
//	         layout       ints    [4, 1 if an add operand follows, number of activation inputs]
//	         w_bits       int     7: every weight lies in [−63, 63] (AttrWeightBits); absent: 8
//	         activation, act_version, act_<name>: as in a Fused layer
//	         every other attribute belongs to the base op (Conv: strides, pads, ...)
//
// For Conv, W is [M, C/group, KH, KW]. For Gemm and MatMul, W is [N, K]
// (one row per output column: Gemm's B with transB=1, MatMul's B
// transposed); alpha and beta are folded into w_scale and bias by the
// compiler, and X is [..., K] (Gemm: rank 2, transA = 0).

// AttrWeightBits is the Q8 attribute that declares 7-bit weights (|w| ≤
// WeightBits7Max); parse checks every weight against it, so the AVX2
// u8 × s7 tiles (vnni7.go), which would saturate on wider weights, run
// only where the plan says so and the weights agree.
const AttrWeightBits = "w_bits"

// Ops returns the reduced-precision layers; Add and activation parts run
// through base.
func Ops(base *kernel.Registry) kernel.Table {
	q := &q8Op{reg: base}
	h := &f16Op{reg: base}
	return kernel.Table{
		"Q8":  {Run: q.run, Infer: q.infer, Into: q.into, Prepare: q.prepare},
		"F16": {Run: h.run, Infer: h.infer, Into: h.into, Tactics: h.tactics, Prepare: h.prepare},
	}
}

type q8Op struct {
	reg *kernel.Registry
}

// layerKey keys a Q8 node's parsed layer in its kernel.State.
type layerKey struct{ n *ir.Node }

// layer is a Q8 node's parsed form and its derived weights.
type layer struct {
	base         string
	attrs        *ir.Node // the base op's attributes (for geometry)
	add, act     *ir.Node
	addOp, actOp *kernel.Op
	nact         int
	silu         bool // the activation is SiLU (sigFirst: the Sigmoid's output is the Mul's first operand)
	sigFirst     bool
	hsZ, hsV     actFn // HardSwish's epilogue (AVX-512, other levels); nil for other activations
	inv, xScale  float32
	xU8          bool           // input 0 is a chained producer's u8 form (chain.go)
	w7           bool           // the weights are 7-bit (AttrWeightBits 7, checked)
	yInv         float32        // 1/y_scale: output 0 is u8 (chain.go); 0 otherwise
	w            *tensor.Tensor // identity of the weights the packing came from
	wShape       []int
	packed       [][]int16 // Conv: packed A per group (see convPacked); linear: [0] is packed B
	pOnce        sync.Once
	groups       int
	mult, bias   []float32
	scratchMu    sync.Mutex
	scratches    []*scratch // free buffers, sized for this layer
	packedT      [][]int16  // Conv run transposed: packed B per group
	tOnce        sync.Once
	dpack        [][]int8 // Conv through the direct kernels: packed weights per group
	dOnce        sync.Once
	vpack        *vnniPack // linear layers through the u8 x s8 tiles (vnni.go)
	vOnce        sync.Once
	vconv        *vnniConv // pointwise convolutions through the cols tiles
	cOnce        sync.Once
	qpack        [][]int8  // Conv through the quad tiles: packed weights per group
	qinit        [][]int32 // and their corrections
	qOnce        sync.Once
	dwpack       *dwPack // Conv through the depthwise path (dw.go)
	dwOnce       sync.Once
	geomMu       sync.Mutex
	geom         *geom2
	geomX        []int // the last input shape, its geometry and output shape
	outShape     []int
}

// weightBits7 reads n's AttrWeightBits: absent or 8 is false, 7 is true
// once every weight in wd is checked to lie in [−63, 63]; any other value,
// or a weight out of range, is an error.
func weightBits7(n *ir.Node, wd []int8) (bool, error) {
	a := n.Attrs[AttrWeightBits]
	if a == nil {
		return false, nil
	}
	if a.Kind != ir.AttrInt || (a.I != 7 && a.I != 8) {
		return false, fmt.Errorf("q8: %s %v: want the int 7 or 8", AttrWeightBits, a)
	}
	if a.I == 8 {
		return false, nil
	}
	for i, v := range wd {
		if v < -WeightBits7Max || v > WeightBits7Max {
			return false, fmt.Errorf("q8: %s 7 but weight %d is %d, outside [%d, %d]", AttrWeightBits, i, v, -WeightBits7Max, WeightBits7Max)
		}
	}
	return true, nil
}

// constant reports whether the inputs idx of in are present and hold
// values (Op.Prepare's constants).
func constant(in []*tensor.Tensor, idx ...int) bool {
	for _, i := range idx {
		if i >= len(in) || in[i] == nil || in[i].Data == nil {
			return false
		}
	}
	return true
}

// prepare is Q8's Op.Prepare: the layer parsed and its weights packed at
// bind time, where they are constants (the compiler makes them so).
func (q *q8Op) prepare(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) error {
	if !constant(in, 1, 2) || (kernel.Input(in, 3) != nil && !constant(in, 3)) {
		return nil
	}
	_, err := q.layer(c, n, in)
	return err
}

// layer returns n's parsed layer and derived weights, kept in c's
// kernel.State (parsed again for other weights, and on every call where c
// keeps no State).
func (q *q8Op) layer(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) (*layer, error) {
	return kernel.Prepared(c, layerKey{n}, func(l *layer) bool { return len(in) > 1 && l.w == in[1] },
		func() (*layer, error) { return q.parse(n, in) })
}

func (q *q8Op) parse(n *ir.Node, in []*tensor.Tensor) (*layer, error) {
	h, _ := fused.LayerOf(n)
	if h.BaseInputs != 4 || h.Adds < 0 || h.Adds > 1 || h.ActInputs < 0 || h.BaseInputs+h.Adds+h.ActInputs != len(n.Inputs) {
		return nil, fmt.Errorf("q8: bad layout [%d %d %d] for %d inputs", h.BaseInputs, h.Adds, h.ActInputs, len(n.Inputs))
	}
	l := &layer{base: h.Base, nact: h.ActInputs}
	switch l.base {
	case "Conv", "Gemm", "MatMul":
	default:
		return nil, fmt.Errorf("q8: base %q is not Conv, Gemm or MatMul", l.base)
	}
	l.xScale = n.Float("x_scale", 0)
	if !(l.xScale > 0) || math.IsInf(float64(l.xScale), 0) {
		return nil, fmt.Errorf("q8: x_scale %v must be positive and finite", l.xScale)
	}
	l.inv = 1 / l.xScale
	l.xU8 = n.Int("x_u8", 0) == 1
	if a := n.Attrs["y_scale"]; a != nil {
		ys := a.F
		if !(ys > 0) || math.IsInf(float64(ys), 0) {
			return nil, fmt.Errorf("q8: y_scale %v must be positive and finite", ys)
		}
		l.yInv = 1 / ys
	}
	l.attrs, l.add, l.act = splitAttrs(n, h.Adds == 1)
	l.silu, l.sigFirst = h.Activation == fused.SiLU, h.SigmoidFirst
	if h.Activation == ActHardSwish {
		a, b := n.Float(fused.ActPrefix+"alpha", 0.2), n.Float(fused.ActPrefix+"beta", 0.5)
		hz := &hardSwish{a: a, b: b, first: h.SigmoidFirst, z: true}
		hv := &hardSwish{a: a, b: b, first: h.SigmoidFirst}
		l.hsZ, l.hsV = hz.apply, hv.apply
	}
	var err error
	if l.add != nil {
		if l.addOp, err = q.reg.Lookup(l.add); err != nil {
			return nil, err
		}
	}
	if l.act != nil {
		if l.actOp, err = q.reg.Lookup(l.act); err != nil {
			return nil, err
		}
	}
	if in == nil {
		return l, nil
	}
	if len(in) < 3 || in[1] == nil || in[2] == nil {
		return nil, fmt.Errorf("q8: weights and scales are required")
	}
	w, ws, b := in[1], in[2], kernel.Input(in, 3)
	wd, ok := w.Data.([]int8)
	if !ok {
		return nil, fmt.Errorf("q8: weights are %v, want int8", w.DType)
	}
	sd, ok := ws.Data.([]float32)
	if !ok || len(w.Shape) < 2 || len(sd) != w.Shape[0] {
		return nil, fmt.Errorf("q8: w_scale must be float32 [%d], got %v%v", w.Shape[0], ws.DType, ws.Shape)
	}
	if l.w7, err = weightBits7(n, wd); err != nil {
		return nil, err
	}
	M := w.Shape[0]
	l.w, l.wShape = w, append([]int{}, w.Shape...)
	l.mult = make([]float32, M)
	for i, s := range sd {
		l.mult[i] = float32(l.xScale * s)
	}
	if b != nil {
		bd, ok := b.Data.([]float32)
		if !ok || len(bd) != M {
			return nil, fmt.Errorf("q8: bias must be float32 [%d], got %v%v", M, b.DType, b.Shape)
		}
		l.bias = bd
	}
	K := w.Len() / max(M, 1)
	if K > MaxK {
		return nil, fmt.Errorf("q8: reduction length %d exceeds the int8 kernel's bound %d", K, MaxK)
	}
	if l.base == "Conv" {
		G := int(l.attrs.Int("group", 1))
		if G < 1 || M%G != 0 {
			return nil, fmt.Errorf("q8: Conv: group %d does not divide %d output channels", G, M)
		}
		// The GEMM panels are packed at first use (convPacked): a
		// convolution that runs through the direct kernels never needs
		// them.
		l.groups = G
		return l, nil
	}
	if len(w.Shape) != 2 {
		return nil, fmt.Errorf("q8: %s weights must be [N, K], got %v", l.base, w.Shape)
	}
	_, bl := packedLen(0, M, K)
	p := make([]int16, bl)
	packBT(p, wd, M, K, K)
	l.packed = [][]int16{p}
	return l, nil
}

// convPacked returns a Conv layer's weights packed as GEMM A panels, per
// group (packed at first use).
func (l *layer) convPacked() [][]int16 {
	l.pOnce.Do(func() {
		wd := l.w.Data.([]int8)
		M := l.wShape[0]
		K := l.w.Len() / max(M, 1)
		Mg := M / l.groups
		w16 := make([]int16, Mg*K)
		for gi := 0; gi < l.groups; gi++ {
			for i := range w16 {
				w16[i] = int16(wd[gi*Mg*K+i])
			}
			al, _ := packedLen(Mg, 0, K)
			p := make([]int16, al)
			packA(p, w16, Mg, K, K)
			l.packed = append(l.packed, p)
		}
	})
	return l.packed
}

// splitAttrs separates the base op's attributes and builds the Add and
// activation nodes.
func splitAttrs(n *ir.Node, hasAdd bool) (base, add, act *ir.Node) {
	h, _ := fused.LayerOf(n)
	base = &ir.Node{Name: n.Name + "/base", OpType: h.Base, Version: h.BaseVersion, Attrs: map[string]*ir.Attr{}}
	switch h.Activation {
	case "":
	case fused.SiLU:
		act = siluNode(n.Name, h.ActVersion, h.SigmoidFirst)
	case ActHardSwish:
		act = hardSwishNode(n.Name, h.ActVersion, n.Float(fused.ActPrefix+"alpha", 0.2), n.Float(fused.ActPrefix+"beta", 0.5), h.SigmoidFirst)
	default:
		act = &ir.Node{Name: n.Name + "/act", OpType: h.Activation, Version: h.ActVersion, Attrs: map[string]*ir.Attr{}, Outputs: []string{n.Name + "/act"}}
	}
	if hasAdd {
		add = &ir.Node{Name: n.Name + "/add", OpType: "Add", Version: 14, Attrs: map[string]*ir.Attr{}, Outputs: []string{n.Name + "/add"}}
	}
	for k, a := range n.Attrs {
		switch {
		case fused.IsHeaderAttr(k) || k == "x_scale" || k == AttrWeightBits || k == kernel.TacticAttr:
		case strings.HasPrefix(k, fused.ActPrefix):
			if act != nil && h.Activation != fused.SiLU && h.Activation != ActHardSwish {
				c := *a
				c.Name = strings.TrimPrefix(k, fused.ActPrefix)
				act.Attrs[c.Name] = &c
			}
		default:
			base.Attrs[k] = a
		}
	}
	base.Outputs = []string{n.Name + "/base"}
	return base, add, act
}

// siluNode is the SiLU activation part, x·Sigmoid(x), as the Fused
// layer runs it: one Elementwise layer of the Sigmoid and the Mul (opset
// 14), the Mul's operands in the model's order, run in place over the
// layer's float32 output after the dequantizing epilogue.
func siluNode(name string, sigVersion int64, sigFirst bool) *ir.Node {
	x, s, y := name+"/x", name+"/sigmoid", name+"/act"
	mulIn := []string{x, s}
	if sigFirst {
		mulIn = []string{s, x}
	}
	body := &ir.Graph{Name: name + "/silu", Inputs: []*ir.Value{{Name: x}}, Outputs: []*ir.Value{{Name: y}},
		Nodes: []*ir.Node{
			{Name: s, OpType: "Sigmoid", Version: sigVersion, Inputs: []string{x}, Outputs: []string{s}, Attrs: map[string]*ir.Attr{}},
			{Name: y, OpType: "Mul", Version: 14, Inputs: mulIn, Outputs: []string{y}, Attrs: map[string]*ir.Attr{}},
		},
		Initializers: map[string]*tensor.Tensor{}, Types: map[string]ir.Type{}}
	return &ir.Node{Name: name + "/act", OpType: "Elementwise", Domain: fused.Domain, Version: 1, Inputs: []string{x}, Outputs: []string{y},
		Attrs: map[string]*ir.Attr{"body": {Name: "body", Kind: ir.AttrGraph, G: body}}}
}

// baseShape is the base op's output shape for input shape x.
func (l *layer) baseShape(x []int) ([]int, *geom2, error) {
	l.geomMu.Lock()
	defer l.geomMu.Unlock()
	// The last input shape's result is kept: a warm call allocates nothing.
	if l.geomX != nil && equalInts(l.geomX, x) {
		return l.outShape, l.geom, nil
	}
	var out []int
	var g *geom2
	if l.base == "Conv" {
		var err error
		if g, err = convGeom(l.attrs, x, l.wShape); err != nil {
			return nil, nil, err
		}
		out = []int{g.N, g.M, g.OH, g.OW}
	} else {
		K, N := l.wShape[1], l.wShape[0]
		if len(x) < 1 || x[len(x)-1] != K || (l.base == "Gemm" && len(x) != 2) {
			return nil, nil, fmt.Errorf("q8: %s: X %v does not match weights [%d, %d]", l.base, x, N, K)
		}
		out = append(append([]int{}, x[:len(x)-1]...), N)
	}
	l.geom, l.geomX, l.outShape = g, append([]int{}, x...), out
	return out, g, nil
}

// fusedPost returns the Add and Relu or SiLU parts that the epilogue can
// apply (a residual of the output's shape, a Relu without inputs, SiLU at
// c's instruction set) and the index
// of the first input the remaining parts read; rest reports whether parts
// remain.
func (l *layer) fusedPost(c *kernel.Ctx, in []*tensor.Tensor, shape []int) (p post, next int, rest bool) {
	next = 4
	if l.add != nil {
		r := kernel.Input(in, 4)
		rd, ok := []float32(nil), false
		if r != nil {
			rd, ok = r.Data.([]float32)
		}
		if !ok || !equalInts(r.Shape, shape) {
			return post{}, 4, true
		}
		p.res = rd
		next = 5
	}
	if l.act != nil {
		if l.silu && len(in) == next {
			p.act = actor{fn: siluAct(c, l.sigFirst)}
			return p, next, false
		}
		if l.hsZ != nil && len(in) == next {
			p.act = actor{fn: l.hsV}
			if c.AVX512() && amd64.EnabledZ {
				p.act = actor{fn: l.hsZ}
			}
			return p, next, false
		}
		if l.act.OpType == "Clip" {
			// ReLU6 (MobileNetV2): the bounds in the epilogue.
			if a, ok := clipActor(l.act, in[next:]); ok {
				p.act = a
				return p, len(in), false
			}
		}
		if l.act.OpType != "Relu" || len(in) > next {
			return p, next, true
		}
		p.relu = true
	}
	return p, next, false
}

func (q *q8Op) run(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	l, err := q.layer(c, n, in)
	if err != nil {
		return nil, err
	}
	if in[0] == nil {
		return nil, fmt.Errorf("q8: X is missing")
	}
	shape, _, err := l.baseShape(in[0].Shape)
	if err != nil {
		return nil, err
	}
	if l.yInv > 0 {
		u := tensor.New(tensor.Uint8, slices.Clone(shape)...)
		return []*tensor.Tensor{u}, l.intoU8(c, n, in, u, shape)
	}
	return l.runF32(c, in, shape)
}

// runF32 runs the layer into a new float32 output.
func (l *layer) runF32(c *kernel.Ctx, in []*tensor.Tensor, shape []int) ([]*tensor.Tensor, error) {
	y := tensor.New(tensor.Float32, slices.Clone(shape)...)
	p, i, rest := l.fusedPost(c, in, shape)
	if err := l.compute(machineOf(c), in[0], y.Data.([]float32), p); err != nil {
		return nil, err
	}
	if !rest {
		return []*tensor.Tensor{y}, nil
	}
	if l.add != nil && i == 4 {
		outs, err := l.addOp.Run(c, l.add, []*tensor.Tensor{y, in[i]})
		if err != nil {
			return nil, fmt.Errorf("Add part: %w", err)
		}
		y = outs[0]
		i++
	}
	if l.act != nil {
		outs, err := l.actOp.Run(c, l.act, append([]*tensor.Tensor{y}, in[i:]...))
		if err != nil {
			return nil, fmt.Errorf("%s part: %w", l.act.OpType, err)
		}
		y = outs[0]
	}
	return []*tensor.Tensor{y}, nil
}

func (q *q8Op) into(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	l, err := q.layer(c, n, in)
	if err != nil {
		return err
	}
	if in[0] == nil || len(out) == 0 || out[0] == nil {
		return fmt.Errorf("q8: missing X or output slot")
	}
	shape, _, err := l.baseShape(in[0].Shape)
	if err != nil {
		return err
	}
	if l.yInv > 0 {
		return l.intoU8(c, n, in, out[0], shape)
	}
	p, next, rest := l.fusedPost(c, in, shape)
	fits := equalInts(shape, out[0].Shape) && out[0].DType == tensor.Float32 &&
		(!rest || ((l.add == nil || next > 4 || (l.addOp.Into != nil && l.addOp.InPlace)) &&
			(l.act == nil || (l.actOp.Into != nil && l.actOp.InPlace))))
	if !fits {
		res, err := q.run(c, n, in)
		if err != nil {
			return err
		}
		if r := res[0]; r.DType != out[0].DType || r.Len() != out[0].Len() {
			return fmt.Errorf("q8: result is %v%v, output slot is %v%v", r.DType, r.Shape, out[0].DType, out[0].Shape)
		}
		reflect.Copy(reflect.ValueOf(out[0].Data), reflect.ValueOf(res[0].Data))
		return nil
	}
	if err := l.compute(machineOf(c), in[0], out[0].Data.([]float32), p); err != nil {
		return err
	}
	if !rest {
		return nil
	}
	y := out[:1]
	part := func(op *kernel.Op, x *ir.Node, first, end int) error {
		saved := in[first-1]
		in[first-1] = y[0]
		err := op.Into(c, x, in[first-1:end], y)
		in[first-1] = saved
		if err != nil {
			return fmt.Errorf("%s part: %w", x.OpType, err)
		}
		return nil
	}
	if l.add != nil && next == 4 {
		if err := part(l.addOp, l.add, next, next+1); err != nil {
			return err
		}
		next++
	}
	if l.act != nil {
		return part(l.actOp, l.act, next, len(in))
	}
	return nil
}

func (q *q8Op) infer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	l, err := q.parse(n, nil)
	if err != nil {
		return nil, err
	}
	if len(in) < 2 || !in[1].Present || !in[1].Type.RankKnown {
		return nil, fmt.Errorf("q8: weights of unknown shape")
	}
	w := in[1].Type
	base := l.attrs
	x := in[0]
	if l.xU8 {
		// The u8 form of the float32 activation the base op reads.
		if x.Present && x.Type.DType != tensor.Undefined && x.Type.DType != tensor.Uint8 {
			return nil, fmt.Errorf("q8: x_u8 layer reads %v, want uint8", x.Type.DType)
		}
		x.Type.DType = tensor.Float32
	}
	args := []ir.InferInput{x, {Present: true, Type: ir.Type{DType: tensor.Float32, Shape: w.Shape, RankKnown: true}}}
	switch l.base {
	case "Conv":
		if len(in) > 3 && in[3].Present {
			args = append(args, ir.InferInput{Present: true, Type: in[3].Type})
		}
	case "Gemm":
		b := *base
		b.Attrs = map[string]*ir.Attr{"transB": {Name: "transB", Kind: ir.AttrInt, I: 1}}
		base = &b
	case "MatMul":
		if len(w.Shape) != 2 {
			return nil, fmt.Errorf("q8: MatMul weights must be [N, K]")
		}
		args[1].Type.Shape = []ir.Dim{w.Shape[1], w.Shape[0]}
	}
	t, err := q.reg.InferNode(base, args)
	if err != nil {
		return nil, err
	}
	i := 4
	if l.add != nil {
		if t, err = q.reg.InferNode(l.add, []ir.InferInput{{Present: true, Type: t[0]}, in[i]}); err != nil {
			return nil, err
		}
		i++
	}
	if l.act != nil {
		if t, err = q.reg.InferNode(l.act, append([]ir.InferInput{{Present: true, Type: t[0]}}, in[i:]...)); err != nil {
			return nil, err
		}
	}
	if l.yInv > 0 {
		t[0].DType = tensor.Uint8
	}
	return t[:1], nil
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
