package ir

import (
	"fmt"

	"github.com/vouchml/vouch/tensor"
)

// InferInput is what a shape function sees of one node input.
type InferInput struct {
	Present bool           // false for an omitted optional input
	Type    Type           // the input's type, as far as known
	Const   *tensor.Tensor // the value, when it is a constant (initializer or Constant node)
}

// Inferrer computes a node's output types from its inputs' types. The kernel
// registry implements it for every op it supports.
type Inferrer interface {
	InferNode(n *Node, in []InferInput) ([]Type, error)
}

// Infer derives the type of every value in g (and its subgraphs) in
// topological order, recording them in g.Types. g must have been verified.
// Declared output types are checked against the inferred ones where both are
// known. outer holds the types visible from enclosing graphs (nil at top level).
func Infer(g *Graph, inf Inferrer, outer map[string]Type) error {
	if g.Types == nil {
		g.Types = map[string]Type{}
	}
	scope := map[string]Type{}
	for k, v := range outer {
		scope[k] = v
	}
	consts := map[string]*tensor.Tensor{}
	for name, t := range g.Initializers {
		scope[name] = TensorType(t)
		consts[name] = t
	}
	for _, v := range g.Inputs {
		scope[v.Name] = v.Type
		delete(consts, v.Name) // an input may override its initializer default
	}
	for _, n := range g.Nodes {
		in := make([]InferInput, len(n.Inputs))
		for i, name := range n.Inputs {
			if name == "" {
				continue
			}
			t, ok := scope[name]
			if !ok {
				t, ok = g.Types[name]
			}
			in[i] = InferInput{Present: true, Type: t, Const: consts[name]}
			if !ok {
				in[i].Type = Type{}
			}
		}
		outs, err := inf.InferNode(n, in)
		if err != nil {
			return fmt.Errorf("ir: graph %q: %s: %w", g.Name, n.Label(), err)
		}
		for i, o := range n.Outputs {
			if o == "" || i >= len(outs) {
				continue
			}
			if declared, ok := g.Types[o]; ok {
				outs[i] = merge(declared, outs[i])
			}
			scope[o] = outs[i]
			g.Types[o] = outs[i]
		}
		if n.OpType == "Constant" && n.Domain == "" && len(n.Outputs) == 1 {
			if t := constantValue(n); t != nil {
				consts[n.Outputs[0]] = t
			}
		}
	}
	for k, v := range scope {
		if _, ok := outer[k]; !ok {
			g.Types[k] = v
		}
	}
	for _, o := range g.Outputs {
		got, ok := scope[o.Name]
		if !ok {
			continue
		}
		if err := compatible(o.Type, got); err != nil {
			return fmt.Errorf("ir: graph %q: output %q declared %v, inferred %v: %w", g.Name, o.Name, o.Type, got, err)
		}
	}
	return nil
}

// merge prefers the more specific of a declared and an inferred type.
func merge(declared, inferred Type) Type {
	if !inferred.RankKnown {
		if inferred.DType != tensor.Undefined && declared.DType == tensor.Undefined {
			declared.DType = inferred.DType
		}
		return declared
	}
	if !declared.RankKnown || len(declared.Shape) != len(inferred.Shape) {
		return inferred
	}
	out := Type{DType: inferred.DType, RankKnown: true, Shape: make([]Dim, len(inferred.Shape))}
	if out.DType == tensor.Undefined {
		out.DType = declared.DType
	}
	for i := range out.Shape {
		out.Shape[i] = inferred.Shape[i]
		if !inferred.Shape[i].Known() && declared.Shape[i].Known() {
			out.Shape[i] = declared.Shape[i]
		}
	}
	return out
}

func compatible(declared, got Type) error {
	if declared.DType != tensor.Undefined && got.DType != tensor.Undefined && declared.DType != got.DType {
		return fmt.Errorf("element type differs")
	}
	if declared.RankKnown && got.RankKnown {
		if len(declared.Shape) != len(got.Shape) {
			return fmt.Errorf("rank differs")
		}
		for i := range declared.Shape {
			if declared.Shape[i].Known() && got.Shape[i].Known() && declared.Shape[i].Value != got.Shape[i].Value {
				return fmt.Errorf("dimension %d differs", i)
			}
		}
	}
	return nil
}

// constantValue returns the value of a Constant node given as a tensor or
// as one of the numeric value_* attributes.
func constantValue(n *Node) *tensor.Tensor {
	for name, a := range n.Attrs {
		switch name {
		case "value":
			return a.T
		case "value_int":
			return tensor.Scalar(a.I)
		case "value_ints":
			return tensor.From(append([]int64{}, a.Ints...), len(a.Ints))
		case "value_float":
			return tensor.Scalar(a.F)
		case "value_floats":
			return tensor.From(append([]float32{}, a.Floats...), len(a.Floats))
		}
	}
	return nil
}
