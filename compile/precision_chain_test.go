package compile

import (
	"reflect"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
)

func chainQ8(name, out string, scale float32, in ...string) *ir.Node {
	return &ir.Node{Name: name, OpType: fused.OpQ8, Domain: fused.Domain, Inputs: in, Outputs: []string{out},
		Attrs: map[string]*ir.Attr{"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: scale}, fused.AttrBase: {Name: fused.AttrBase, Kind: ir.AttrString, S: "Conv"}}}
}

// TestInt8Chains: an int8 output chains only where int8 layers alone read
// it, each as its activation, with one x_scale, and it is no graph output.
func TestInt8Chains(t *testing.T) {
	g := &ir.Graph{
		Inputs:  []*ir.Value{{Name: "x"}},
		Outputs: []*ir.Value{{Name: "out"}, {Name: "f"}},
		Nodes: []*ir.Node{
			chainQ8("a", "ta", 0.5, "x", "w"),
			chainQ8("b", "tb", 0.25, "ta", "w"),  // a -> b, b -> c and d: chains
			chainQ8("c", "tc", 0.125, "tb", "w"), // c: read by Relu
			chainQ8("d", "td", 0.125, "tb", "w"), // d: read by e as x and by f as residual
			{Name: "r", OpType: "Relu", Inputs: []string{"tc"}, Outputs: []string{"tr"}},
			chainQ8("e", "te", 0.5, "td", "w"),
			chainQ8("f", "f", 0.5, "tr", "w", "", "td"), // f: a graph output
			chainQ8("g", "tg", 0.5, "tr", "w"),          // g: read by h and k, scales differ
			chainQ8("h", "th", 0.5, "tg", "w"),
			chainQ8("k", "out", 0.75, "tg", "w"),
		},
	}
	r := Int8Chains(g)
	want := []Int8Chain{
		{Tensor: "ta", Producer: "a", Consumers: []string{"b"}, Scale: 0.25},
		{Tensor: "tb", Producer: "b", Consumers: []string{"c", "d"}, Scale: 0.125},
	}
	if !reflect.DeepEqual(r.Chains, want) {
		t.Fatalf("chains %+v, want %+v", r.Chains, want)
	}
	// e's and h's outputs have no reader, f's and k's are graph outputs.
	if s := r.Summary(); s != "2/9 chainable, 0 as u8; 1 an int8 layer's residual or operand; 2 graph output; 1 int8 readers' scales differ; 2 no reader; 1 read by Relu" {
		t.Fatalf("summary %q", s)
	}
}
