package ml

import (
	"fmt"
	"math"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// attribute constructors for test nodes.
func fs(name string, v ...float32) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrFloats, Floats: v}
}
func is(name string, v ...int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInts, Ints: v} }
func ss(name string, v ...string) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrStrings, Strings: v}
}
func f1(name string, v float32) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrFloat, F: v} }
func i1(name string, v int64) *ir.Attr   { return &ir.Attr{Name: name, Kind: ir.AttrInt, I: v} }
func s1(name string, v string) *ir.Attr  { return &ir.Attr{Name: name, Kind: ir.AttrString, S: v} }
func ta(name string, t *tensor.Tensor) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrTensor, T: t}
}

func node(op string, attrs ...*ir.Attr) *ir.Node {
	n := &ir.Node{OpType: op, Domain: Domain, Version: 3, Attrs: map[string]*ir.Attr{}}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	return n
}

// run runs n on in and checks that shape inference predicts every output's
// dtype and every known dimension.
func run(t *testing.T, n *ir.Node, in ...*tensor.Tensor) []*tensor.Tensor {
	t.Helper()
	out, err := runErr(n, in...)
	if err != nil {
		t.Fatalf("%s: %v", n.OpType, err)
	}
	return out
}

func runErr(n *ir.Node, in ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	op := Ops()[n.OpType]
	out, err := op.Run(&kernel.Ctx{}, n, in)
	if err != nil {
		return nil, err
	}
	ii := make([]ir.InferInput, len(in))
	for i, x := range in {
		if x == nil {
			continue
		}
		ii[i] = ir.InferInput{Present: true, Type: typeOf(x)}
	}
	types, err := op.Infer(n, ii)
	if err != nil {
		return nil, fmt.Errorf("infer: %w", err)
	}
	if len(types) != len(out) {
		return nil, fmt.Errorf("infer gives %d outputs, run %d", len(types), len(out))
	}
	for i, o := range out {
		if err := o.Check(); err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
		ty := types[i]
		if ty.DType != tensor.Undefined && ty.DType != o.DType {
			return nil, fmt.Errorf("output %d: inferred %v, got %v", i, ty, o)
		}
		if ty.RankKnown {
			if len(ty.Shape) != len(o.Shape) {
				return nil, fmt.Errorf("output %d: inferred %v, got %v", i, ty, o)
			}
			for j, d := range ty.Shape {
				if d.Known() && int(d.Value) != o.Shape[j] {
					return nil, fmt.Errorf("output %d: inferred %v, got %v", i, ty, o)
				}
			}
		}
	}
	return out, nil
}

func typeOf(x *tensor.Tensor) ir.Type {
	if x.DType == tensor.Map || x.DType == tensor.Sequence {
		return ir.Type{DType: x.DType}
	}
	return ir.TensorType(x)
}

func f32(shape []int, v ...float32) *tensor.Tensor { return tensor.From(v, shape...) }

// near compares float32 results with an absolute and relative tolerance.
func near(t *testing.T, what string, got *tensor.Tensor, want []float32, tol float64) {
	t.Helper()
	g := got.Data.([]float32)
	if len(g) != len(want) {
		t.Fatalf("%s: got %d values %v, want %v", what, len(g), g, want)
	}
	for i := range g {
		if d := math.Abs(float64(g[i]) - float64(want[i])); !(d <= tol*(1+math.Abs(float64(want[i])))) {
			t.Errorf("%s[%d]: got %v, want %v (all: %v)", what, i, g[i], want[i], g)
		}
	}
}

func equal[T comparable](t *testing.T, what string, got *tensor.Tensor, want ...T) {
	t.Helper()
	g, ok := got.Data.([]T)
	if !ok || len(g) != len(want) {
		t.Fatalf("%s: got %v %v, want %v", what, got, got.Data, want)
	}
	for i := range g {
		if g[i] != want[i] {
			t.Errorf("%s: got %v, want %v", what, g, want)
			return
		}
	}
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
