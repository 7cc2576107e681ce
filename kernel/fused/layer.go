package fused

import (
	"fmt"
	"strings"

	"github.com/vouchml/vouch/ir"
)

// The operator types of vouch's own layers (domain Domain) that carry a
// base op in the Fused attribute layout (see the package doc): Fused
// itself, the int8 layer Q8 (kernel/q8) and the float16 wrapper F16, whose
// InnerOp attribute names the op it wraps.
const (
	OpFused       = "Fused"
	OpQ8          = "Q8"
	OpF16         = "F16"
	OpElementwise = "Elementwise"
)

// The attribute names of the Fused layout, written by the compiler and
// read by the kernels: the one place they are spelled.
const (
	AttrBase         = "base"
	AttrBaseVersion  = "base_version"
	AttrLayout       = "layout"
	AttrActivation   = "activation"
	AttrActVersion   = "act_version"
	AttrSigmoidFirst = "act_sigmoid_first"
	// ActPrefix prefixes each of the activation's own attributes.
	ActPrefix = "act_"
	// AttrInnerOp is F16's wrapped op type.
	AttrInnerOp = "inner_op"
)

// Layer is the typed header of a Fused node: what the compiler decided and
// the kernels run. The attributes it does not cover belong to the base op
// (or, with ActPrefix, to the activation).
type Layer struct {
	Base        string
	BaseVersion int64
	// BaseInputs, Adds and ActInputs are the layout: the number of the
	// base op's inputs, of Adds after it (0, 1 or 2) and of the
	// activation's extra inputs, in the node's input order.
	BaseInputs, Adds, ActInputs int
	// Activation is the activation op type ("" for none; SiLU for the
	// Sigmoid·Mul pair, HardSigmoidMul for HardSigmoid·Mul) and ActVersion
	// its opset version (the gate's for those two).
	Activation string
	ActVersion int64
	// SigmoidFirst (SiLU and HardSigmoidMul): the gate's output is the
	// Mul's first operand.
	SigmoidFirst bool
}

// LayerOf returns the layer header of n, which must be a Fused or Q8 node
// of Domain (ok false otherwise). It does not check the layout against
// n's inputs; Check does.
func LayerOf(n *ir.Node) (l Layer, ok bool) {
	if n.Domain != Domain || (n.OpType != OpFused && n.OpType != OpQ8) {
		return Layer{}, false
	}
	return parseLayer(n), true
}

// parseLayer reads the header attributes of n, whatever its op type.
func parseLayer(n *ir.Node) (l Layer) {
	l = Layer{Base: n.String(AttrBase, ""), BaseVersion: n.Int(AttrBaseVersion, 0),
		Activation: n.String(AttrActivation, ""), ActVersion: n.Int(AttrActVersion, 0),
		SigmoidFirst: n.Int(AttrSigmoidFirst, 0) == 1}
	if lay := n.Ints(AttrLayout, nil); len(lay) == 3 {
		l.BaseInputs, l.Adds, l.ActInputs = int(lay[0]), int(lay[1]), int(lay[2])
	}
	return l
}

// BaseOf returns the op type a layer of vouch's domain computes at heart:
// a Fused or Q8 layer's base, an F16 layer's inner op (or, where that is
// a Fused layer, its base), and n's own op type for anything else.
func BaseOf(n *ir.Node) string {
	if n.Domain != Domain {
		return n.OpType
	}
	switch n.OpType {
	case OpFused, OpQ8:
		return n.String(AttrBase, "")
	case OpF16:
		if in := n.String(AttrInnerOp, ""); in != OpFused {
			return in
		}
		return n.String(AttrBase, "")
	}
	return n.OpType
}

// Check reports whether the header is well formed for a node of nIn inputs.
func (l Layer) Check(nIn int) error {
	if l.Base == "" {
		return fmt.Errorf("fused layer: no base op")
	}
	if l.BaseInputs < 1 || l.Adds < 0 || l.Adds > 2 || l.ActInputs < 0 || l.BaseInputs+l.Adds+l.ActInputs != nIn {
		return fmt.Errorf("fused layer: bad layout [%d %d %d] for %d inputs", l.BaseInputs, l.Adds, l.ActInputs, nIn)
	}
	return nil
}

// Suffix names the work after the base op ("+Add+Relu"), as the build
// report's layer kinds show it: Fused(Conv+Add+Relu).
func (l Layer) Suffix() string {
	s := ""
	if l.Adds >= 1 && l.Adds <= 2 {
		s += strings.Repeat("+Add", l.Adds)
	}
	if l.Activation != "" {
		s += "+" + l.Activation
	}
	return s
}

// SetAttrs writes the header into attrs, the node's attribute map. The
// activation's own attributes are ActAttr's business; SigmoidFirst is
// written only for SiLU and HardSigmoidMul, and nothing is written for an absent activation.
func (l Layer) SetAttrs(attrs map[string]*ir.Attr) {
	attrs[AttrBase] = &ir.Attr{Name: AttrBase, Kind: ir.AttrString, S: l.Base}
	attrs[AttrBaseVersion] = &ir.Attr{Name: AttrBaseVersion, Kind: ir.AttrInt, I: l.BaseVersion}
	attrs[AttrLayout] = &ir.Attr{Name: AttrLayout, Kind: ir.AttrInts, Ints: []int64{int64(l.BaseInputs), int64(l.Adds), int64(l.ActInputs)}}
	if l.Activation == "" {
		return
	}
	attrs[AttrActivation] = &ir.Attr{Name: AttrActivation, Kind: ir.AttrString, S: l.Activation}
	attrs[AttrActVersion] = &ir.Attr{Name: AttrActVersion, Kind: ir.AttrInt, I: l.ActVersion}
	if l.Activation == SiLU || l.Activation == HardSigmoidMul {
		first := int64(0)
		if l.SigmoidFirst {
			first = 1
		}
		attrs[AttrSigmoidFirst] = &ir.Attr{Name: AttrSigmoidFirst, Kind: ir.AttrInt, I: first}
	}
}

// ActAttr returns the activation's attribute a, named name on the
// activation, as it is stored on the fused node (named with ActPrefix).
func ActAttr(name string, a *ir.Attr) *ir.Attr {
	c := *a
	c.Name = ActPrefix + name
	return &c
}

// IsHeaderAttr reports whether the attribute named k is part of the
// header (Layer) rather than the base op's or the activation's.
func IsHeaderAttr(k string) bool {
	switch k {
	case AttrBase, AttrBaseVersion, AttrLayout, AttrActivation, AttrActVersion:
		return true
	}
	return false
}
