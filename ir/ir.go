// Package ir is vouch's intermediate representation of a model: a Graph of
// Nodes connected by named Values, with typed values and symbolic shapes.
//
// Edges are names, as in ONNX: a node input names a graph input, an
// initializer, another node's output, or (inside a subgraph) a value of an
// enclosing graph. The empty name marks an omitted optional input or output.
// Verify checks the structure; Infer runs a caller-supplied shape function per
// node (the kernel registry provides them) and records every value's Type.
package ir

import (
	"fmt"
	"strings"

	"github.com/vouchml/vouch/tensor"
)

// Dim is one dimension: a known size (Value >= 0), a named symbolic size
// (Param != ""), or unknown (Value < 0 and Param == "").
type Dim struct {
	Value int64
	Param string
}

// Known reports whether the dimension has a fixed size.
func (d Dim) Known() bool { return d.Value >= 0 && d.Param == "" }

func (d Dim) String() string {
	switch {
	case d.Param != "":
		return d.Param
	case d.Value < 0:
		return "?"
	}
	return fmt.Sprint(d.Value)
}

// Fixed returns a known dimension.
func Fixed(n int) Dim { return Dim{Value: int64(n)} }

// Unknown is a dimension of unknown size.
var Unknown = Dim{Value: -1}

// Type is the type of a value: its element type and shape. A nil Shape with
// RankKnown false means the rank itself is unknown.
type Type struct {
	DType     tensor.DType
	Shape     []Dim
	RankKnown bool
}

// TensorType returns the Type of a concrete tensor.
func TensorType(t *tensor.Tensor) Type {
	return StaticType(t.DType, t.Shape)
}

// StaticType returns a Type with all dimensions known.
func StaticType(dt tensor.DType, shape []int) Type {
	s := make([]Dim, len(shape))
	for i, d := range shape {
		s[i] = Fixed(d)
	}
	return Type{DType: dt, Shape: s, RankKnown: true}
}

// Static returns the concrete shape if every dimension is known.
func (t Type) Static() ([]int, bool) {
	if !t.RankKnown {
		return nil, false
	}
	out := make([]int, len(t.Shape))
	for i, d := range t.Shape {
		if !d.Known() {
			return nil, false
		}
		out[i] = int(d.Value)
	}
	return out, true
}

func (t Type) String() string {
	if !t.RankKnown {
		return t.DType.String() + "[*]"
	}
	parts := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		parts[i] = d.String()
	}
	return t.DType.String() + "[" + strings.Join(parts, ",") + "]"
}

// Value is a graph input or output with its declared type.
type Value struct {
	Name string
	Type Type
}

// Graph is a computation graph. Nodes are kept in a topological order once
// Verify has succeeded.
type Graph struct {
	Name         string
	Inputs       []*Value // excludes initializers
	Outputs      []*Value
	Initializers map[string]*tensor.Tensor
	Nodes        []*Node
	// Types holds the known type of every value: declared value_info,
	// inputs, outputs, initializers, and whatever Infer derived.
	Types map[string]Type
}

// Node is one operator application.
type Node struct {
	Name    string
	OpType  string
	Domain  string // "" for the default ONNX domain
	Version int64  // opset version of Domain that the model imports
	Inputs  []string
	Outputs []string
	Attrs   map[string]*Attr
}

// Model is a decoded model: its main graph and the opsets it imports.
type Model struct {
	Graph        *Graph
	IRVersion    int64
	Opsets       map[string]int64
	Producer     string
	ModelVersion int64
	DocString    string
	Metadata     map[string]string
}

// AttrKind says which field of an Attr is set. Numbers are ONNX's.
type AttrKind int

// Attribute kinds.
const (
	AttrFloat   AttrKind = 1
	AttrInt     AttrKind = 2
	AttrString  AttrKind = 3
	AttrTensor  AttrKind = 4
	AttrGraph   AttrKind = 5
	AttrFloats  AttrKind = 6
	AttrInts    AttrKind = 7
	AttrStrings AttrKind = 8
	AttrTensors AttrKind = 9
	AttrGraphs  AttrKind = 10
)

// Attr is a node attribute.
type Attr struct {
	Name    string
	Kind    AttrKind
	F       float32
	I       int64
	S       string
	T       *tensor.Tensor
	G       *Graph
	Floats  []float32
	Ints    []int64
	Strings []string
	Tensors []*tensor.Tensor
	Graphs  []*Graph
}

// Int returns attribute name as an int64, or def when absent.
func (n *Node) Int(name string, def int64) int64 {
	if a, ok := n.Attrs[name]; ok {
		return a.I
	}
	return def
}

// Float returns attribute name as a float32, or def when absent.
func (n *Node) Float(name string, def float32) float32 {
	if a, ok := n.Attrs[name]; ok {
		if a.Kind == AttrInt {
			return float32(a.I)
		}
		return a.F
	}
	return def
}

// String returns attribute name as a string, or def when absent.
func (n *Node) String(name string, def string) string {
	if a, ok := n.Attrs[name]; ok {
		return a.S
	}
	return def
}

// Ints returns attribute name as []int64, or def when absent.
func (n *Node) Ints(name string, def []int64) []int64 {
	if a, ok := n.Attrs[name]; ok {
		return a.Ints
	}
	return def
}

// IntList returns attribute name as []int, or def when absent.
func (n *Node) IntList(name string, def ...int) []int {
	v := n.Ints(name, nil)
	if v == nil {
		return def
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// Floats returns attribute name as []float32, or def when absent.
func (n *Node) Floats(name string, def []float32) []float32 {
	if a, ok := n.Attrs[name]; ok {
		return a.Floats
	}
	return def
}

// Has reports whether the node has attribute name.
func (n *Node) Has(name string) bool {
	_, ok := n.Attrs[name]
	return ok
}

// Input returns the i-th input name, or "" if absent.
func (n *Node) Input(i int) string {
	if i < len(n.Inputs) {
		return n.Inputs[i]
	}
	return ""
}

// Label names the node for error messages: its name and op type.
func (n *Node) Label() string {
	if n.Name != "" {
		return fmt.Sprintf("%s node %q", n.OpType, n.Name)
	}
	out := ""
	if len(n.Outputs) > 0 {
		out = n.Outputs[0]
	}
	return fmt.Sprintf("%s node (output %q)", n.OpType, out)
}
