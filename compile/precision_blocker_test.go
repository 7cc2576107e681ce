package compile

import (
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// TestInt8Blocker: which convolutions int8 keeps at fp32 (depthwise,
// groups of fewer than 8 output channels), and that SiLU layers
// (EfficientNet's) no longer are among them.
func TestInt8Blocker(t *testing.T) {
	for _, tc := range []struct {
		name       string
		m, cg, grp int
		act        string
		want       string // a substring of the reason, "" for int8
	}{
		{"dense", 32, 16, 1, "", ""},
		{"depthwise", 32, 1, 32, "", "depthwise"},
		{"groups of 4", 128, 4, 32, "", "4 output channels a group"},
		{"groups of 8", 48, 8, 6, "", ""},
		{"groups of 16", 64, 16, 4, "", ""},
		{"silu", 32, 16, 1, fused.SiLU, ""},
	} {
		g := &ir.Graph{Initializers: map[string]*tensor.Tensor{
			"w": tensor.New(tensor.Float32, tc.m, tc.cg, 3, 3),
		}}
		n := &ir.Node{Name: "c", OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"y"},
			Attrs: map[string]*ir.Attr{"group": {Name: "group", Kind: ir.AttrInt, I: int64(tc.grp)}}}
		if tc.act != "" {
			n.Domain, n.OpType = fused.Domain, fused.OpFused
			n.Attrs[fused.AttrBase] = &ir.Attr{Name: fused.AttrBase, Kind: ir.AttrString, S: "Conv"}
			n.Attrs[fused.AttrLayout] = &ir.Attr{Name: fused.AttrLayout, Kind: ir.AttrInts, Ints: []int64{2, 0, 0}}
			n.Attrs[fused.AttrActivation] = &ir.Attr{Name: fused.AttrActivation, Kind: ir.AttrString, S: tc.act}
		}
		got := int8Blocker(g, n, "Conv", g.Initializers["w"])
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: reason %q, want %q", tc.name, got, tc.want)
		}
	}
}
