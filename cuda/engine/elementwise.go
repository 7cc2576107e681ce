package engine

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/image"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/tensor"
)

// The elementwise family: binary Sub and Mul (and, inside an Elementwise
// layer, Add and Div), Cast to float32, the unary operators and
// activations (vx_unary's vmath functions and vx_act's expressions),
// kernel/fused's Elementwise layers (their body node by node), ChannelMul,
// Fused Conv/Gemm/MatMul layers whose activation the base kernels' epilogue
// does not have (the base, then the activation as its own pass: the fused
// layer's parts in order), kernel/nn's ScaleShift, and linear and cubic
// Resize. Each runs its CPU twin's float32 operations in the same order.

func init() { families = append(families, family{place: placeElementwise, run: runElementwise}) }

// act is one unary operator or activation as the GPU runs it: a vx_unary
// operation or a vx_act one with its parameters.
type act struct {
	unary  bool
	u      exact.Unary
	a      exact.ActOp
	p0, p1 float32
}

func (a act) kernel() string {
	if a.unary {
		return kernels.Unary + "(" + a.u.String() + ")"
	}
	return kernels.Act + "(" + a.a.String() + ")"
}

func (a act) run(s *state, x, y uint64, n int64) error {
	if a.unary {
		return s.pr.e.Unary(s.l.st, a.u, x, y, n)
	}
	return s.pr.e.Activation(s.l.st, a.a, x, y, n, a.p0, a.p1)
}

// actOf maps an operator (or a fused layer's activation, its attributes
// named with prefix) to the GPU's form; why says why there is none.
func actOf(op string, n *ir.Node, prefix string, sigFirst bool) (act, string) {
	f := func(name string, def float32) float32 { return n.Float(prefix+name, def) }
	switch op {
	case "Relu":
		return act{unary: true, u: exact.Relu}, ""
	case "Exp":
		return act{unary: true, u: exact.Exp}, ""
	case "Log":
		return act{unary: true, u: exact.Log}, ""
	case "Tanh":
		return act{unary: true, u: exact.Tanh}, ""
	case "Sigmoid":
		return act{unary: true, u: exact.Sigmoid}, ""
	case "Erf":
		return act{unary: true, u: exact.Erf}, ""
	case "Gelu":
		switch ap := n.String(prefix+"approximate", "none"); ap {
		case "none":
			return act{unary: true, u: exact.GeluErf}, ""
		case "tanh":
			return act{unary: true, u: exact.GeluTanh}, ""
		default:
			return act{}, fmt.Sprintf("Gelu approximate %q", ap)
		}
	case "LeakyRelu":
		return act{a: exact.EwLeakyRelu, p0: f("alpha", 0.01)}, ""
	case "HardSigmoid":
		return act{a: exact.EwHardSigmoid, p0: f("alpha", 0.2), p1: f("beta", 0.5)}, ""
	case "HardSwish":
		return act{a: exact.EwHardSwish}, ""
	case fused.SiLU:
		if sigFirst {
			return act{a: exact.EwSiLUSigmoidFirst}, ""
		}
		return act{a: exact.EwSiLU}, ""
	case fused.HardSigmoidMul:
		a := act{a: exact.EwHardSigmoidMul, p0: f("alpha", 0.2), p1: f("beta", 0.5)}
		if sigFirst {
			a.a = exact.EwHardSigmoidMulSF
		}
		return a, ""
	case "Neg":
		return act{a: exact.EwNeg}, ""
	case "Abs":
		return act{a: exact.EwAbs}, ""
	case "Sqrt":
		return act{a: exact.EwSqrt}, ""
	case "Reciprocal":
		return act{a: exact.EwReciprocal}, ""
	case "Elu":
		return act{a: exact.EwElu, p0: f("alpha", 1)}, ""
	case "Celu":
		a := f("alpha", 1)
		if a == 0 {
			return act{}, "Celu with alpha 0"
		}
		return act{a: exact.EwCelu, p0: a}, ""
	case "Selu":
		return act{a: exact.EwSelu, p0: f("alpha", 1.67326319217681884765625), p1: f("gamma", 1.05070102214813232421875)}, ""
	case "ThresholdedRelu":
		return act{a: exact.EwThresholdedRelu, p0: f("alpha", 1)}, ""
	case "Softplus":
		return act{a: exact.EwSoftplus}, ""
	case "Softsign":
		return act{a: exact.EwSoftsign}, ""
	case "Mish":
		return act{a: exact.EwMish}, ""
	case "Sign":
		return act{a: exact.EwSign}, ""
	case "Floor":
		return act{a: exact.EwFloor}, ""
	case "Ceil":
		return act{a: exact.EwCeil}, ""
	case "Round":
		return act{a: exact.EwRound}, ""
	}
	return act{}, fmt.Sprintf("no exact GPU kernel for %s yet", op)
}

// unaryOps are the ONNX unary operators this family places (Relu and Clip
// are place.go's).
var unaryOps = map[string]bool{"Exp": true, "Log": true, "Tanh": true, "Sigmoid": true, "Erf": true, "Gelu": true,
	"LeakyRelu": true, "HardSigmoid": true, "HardSwish": true, "Neg": true, "Abs": true, "Sqrt": true, "Reciprocal": true,
	"Elu": true, "Celu": true, "Selu": true, "ThresholdedRelu": true, "Softplus": true, "Softsign": true, "Mish": true,
	"Sign": true, "Floor": true, "Ceil": true, "Round": true}

// isFloat reports whether v is known to be float32.
func isFloat(types map[string]ir.Type, v string) bool {
	t, ok := types[v]
	return ok && t.DType == tensor.Float32
}

// castSource is a Cast's input type as the GPU converts it.
func castSource(dt tensor.DType) (exact.CastFrom, bool) {
	switch dt {
	case tensor.Float32:
		return exact.FromFloat32, true
	case tensor.Int64:
		return exact.FromInt64, true
	case tensor.Int32:
		return exact.FromInt32, true
	case tensor.Bool:
		return exact.FromBool, true
	}
	return 0, false
}

// castToFloat reports whether a Cast's target is float32 (the "to"
// attribute, a type name before opset 6).
func castToFloat(n *ir.Node) bool {
	a := n.Attrs["to"]
	if a == nil {
		return false
	}
	if a.Kind == ir.AttrString {
		return a.S == "FLOAT"
	}
	return tensor.DType(a.I) == tensor.Float32
}

// legacyBroadcast reports an arithmetic node of opset < 7 with its
// broadcast attribute (its own axis rule).
func legacyBroadcast(n *ir.Node) bool {
	return n.Version > 0 && n.Version < 7 && n.Int("broadcast", 0) != 0
}

// placeElementwise is the family's placement (family.place).
func placeElementwise(n *ir.Node, g *ir.Graph, types map[string]ir.Type) (string, string, bool) {
	if n.Domain == fused.Domain {
		switch n.OpType {
		case fused.OpElementwise:
			k, why := ewLayerKernel(n, g, types)
			return k, why, true
		case fused.ChannelMul:
			if len(n.Inputs) != 2 || !floatRank(types, n.Input(0)) || !floatRank(types, n.Input(1)) {
				return "", "ChannelMul of other than float32 operands of known rank (at most 6)", true
			}
			return kernels.ArithBcast + "(Mul)", "", true
		case nn.OpScaleShift:
			if len(n.Inputs) != 3 || !isFloat(types, n.Input(0)) {
				return "", "ScaleShift of other than float32", true
			}
			for _, c := range n.Inputs[1:] {
				if t := g.Initializers[c]; t == nil || t.DType != tensor.Float32 {
					return "", fmt.Sprintf("ScaleShift whose %s is not a float32 constant", c), true
				}
			}
			if n.Int("relu", 0) != 0 {
				return kernels.ScaleShift + "(Relu)", "", true
			}
			return kernels.ScaleShift, "", true
		case fused.OpFused:
			h, _ := fused.LayerOf(n)
			if !ownFusedAct(h) {
				return "", "", false
			}
			a, why := actOf(h.Activation, n, fused.ActPrefix, h.SigmoidFirst)
			if why != "" {
				return "", fmt.Sprintf("fused activation %s: %s", h.Activation, why), true
			}
			if h.ActInputs != 0 {
				return "", fmt.Sprintf("fused %s with activation inputs", h.Activation), true
			}
			k, why := kernelFor(stripAct(n), g, types, false)
			if why != "" {
				return "", why, true
			}
			return k + "+" + a.kernel(), "", true
		}
		return "", "", false
	}
	if n.Domain != "" {
		return "", "", false
	}
	switch n.OpType {
	case "Sub", "Mul":
		if intsOnly(n, types) {
			return "", "", false
		}
		if len(n.Inputs) != 2 || legacyBroadcast(n) {
			return "", fmt.Sprintf("%s without two operands, or with opset %d's broadcast attribute", n.OpType, n.Version), true
		}
		if !floatRank(types, n.Input(0)) || !floatRank(types, n.Input(1)) {
			return "", n.OpType + " of other than float32 operands of known rank (at most 6)", true
		}
		if sameStatic(types, n.Input(0), n.Input(1)) {
			return kernels.Arith + "(" + n.OpType + ")", "", true
		}
		return kernels.ArithBcast + "(" + n.OpType + ")", "", true
	case "Cast":
		t, ok := types[n.Input(0)]
		if !ok || !castToFloat(n) {
			return "", "", false
		}
		if _, ok := castSource(t.DType); !ok {
			return "", fmt.Sprintf("Cast from %v (the GPU casts float32, int64, int32 and bool to float32)", t.DType), true
		}
		return kernels.Cast + "(" + t.DType.String() + ")", "", true
	case "Resize", "Upsample":
		mode := n.String("mode", "nearest")
		if mode == "nearest" {
			return "", "", false
		}
		k, why := resizeKernel(n, g, types)
		return k, why, true
	}
	if unaryOps[n.OpType] {
		if len(n.Inputs) < 1 || !isFloat(types, n.Input(0)) {
			if intsOnly(n, types) {
				return "", "", false
			}
			return "", n.OpType + " of other than float32", true
		}
		a, why := actOf(n.OpType, n, "", false)
		if why != "" {
			return "", why, true
		}
		return a.kernel(), "", true
	}
	return "", "", false
}

// ownFusedAct reports whether a Fused layer's activation is this
// family's: place.go runs none, Relu and Clip in the base kernels'
// epilogue, and Gelu after a MatMul.
func ownFusedAct(h fused.Layer) bool {
	switch h.Activation {
	case "", "Relu", "Clip":
		return false
	case "Gelu":
		return h.Base != "MatMul"
	}
	return true
}

// stripAct is a Fused node without its activation (the base and its Adds,
// place.go's layer). It is made on every call: an ExpandDepthwise layer's
// parts are new nodes on every run, so a cache by node would only grow.
func stripAct(n *ir.Node) *ir.Node {
	c := *n
	c.Attrs = make(map[string]*ir.Attr, len(n.Attrs))
	for k, a := range n.Attrs {
		if k == fused.AttrActivation || k == fused.AttrActVersion || strings.HasPrefix(k, fused.ActPrefix) {
			continue
		}
		c.Attrs[k] = a
	}
	return &c
}

// ewLayerKernel admits an Elementwise layer whose body nodes all have a
// GPU form: the body runs node by node (each block of the CPU's pass
// computes the same elements the same way, so the bits are the unfused
// nodes'). Its inputs must be float32 (the layer's contract).
func ewLayerKernel(n *ir.Node, g *ir.Graph, types map[string]ir.Type) (string, string) {
	body := n.Attrs["body"]
	if body == nil || body.G == nil {
		return "", "Elementwise without a body"
	}
	if len(body.G.Inputs) != len(n.Inputs) || len(body.G.Outputs) != 1 {
		return "", "Elementwise body of other inputs or outputs than the layer's"
	}
	for _, in := range n.Inputs {
		if !floatRank(types, in) {
			return "", "Elementwise of other than float32 inputs of known rank (at most 6)"
		}
	}
	var ks []string
	for _, b := range body.G.Nodes {
		k, why := ewNodeKernel(b, g)
		if why != "" {
			return "", fmt.Sprintf("body layer %s: %s", b.Name, why)
		}
		ks = append(ks, k)
	}
	return "body(" + strings.Join(ks, ",") + ")", ""
}

// ewNodeKernel is an Elementwise body node's GPU form (every value
// float32, operands of the output's shape or one element).
func ewNodeKernel(b *ir.Node, outer *ir.Graph) (string, string) {
	if b.Domain != "" {
		return "", fmt.Sprintf("domain %q", b.Domain)
	}
	switch b.OpType {
	case "Add", "Sub", "Mul", "Div":
		if len(b.Inputs) != 2 || legacyBroadcast(b) {
			return "", b.OpType + " without two operands or with a legacy broadcast"
		}
		return kernels.ArithBcast + "(" + b.OpType + ")", ""
	case "Clip":
		if why := clipOK(b, b.Version, 1, outer); why != "" {
			return "", why
		}
		return kernels.Clip, ""
	}
	if b.OpType != "Relu" && !unaryOps[b.OpType] {
		return "", fmt.Sprintf("no exact GPU kernel for %s yet", b.OpType)
	}
	a, why := actOf(b.OpType, b, "", false)
	if why != "" {
		return "", why
	}
	return a.kernel(), ""
}

// resizeKernel admits a float32 linear or cubic Resize of rank 4 with
// constant roi, scales and sizes, not tf_crop_and_resize (its
// extrapolated values).
func resizeKernel(n *ir.Node, g *ir.Graph, types map[string]ir.Type) (string, string) {
	mode := n.String("mode", "nearest")
	if mode == "bilinear" {
		mode = "linear"
	}
	if mode != "linear" && mode != "cubic" {
		return "", fmt.Sprintf("%s mode %s", n.OpType, mode)
	}
	if n.String("coordinate_transformation_mode", "") == "tf_crop_and_resize" {
		return "", n.OpType + " tf_crop_and_resize (extrapolated values)"
	}
	t, ok := types[n.Input(0)]
	if !ok || t.DType != tensor.Float32 || !t.RankKnown || len(t.Shape) != exact.ResizeRank {
		return "", fmt.Sprintf("%s of other than a rank-4 float32 value", n.OpType)
	}
	for _, c := range n.Inputs[1:] {
		if c != "" && g.Initializers[c] == nil {
			return "", fmt.Sprintf("%s whose input %s is not a constant", n.OpType, c)
		}
	}
	return kernels.Resize + "(" + mode + ")", ""
}

// runElementwise is the family's runner (family.run): ok is false for a
// node the family does not place.
func runElementwise(s *state, n *ir.Node) (bool, error) {
	if n.Domain == fused.Domain {
		switch n.OpType {
		case fused.OpElementwise:
			return true, s.ewLayer(n)
		case fused.ChannelMul:
			return true, s.channelMul(n)
		case nn.OpScaleShift:
			return true, s.scaleShift(n)
		case fused.OpFused:
			h, _ := fused.LayerOf(n)
			if !ownFusedAct(h) {
				return false, nil
			}
			return true, s.fusedAct(n, h)
		}
		return false, nil
	}
	if n.Domain != "" {
		return false, nil
	}
	switch n.OpType {
	case "Sub", "Mul":
		return true, s.arith(n, n.OpType)
	case "Cast":
		return true, s.cast(n)
	case "Resize", "Upsample":
		if n.String("mode", "nearest") == "nearest" {
			return false, nil
		}
		return true, s.resizeLinear(n)
	}
	if unaryOps[n.OpType] {
		return true, s.unaryOp(n, n.OpType, "")
	}
	return false, nil
}

// arith runs a float32 Add, Sub, Mul or Div (ONNX broadcasting): one
// rounded operation per output, the first operand first.
func (s *state) arith(n *ir.Node, op string) error {
	code, ok := exact.ArithOf(op)
	if !ok || len(n.Inputs) != 2 {
		return fmt.Errorf("%s is not a binary arithmetic operation", op)
	}
	a, sa, err := s.dev(n.Inputs[0])
	if err != nil {
		return err
	}
	b, sb, err := s.dev(n.Inputs[1])
	if err != nil {
		return err
	}
	if tensor.ShapeString(sa) == tensor.ShapeString(sb) {
		y, err := s.out(n.Outputs[0], sa)
		if err != nil {
			return err
		}
		return s.pr.e.Arith(s.l.st, code, a, b, y, int64(tensor.NumElems(sa)))
	}
	c, err := exact.Broadcast(sa, sb)
	if err != nil {
		return err
	}
	y, err := s.out(n.Outputs[0], c.Dims)
	if err != nil {
		return err
	}
	return s.pr.e.ArithBroadcast(s.l.st, code, c, a, tensor.NumElems(sa), b, tensor.NumElems(sb), y)
}

// unaryOp runs a unary operator (its attributes named with prefix) on the
// node's first input.
func (s *state) unaryOp(n *ir.Node, op, prefix string) error {
	a, why := actOf(op, n, prefix, false)
	if why != "" {
		return fmt.Errorf("%s", why)
	}
	x, shape, err := s.dev(n.Inputs[0])
	if err != nil {
		return err
	}
	y, err := s.out(n.Outputs[0], shape)
	if err != nil {
		return err
	}
	return a.run(s, x, y, int64(tensor.NumElems(shape)))
}

// fusedAct runs a Fused layer as its parts: the base and its Adds (the
// layer without its activation, as place.go runs it), then the
// activation in place over the output.
func (s *state) fusedAct(n *ir.Node, h fused.Layer) error {
	a, why := actOf(h.Activation, n, fused.ActPrefix, h.SigmoidFirst)
	if why != "" {
		return fmt.Errorf("fused %s", why)
	}
	if err := s.gpu(stripAct(n)); err != nil {
		return err
	}
	v := s.vals[n.Outputs[0]]
	if v == nil || v.ptr == 0 {
		return fmt.Errorf("the fused base left no output on the device")
	}
	return a.run(s, v.ptr, v.ptr, int64(tensor.NumElems(v.shape)))
}

// channelMul runs kernel/fused's ChannelMul: the Mul of x by s, its
// operands in the model's order (scale_first), broadcast.
func (s *state) channelMul(n *ir.Node) error {
	if len(n.Inputs) != 2 {
		return fmt.Errorf("ChannelMul of %d inputs", len(n.Inputs))
	}
	ins := n.Inputs
	if n.Int(fused.AttrScaleFirst, 0) == 1 {
		ins = []string{n.Inputs[1], n.Inputs[0]}
	}
	m := &ir.Node{OpType: "Mul", Inputs: ins, Outputs: n.Outputs}
	return s.arith(m, "Mul")
}

// scaleShift runs kernel/nn's ScaleShift layer.
func (s *state) scaleShift(n *ir.Node) error {
	if len(n.Inputs) != 3 {
		return fmt.Errorf("ScaleShift of %d inputs", len(n.Inputs))
	}
	x, shape, err := s.dev(n.Inputs[0])
	if err != nil {
		return err
	}
	a, as, err := s.dev(n.Inputs[1])
	if err != nil {
		return err
	}
	b, bs, err := s.dev(n.Inputs[2])
	if err != nil {
		return err
	}
	if len(shape) < 2 || tensor.NumElems(as) != shape[1] || tensor.NumElems(bs) != shape[1] {
		return fmt.Errorf("ScaleShift of %v with A %v and B %v", shape, as, bs)
	}
	y, err := s.out(n.Outputs[0], shape)
	if err != nil {
		return err
	}
	S := tensor.NumElems(shape[2:])
	return s.pr.e.ScaleShift(s.l.st, x, a, b, y, int64(shape[0]*shape[1]), S, shape[1], n.Int("relu", 0) != 0)
}

// cast runs Cast to float32: a float32 value on the device is converted
// there; an integer or bool value (read on the host: a graph input, a CPU
// layer's output, a constant) is uploaded as it is, its bytes, and
// converted by the kernel.
func (s *state) cast(n *ir.Node) error {
	if !castToFloat(n) {
		return fmt.Errorf("Cast to other than float32 on the GPU")
	}
	name := n.Inputs[0]
	if v := s.vals[name]; v != nil && v.ptr != 0 {
		y, err := s.out(n.Outputs[0], v.shape)
		if err != nil {
			return err
		}
		return s.pr.e.Cast(s.l.st, exact.FromFloat32, v.ptr, y, int64(tensor.NumElems(v.shape)))
	}
	t, err := s.host(name)
	if err != nil {
		return err
	}
	from, ok := castSource(t.DType)
	if !ok {
		return fmt.Errorf("Cast from %v on the GPU", t.DType)
	}
	if from == exact.FromFloat32 {
		ptr, shape, err := s.dev(name)
		if err != nil {
			return err
		}
		y, err := s.out(n.Outputs[0], shape)
		if err != nil {
			return err
		}
		return s.pr.e.Cast(s.l.st, from, ptr, y, int64(tensor.NumElems(shape)))
	}
	raw, err := CastWords(t)
	if err != nil {
		return err
	}
	var src uint64
	if _, constant := s.g.Initializers[name]; constant {
		// Once, as a weight: a captured graph may read it.
		if src, err = s.rawWeight(name, raw); err != nil {
			return err
		}
	} else {
		// A host value: the program runs no graph (its producer is a CPU
		// layer or a non-float graph input).
		b, err := s.alloc(len(raw))
		if err != nil {
			return err
		}
		if err := s.l.toDevice(b.Ptr, raw); err != nil {
			return err
		}
		src = b.Ptr
	}
	y, err := s.out(n.Outputs[0], t.Shape)
	if err != nil {
		return err
	}
	return s.pr.e.Cast(s.l.st, from, src, y, int64(t.Len()))
}

// CastWords is a tensor's element bytes as float32 words (the last one
// zero-padded), for an upload that moves them as they are.
func CastWords(t *tensor.Tensor) ([]float32, error) {
	var b []byte
	switch d := t.Data.(type) {
	case []int64:
		if len(d) > 0 {
			b = unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 8*len(d))
		}
	case []int32:
		if len(d) > 0 {
			b = unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 4*len(d))
		}
	case []bool:
		b = make([]byte, len(d))
		for i, v := range d {
			if v {
				b[i] = 1
			}
		}
	default:
		return nil, fmt.Errorf("Cast of %v: no byte upload", t.DType)
	}
	w := make([]float32, (len(b)+3)/4)
	if len(w) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w)), b)
	}
	return w, nil
}

// rawWeight puts a constant's bytes (as float32 words) on the device
// once, beside the program's weights.
func (s *state) rawWeight(name string, raw []float32) (uint64, error) {
	key := wkey{s.g, "raw/" + name}
	if b := s.pr.weights[key]; b != nil {
		return b.Ptr, nil
	}
	b, err := s.pr.c.Alloc(uint64(max(len(raw), 1)) * 4)
	if err != nil {
		return 0, err
	}
	if len(raw) > 0 {
		if err := s.pr.c.Upload(b, raw); err != nil {
			b.Free()
			return 0, err
		}
	}
	s.pr.weights[key] = b
	return b.Ptr, nil
}

// ewLayer runs an Elementwise layer's body node by node on the GPU, its
// inputs the layer's.
func (s *state) ewLayer(n *ir.Node) error {
	body := n.Attrs["body"].G
	if len(body.Inputs) != len(n.Inputs) || len(body.Outputs) != 1 {
		return fmt.Errorf("Elementwise body of %d inputs, %d outputs for %d inputs", len(body.Inputs), len(body.Outputs), len(n.Inputs))
	}
	vals := map[string]*val{}
	for i, in := range n.Inputs {
		ptr, shape, err := s.dev(in)
		if err != nil {
			return err
		}
		vals[body.Inputs[i].Name] = &val{ptr: ptr, shape: shape}
	}
	sub := &state{pr: s.pr, l: s.l, ctx: s.ctx, g: body, vals: vals, b: s.b, next: s.next}
	for _, b := range body.Nodes {
		if err := sub.ewNode(b, s.g); err != nil {
			return fmt.Errorf("body layer %s: %w", b.Name, err)
		}
	}
	s.next = sub.next
	v := sub.vals[body.Outputs[0].Name]
	if v == nil {
		return fmt.Errorf("the body did not produce %s", body.Outputs[0].Name)
	}
	s.vals[n.Outputs[0]] = &val{ptr: v.ptr, shape: v.shape}
	return nil
}

// ewNode runs one Elementwise body node (outer: the graph whose
// constants a Clip's bounds are).
func (s *state) ewNode(b *ir.Node, outer *ir.Graph) error {
	switch b.OpType {
	case "Add", "Sub", "Mul", "Div":
		return s.arith(b, b.OpType)
	case "Clip":
		x, shape, err := s.dev(b.Inputs[0])
		if err != nil {
			return err
		}
		y, err := s.out(b.Outputs[0], shape)
		if err != nil {
			return err
		}
		o := &state{g: outer}
		lo, hi, hasLo, hasHi, err := o.clipBounds(b, b.Version, 1, "")
		if err != nil {
			return err
		}
		return s.pr.e.Clip(s.l.st, x, y, int64(tensor.NumElems(shape)), lo, hi, hasLo, hasHi)
	}
	return s.unaryOp(b, b.OpType, "")
}

// resizeLinear runs a linear or cubic Resize: its stencils (computed on
// the host by kernel/image's own code once per input shape and lane, kept
// in that shape's buffers) and vx_resize.
func (s *state) resizeLinear(n *ir.Node) error {
	x, sh, err := s.dev(n.Inputs[0])
	if err != nil {
		return err
	}
	key, cached := s.b.maps[n]
	var geom exact.ResizeGeom
	var tab []int32
	if cached {
		// The table is in this shape's buffers already.
		if geom, err = geomOf(key); err != nil {
			return err
		}
	} else {
		if geom, tab, err = ResizeStencilTable(n, sh, s.host); err != nil {
			return err
		}
		if s.b.maps == nil {
			s.b.maps = map[*ir.Node][]int{}
		}
		s.b.maps[n] = geomInts(geom)
	}
	tb, err := s.alloc(geom.TableLen)
	if err != nil {
		return err
	}
	if !cached {
		bits := int32Words(tab)
		if err := s.l.toDevice(tb.Ptr, bits); err != nil {
			return err
		}
	}
	y, err := s.out(n.Outputs[0], geom.Out[:])
	if err != nil {
		return err
	}
	return s.pr.e.Resize(s.l.st, geom, tb.Ptr, x, y)
}

// ResizeStencilTable is a linear or cubic Resize's stencil table for an
// input of shape sh: kernel/image's stencils for it (ResizeStencils, the
// CPU kernel's own code), packed by exact.ResizeTable; host reads the
// node's constant inputs (roi, scales, sizes).
func ResizeStencilTable(n *ir.Node, sh []int, host func(string) (*tensor.Tensor, error)) (exact.ResizeGeom, []int32, error) {
	in := make([]*tensor.Tensor, len(n.Inputs))
	for i, name := range n.Inputs {
		if i == 0 || name == "" {
			continue
		}
		t, err := host(name)
		if err != nil {
			return exact.ResizeGeom{}, nil, err
		}
		in[i] = t
	}
	out, st, sep, err := image.ResizeStencils(n, sh, in)
	if err != nil {
		return exact.ResizeGeom{}, nil, err
	}
	if len(sh) != exact.ResizeRank || len(out) != exact.ResizeRank {
		return exact.ResizeGeom{}, nil, fmt.Errorf("Resize of %v to %v (the GPU interpolates rank-4 values)", sh, out)
	}
	if tensor.NumElems(out) == 0 {
		// An empty output: nothing to interpolate, no table.
		var g exact.ResizeGeom
		copy(g.In[:], sh)
		copy(g.Out[:], out)
		return g, nil, nil
	}
	if len(st) != exact.ResizeRank {
		return exact.ResizeGeom{}, nil, fmt.Errorf("Resize of %v: %d stencils", sh, len(st))
	}
	taps := make([]exact.Taps, len(st))
	for d, t := range st {
		for _, o := range t.Outside {
			if o {
				return exact.ResizeGeom{}, nil, fmt.Errorf("Resize output outside its input (extrapolation)")
			}
		}
		taps[d] = exact.Taps{Off: t.Off, Idx: t.Idx, W: t.W}
	}
	return exact.ResizeTable(sh, out, taps, sep)
}

// geomInts and geomOf keep a Resize's geometry in a shape's buffers
// (bound.maps).
func geomInts(g exact.ResizeGeom) []int {
	v := make([]int, 0, 5*exact.ResizeRank+2)
	for _, a := range [][exact.ResizeRank]int{g.In, g.Out, g.Off, g.Idx, g.W} {
		v = append(v, a[:]...)
	}
	c := 0
	if g.Canon {
		c = 1
	}
	return append(v, c, g.TableLen)
}

func geomOf(v []int) (exact.ResizeGeom, error) {
	var g exact.ResizeGeom
	if len(v) != 5*exact.ResizeRank+2 {
		return g, fmt.Errorf("a Resize geometry of %d values", len(v))
	}
	for i, a := range []*[exact.ResizeRank]int{&g.In, &g.Out, &g.Off, &g.Idx, &g.W} {
		copy(a[:], v[i*exact.ResizeRank:])
	}
	g.Canon, g.TableLen = v[5*exact.ResizeRank] == 1, v[5*exact.ResizeRank+1]
	return g, nil
}
