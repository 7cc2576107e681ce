package compile

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// The import-qdq pass reads a pre-quantized ONNX model: QuantizeLinear →
// DequantizeLinear pairs on activations and DequantizeLinear on constant
// int8 weights, around Conv, Gemm and MatMul. It must run before constant
// folding, which would turn the weights' DequantizeLinear into plain
// float32.
//
//   - A weight DequantizeLinear(W int8 constant, scale, zero point absent
//     or 0) read only as input 1 of Conv/Gemm/MatMul is replaced by its
//     exact float32 value (so that every later pass and the fp32 reference
//     see the model's arithmetic), and the int8 values and scales are kept
//     for the precision pass, which makes the layer a Q8 layer with them
//     instead of quantizing the weights itself. The scale is per tensor or
//     per output channel (Conv and Gemm transB=1: axis 0; MatMul and Gemm
//     transB=0: axis 1).
//   - An activation pair QuantizeLinear(x, s, 0 int8) → DequantizeLinear
//     (same s, 0) read by such a layer gives the layer's input scale s; the
//     layer reads x directly (the Q8 layer quantizes x itself, with s).
//     Other readers of the pair keep it.
//
// Differences from the ONNX fake quantization, which the log states once:
// the Q8 layer multiplies by 1/s where QuantizeLinear divides by s (the
// two can differ in the last bit before rounding), and clamps to
// [−127, 127] where QuantizeLinear allows −128.
//
// What is refused, with the reason in the log, keeps the ONNX nodes (they
// run in float32): uint8 or nonzero zero points (asymmetric quantization
// has no int8 kernel), block quantization, scales that are not positive
// finite float32 constants, scales that differ between the Q and DQ of a
// pair, weights whose scale axis is not the output channel.

// qdqInfo is what import-qdq hands to the precision pass.
type qdqInfo struct {
	weights map[string]*qdqWeight // by the float32 weight initializer's name
	act     map[string]float32    // activation tensor -> scale
}

// qdqWeight is a weight initializer's int8 form from the model.
type qdqWeight struct {
	q      []int8
	shape  []int
	scales []float32 // per output channel (length 1: per tensor)
	axis   int       // the axis the scales run along, when per channel
}

// constOf returns the constant value of name: an initializer or the value
// of a Constant node.
func constOf(g *ir.Graph, producer map[string]*ir.Node, name string) *tensor.Tensor {
	if t, ok := g.Initializers[name]; ok {
		return t
	}
	if p := producer[name]; p != nil && p.OpType == "Constant" && p.Domain == "" {
		if a, ok := p.Attrs["value"]; ok && a.T != nil {
			return a.T
		}
	}
	return nil
}

// qdqParams checks a Q or DQ node's scale and zero point: a positive
// finite float32 scale (scalar when perTensor) and an absent or zero int8
// zero point. It returns the scales, or why the node is refused.
func qdqParams(g *ir.Graph, producer map[string]*ir.Node, n *ir.Node, quantize bool) ([]float32, string) {
	if n.Int("block_size", 0) != 0 {
		return nil, "block quantization is not supported"
	}
	st := constOf(g, producer, n.Input(1))
	if st == nil || st.DType != tensor.Float32 {
		return nil, "scale is not a float32 constant"
	}
	sc := st.Data.([]float32)
	for _, v := range sc {
		if !(v > 0) || v > 3.4e38 {
			return nil, fmt.Sprintf("scale %v is not positive and finite", v)
		}
	}
	zp := n.Input(2)
	if zp == "" {
		if quantize {
			return nil, "no zero point: QuantizeLinear then produces uint8 (asymmetric), which has no int8 kernel"
		}
		return sc, "" // DequantizeLinear of int8 input without zero point
	}
	zt := constOf(g, producer, zp)
	if zt == nil {
		return nil, "zero point is not a constant"
	}
	if zt.DType != tensor.Int8 {
		return nil, fmt.Sprintf("zero point is %v: only symmetric int8 quantization maps onto the int8 kernels", zt.DType)
	}
	for _, v := range zt.Data.([]int8) {
		if v != 0 {
			return nil, fmt.Sprintf("zero point %d: asymmetric quantization has no int8 kernel", v)
		}
	}
	return sc, ""
}

// outputAxis is the weight axis of a layer's output channels.
func outputAxis(n *ir.Node) int {
	switch baseOf(n) {
	case "Conv":
		return 0
	case "Gemm":
		if n.Int("transB", 0) == 1 {
			return 0
		}
	}
	return 1
}

func importQDQ(s *state) error {
	g := s.g
	producer := map[string]*ir.Node{}
	readers := map[string][]*ir.Node{}
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			producer[o] = n
		}
		for _, in := range n.Inputs {
			if in != "" {
				readers[in] = append(readers[in], n)
			}
		}
	}
	info := &qdqInfo{weights: map[string]*qdqWeight{}, act: map[string]float32{}}
	refuse := func(n *ir.Node, why string) {
		s.log.Info("import-qdq", "refused", map[string]any{"node": n.Name, "op": n.OpType, "reason": why, "result": "runs in float32"})
	}
	weighted := func(n *ir.Node) bool {
		b := baseOf(n)
		return b == "Conv" || b == "Gemm" || b == "MatMul"
	}
	removed := map[*ir.Node]bool{}
	// Weights.
	for _, n := range g.Nodes {
		if n.OpType != "DequantizeLinear" || n.Domain != "" || len(n.Outputs) != 1 || isGraphOutput(g, n.Outputs[0]) {
			continue
		}
		w := constOf(g, producer, n.Input(0))
		if w == nil {
			continue // an activation's DequantizeLinear
		}
		out := n.Outputs[0]
		rs := readers[out]
		ok := len(rs) > 0
		for _, r := range rs {
			ok = ok && weighted(r) && len(r.Inputs) > 1 && r.Inputs[1] == out && r.Inputs[0] != out
		}
		if !ok {
			continue // a bias or another constant: constant folding handles it
		}
		if w.DType != tensor.Int8 {
			refuse(n, fmt.Sprintf("weights are %v: only int8 weights map onto the int8 kernels", w.DType))
			continue
		}
		sc, why := qdqParams(g, producer, n, false)
		if why != "" {
			refuse(n, why)
			continue
		}
		axis := outputAxis(rs[0])
		for _, r := range rs[1:] {
			if outputAxis(r) != axis {
				axis = -1
			}
		}
		if len(sc) > 1 {
			a := int(n.Int("axis", 1))
			if a < 0 {
				a += len(w.Shape)
			}
			if axis < 0 || a != axis || axis >= len(w.Shape) || w.Shape[a] != len(sc) {
				refuse(n, fmt.Sprintf("per-channel scales along axis %d of weights %v are not per output channel", a, w.Shape))
				continue
			}
		}
		wd := w.Data.([]int8)
		f := make([]float32, len(wd))
		inner := 1
		if axis >= 0 {
			inner = tensor.NumElems(w.Shape[axis+1:])
		}
		for i, v := range wd {
			s := sc[0]
			if len(sc) > 1 {
				s = sc[(i/inner)%len(sc)]
			}
			f[i] = float32(v) * s
		}
		g.Initializers[out] = tensor.From(f, append([]int{}, w.Shape...)...)
		info.weights[out] = &qdqWeight{q: wd, shape: append([]int{}, w.Shape...), scales: sc, axis: axis}
		removed[n] = true
		s.log.Info("import-qdq", "weights", map[string]any{"node": n.Name, "weights": out, "shape": w.Shape, "scales": len(sc)})
	}
	// Activations.
	for _, dq := range g.Nodes {
		if dq.OpType != "DequantizeLinear" || dq.Domain != "" || len(dq.Outputs) != 1 || removed[dq] {
			continue
		}
		q := producer[dq.Input(0)]
		if q == nil || q.OpType != "QuantizeLinear" || q.Domain != "" {
			continue
		}
		var users []*ir.Node
		for _, r := range readers[dq.Outputs[0]] {
			if weighted(r) && r.Inputs[0] == dq.Outputs[0] && len(r.Inputs) > 1 && info.weights[r.Inputs[1]] != nil {
				if why := int8Blocker(g, r, baseOf(r), g.Initializers[r.Inputs[1]]); why != "" {
					s.log.Info("import-qdq", "layer-float", map[string]any{"layer": r.Name, "reason": why})
					continue
				}
				users = append(users, r)
			}
		}
		if len(users) == 0 {
			continue
		}
		qs, why := qdqParams(g, producer, q, true)
		if why == "" {
			var ds []float32
			if ds, why = qdqParams(g, producer, dq, false); why == "" {
				switch {
				case len(qs) != 1 || len(ds) != 1:
					why = "per-channel activation scales: the int8 kernels take one scale per tensor"
				case qs[0] != ds[0]:
					why = fmt.Sprintf("QuantizeLinear scale %v differs from DequantizeLinear scale %v", qs[0], ds[0])
				}
			}
		}
		x := q.Input(0)
		if why == "" {
			if old, ok := info.act[x]; ok && old != qs[0] {
				why = fmt.Sprintf("tensor %s is quantized with two scales (%v, %v)", x, old, qs[0])
			}
		}
		if why != "" {
			refuse(dq, why)
			for _, u := range users {
				s.log.Info("import-qdq", "layer-float", map[string]any{"layer": u.Name, "reason": "its input's quantization was refused: " + why})
			}
			continue
		}
		info.act[x] = qs[0]
		for _, u := range users {
			u.Inputs[0] = x
			s.log.Info("import-qdq", "layer", map[string]any{"layer": u.Name, "input": x, "x_scale": qs[0], "weights": u.Inputs[1]})
		}
	}
	var keep []*ir.Node
	for _, n := range g.Nodes {
		if !removed[n] {
			keep = append(keep, n)
		}
	}
	g.Nodes = keep
	if len(info.weights) == 0 {
		return nil
	}
	s.qdq = info
	s.log.Info("import-qdq", "imported", map[string]any{"weights": len(info.weights), "activations": len(info.act),
		"note": "a Q8 layer quantizes x as clamp(round_half_even(x·(1/s)), −127, 127); ONNX QuantizeLinear divides by s and allows −128"})
	return nil
}
