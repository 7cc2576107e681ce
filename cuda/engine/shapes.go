package engine

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// The shape family: integer metadata of a GPU program, computed on the
// host inside it. An exported transformer computes its Reshape targets at
// run time (Shape of the hidden state, Gather of a dimension, Unsqueeze,
// Concat) and its position and token-type ids (Range, ConstantOfShape);
// none of it is float arithmetic, and none of it needs a value's data:
//
//   - Shape and Size read a value's shape, never its elements, so the
//     hidden state on the device is not downloaded (on the CPU backend
//     each Shape of the GPU's hidden state cost a synchronisation and a
//     copy of the whole tensor).
//   - An integer layer whose inputs all derive from shapes and constants
//     (shape-derived, see shapeDerived) runs its CPU kernel on the host:
//     its result is a function of the run's input shapes, which key the
//     run's buffers and graph, so a captured graph that baked it into a
//     kernel's arguments stays right for every run of that shape.
//   - Unsqueeze, Squeeze, Reshape, Flatten and Identity of integer data
//     (an attention mask on its way to a Cast) are views: the CPU kernel
//     on the host value, no element changes.
//
// The placement says so: kernel "host(shape)" or "host(view)".
//
// Their runner (runHost) goes before the families': it decides by the
// placed kernel, since an integer Sub or Cast looks like a float one
// without the build's types.
func init() { families = append(families, family{place: placeShapes}) }

// The kernels a placement names for the family's layers.
const (
	hostShape = "host(shape)"
	hostView  = "host(view)"
)

// intViews are the operators that move no element (host(view) on integer
// data).
var intViews = map[string]bool{"Unsqueeze": true, "Squeeze": true, "Reshape": true, "Flatten": true, "Identity": true}

// placeShapes is the family's placement (family.place).
func placeShapes(n *ir.Node, g *ir.Graph, types map[string]ir.Type) (string, string, bool) {
	if n.Domain != "" || hasSubgraph(n) {
		return "", "", false
	}
	if !intOutputs(n, types) {
		return "", "", false
	}
	switch {
	case n.OpType == "Shape" || n.OpType == "Size":
		return hostShape, "", true
	case shapeOp(n, g, types, map[string]bool{}):
		return hostShape, "", true
	case intViews[n.OpType] && intData(types, n.Input(0)) && constRest(n, g, types):
		return hostView, "", true
	}
	return "", "", false
}

// hasSubgraph reports whether n carries a graph attribute (Loop, If,
// Scan, a fused body): those run elsewhere.
func hasSubgraph(n *ir.Node) bool {
	for _, a := range n.Attrs {
		if a.G != nil || len(a.Graphs) != 0 {
			return true
		}
	}
	return false
}

// intOutputs reports whether n has outputs and each is an integer or bool
// value of known type.
func intOutputs(n *ir.Node, types map[string]ir.Type) bool {
	if len(n.Outputs) == 0 {
		return false
	}
	for _, o := range n.Outputs {
		if o == "" {
			continue
		}
		if t, ok := types[o]; !ok || !intData(types, o) || !t.RankKnown {
			return false
		}
	}
	return true
}

// intData reports whether v is an integer or bool value of known type.
func intData(types map[string]ir.Type, v string) bool {
	t, ok := types[v]
	return ok && (t.DType.IsInt() || t.DType == tensor.Bool)
}

// constRest reports whether a view's inputs after its data (Reshape's
// target, Unsqueeze's and Squeeze's axes) are shape-derived.
func constRest(n *ir.Node, g *ir.Graph, types map[string]ir.Type) bool {
	for _, in := range n.Inputs[1:] {
		if in != "" && !shapeDerived(in, g, types, map[string]bool{}) {
			return false
		}
	}
	return true
}

// shapeOp reports whether n is an integer layer of the main graph whose
// inputs are all shape-derived (memo: the values already decided).
func shapeOp(n *ir.Node, g *ir.Graph, types map[string]ir.Type, memo map[string]bool) bool {
	if n.Domain != "" || hasSubgraph(n) || !intOutputs(n, types) {
		return false
	}
	if n.OpType == "Shape" || n.OpType == "Size" {
		return true
	}
	for _, in := range n.Inputs {
		if in != "" && !shapeDerived(in, g, types, memo) {
			return false
		}
	}
	return true
}

// shapeDerived reports whether value v of g is a function of the run's
// input shapes and the constants alone: a constant, a Shape or Size, or
// an integer layer of shape-derived inputs. A graph input is data. The
// walk stops at the first layer with a float output, so it visits only
// the integer chains that lead to v.
func shapeDerived(v string, g *ir.Graph, types map[string]ir.Type, memo map[string]bool) bool {
	if d, ok := memo[v]; ok {
		return d
	}
	if _, ok := g.Initializers[v]; ok {
		return true
	}
	memo[v] = false // a cycle (there is none in a verified graph) is not derived
	for _, p := range g.Nodes {
		for _, o := range p.Outputs {
			if o == v {
				d := shapeOp(p, g, types, memo)
				memo[v] = d
				return d
			}
		}
	}
	return false
}

// runHost runs the layers placed host(shape) or host(view), and the
// Gathers and Casts of staged or shape-derived integers (runStaged); ok is
// false for any other layer.
func (s *state) runHost(n *ir.Node) (bool, error) {
	if k := s.pr.kernel[n]; k != hostShape && k != hostView {
		return s.runStaged(n)
	}
	if n.OpType == "Shape" || n.OpType == "Size" {
		sh, err := s.shapeOf(n.Input(0))
		if err != nil {
			return true, err
		}
		t, err := ShapeValue(n, sh)
		if err != nil {
			return true, err
		}
		s.vals[n.Outputs[0]] = &val{shape: t.Shape, host: t}
		return true, nil
	}
	return true, s.cpu(n)
}

// shapeOf is a value's shape, wherever its data live (never downloaded).
func (s *state) shapeOf(name string) ([]int, error) {
	if v := s.vals[name]; v != nil {
		return v.shape, nil
	}
	if t, ok := s.g.Initializers[name]; ok {
		return t.Shape, nil
	}
	return nil, fmt.Errorf("no value %q", name)
}

// ShapeValue is ONNX Shape's (opset 15's start and end, clamped as
// kernel/shape does) or Size's output for a value of shape sh.
func ShapeValue(n *ir.Node, sh []int) (*tensor.Tensor, error) {
	switch n.OpType {
	case "Size":
		return tensor.Scalar(int64(tensor.NumElems(sh))), nil
	case "Shape":
		r := int64(len(sh))
		clamp := func(v int64) int64 {
			if v < 0 {
				v += r
			}
			return min(max(v, 0), r)
		}
		st, e := clamp(n.Int("start", 0)), r
		if n.Has("end") {
			e = clamp(n.Int("end", 0))
		}
		e = max(e, st)
		v := make([]int64, e-st)
		for i := range v {
			v[i] = int64(sh[st+int64(i)])
		}
		return tensor.From(v, len(v)), nil
	}
	return nil, fmt.Errorf("ShapeValue of %s", n.OpType)
}
