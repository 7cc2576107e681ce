package plan

import (
	"bytes"
	"errors"
	"testing"
)

// TestLabelFromLayers: an fp32 plan is labelled fp32 whatever its options
// say, and a plan whose header or layer claims a precision its layers do
// not compute in is refused (issue 20 A4: a plan said fp16 over fp32
// layers, and every record repeated it).
func TestLabelFromLayers(t *testing.T) {
	g := sharedModel(t, "breast_cancer_mlp")
	b := encode(t, g)
	p, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.Header.Precision != FP32 || p.Precision() != FP32 {
		t.Fatalf("label %q / %q, want fp32", p.Header.Precision, p.Precision())
	}
	for _, lie := range [][2]string{
		{`"precision":"fp32","source"`, `"precision":"fp16","source"`},                       // the header
		{`"tactic":"portable","precision":"fp32"`, `"tactic":"portable","precision":"int8"`}, // a layer
	} {
		bad := bytes.Replace(b, []byte(lie[0]), []byte(lie[1]), 1)
		if bytes.Equal(bad, b) {
			t.Fatalf("test plan has no %s", lie[0])
		}
		if _, err := Decode(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: Decode gave %v, want a malformed-plan error", lie[1], err)
		}
	}
	for _, c := range []struct {
		layers []Layer
		want   Precision
	}{
		{[]Layer{{Kind: "Gemm"}, {Kind: "Relu"}}, FP32},
		{[]Layer{{Kind: "Gemm"}, {Kind: "Q8", Domain: "vouch"}}, Int8},
		{[]Layer{{Kind: "F16", Domain: "vouch"}, {Kind: "Relu"}}, FP16},
		{[]Layer{{Kind: "F16", Domain: "vouch"}, {Kind: "Q8", Domain: "vouch"}}, Mixed},
		{[]Layer{{Kind: "Q8"}}, FP32}, // only vouch's own Q8 is int8
	} {
		if got := Label(c.layers); got != c.want {
			t.Errorf("Label(%v) = %q, want %q", c.layers, got, c.want)
		}
	}
}
