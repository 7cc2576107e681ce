package compile

import (
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// TestInt8Blocker: which convolutions int8 keeps at fp32 (depthwise ones
// the int8 depthwise kernel does not take, groups of fewer than 8 output
// channels, reductions of at most 16), and that SiLU layers (EfficientNet's)
// no longer are among them; the depthwise ones it takes stay fp32 unless
// asked for (the slow reason).
func TestInt8Blocker(t *testing.T) {
	for _, tc := range []struct {
		name       string
		m, cg, grp int
		k          int // kernel side, 3 if 0
		act        string
		want       string // a substring of the reason, "" for int8
	}{
		{"dense", 32, 16, 1, 0, "", ""},
		{"depthwise", 32, 1, 32, 0, "", ""},
		{"depthwise 9x9", 32, 1, 32, 9, "", "depthwise"},
		{"groups of 4", 128, 4, 32, 0, "", "4 output channels a group"},
		{"groups of 8", 48, 8, 6, 0, "", ""},
		{"groups of 16", 64, 16, 4, 0, "", ""},
		{"silu", 32, 16, 1, 0, fused.SiLU, ""},
		{"1x1 of 16 channels", 64, 16, 1, 1, "", "reduction of 16"},
		{"1x1 of 24 channels", 64, 24, 1, 1, "", ""},
		{"3x3 of 2 channels", 64, 2, 1, 3, "", ""},
	} {
		k := tc.k
		if k == 0 {
			k = 3
		}
		g := &ir.Graph{Initializers: map[string]*tensor.Tensor{
			"w": tensor.New(tensor.Float32, tc.m, tc.cg, k, k),
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
		g.Nodes = []*ir.Node{n}
		if l := weightedLayers(g); len(l) != 1 || (l[0].slow != "") != (tc.name == "depthwise") {
			t.Errorf("%s: weighted %+v, want the slow reason on the depthwise layer only", tc.name, l)
		}
	}
}
