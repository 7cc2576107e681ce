package fused_test

import (
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
)

// The header written by SetAttrs reads back as itself, and its layout is
// checked against the node's inputs.
func TestLayerRoundTrip(t *testing.T) {
	for _, l := range []fused.Layer{
		{Base: "Conv", BaseVersion: 11, BaseInputs: 3, Adds: 1, Activation: "Relu", ActVersion: 14},
		{Base: "MatMul", BaseVersion: 13, BaseInputs: 2, Adds: 2},
		{Base: "Conv", BaseVersion: 11, BaseInputs: 2, Activation: fused.SiLU, ActVersion: 13, SigmoidFirst: true},
		{Base: "Gemm", BaseVersion: 13, BaseInputs: 3, Activation: "Clip", ActVersion: 13, ActInputs: 2},
	} {
		n := &ir.Node{Name: "x", OpType: fused.OpFused, Domain: fused.Domain, Attrs: map[string]*ir.Attr{}}
		l.SetAttrs(n.Attrs)
		n.Inputs = make([]string, l.BaseInputs+l.Adds+l.ActInputs)
		got, ok := fused.LayerOf(n)
		if !ok || got != l {
			t.Errorf("LayerOf(SetAttrs(%+v)) = %+v, %v", l, got, ok)
		}
		if err := got.Check(len(n.Inputs)); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
		if err := got.Check(len(n.Inputs) + 1); err == nil || !strings.Contains(err.Error(), "bad layout") {
			t.Errorf("%+v with an extra input: %v", l, err)
		}
		if fused.BaseOf(n) != l.Base {
			t.Errorf("BaseOf = %q, want %q", fused.BaseOf(n), l.Base)
		}
	}
	if _, ok := fused.LayerOf(&ir.Node{OpType: "Conv"}); ok {
		t.Error("LayerOf accepts a plain Conv")
	}
	f16 := &ir.Node{OpType: fused.OpF16, Domain: fused.Domain, Attrs: map[string]*ir.Attr{
		fused.AttrInnerOp: {Name: fused.AttrInnerOp, Kind: ir.AttrString, S: fused.OpFused},
		fused.AttrBase:    {Name: fused.AttrBase, Kind: ir.AttrString, S: "Gemm"},
	}}
	if b := fused.BaseOf(f16); b != "Gemm" {
		t.Errorf("BaseOf(F16 of a fused Gemm) = %q", b)
	}
	if want := "+Add+Relu"; (fused.Layer{Adds: 1, Activation: "Relu"}).Suffix() != want {
		t.Errorf("Suffix, want %s", want)
	}
}
