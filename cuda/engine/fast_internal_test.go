package engine

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vouchml/vouch/cuda/fast"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/plan"
)

// A fast kernel's name is what Open reads back: precision, op and tile of
// a layer; one spec per body convolution of a chain (exact ones left out).
func TestParseFast(t *testing.T) {
	conv := &ir.Node{OpType: "Conv"}
	gemm := &ir.Node{OpType: fused.OpFused, Domain: fused.Domain, Attrs: map[string]*ir.Attr{fused.AttrBase: {Name: fused.AttrBase, Kind: ir.AttrString, S: "Gemm"}}}
	body := &ir.Graph{Nodes: []*ir.Node{{Name: "a", OpType: "Conv"}, {Name: "r", OpType: "Relu"}, {Name: "b", OpType: "Conv"}}}
	chain := &ir.Node{OpType: "ConvChain", Attrs: map[string]*ir.Attr{"body": {Name: "body", Kind: ir.AttrGraph, G: body}}}
	sp, m, err := parseFast("fast.bf16.conv(128x64)", conv)
	if err != nil || m != nil || !reflect.DeepEqual(sp, fastSpec{prec: fast.BF16, op: "conv", tile: fast.Tile{BM: 128, BN: 64}}) {
		t.Errorf("conv: %+v %v %v", sp, m, err)
	}
	if sp, _, err := parseFast("fast.fp16.gemm(64x32)", gemm); err != nil || sp.op != "gemm" || sp.prec != plan.FP16 {
		t.Errorf("fused gemm: %+v %v", sp, err)
	}
	_, m, err = parseFast("fast.fp16.conv(chain 64x64,exact,128x128)", chain)
	if err != nil || len(m) != 2 || m[body.Nodes[0]].tile != (fast.Tile{BM: 64, BN: 64}) || m[body.Nodes[2]].tile != (fast.Tile{BM: 128, BN: 128}) {
		t.Errorf("chain: %v %v", m, err)
	}
	for _, c := range []struct {
		k string
		n *ir.Node
	}{
		{"fast.fp16.conv(128x64", conv},
		{"fast.int8.conv(128x64)", conv},
		{"fast.fp16.conv(32x32)", conv},
		{"fast.fp16.gemm(64x32)", conv},
		{"fast.fp16.conv(64x32)", gemm},
		{"fast.fp16.conv(chain 64x64,exact)", chain},
		{"fast.fp16.conv(chain 64x64,64x64,exact)", chain},
		{"fast.fp16.conv(64x64)", chain},
	} {
		if _, _, err := parseFast(c.k, c.n); err == nil {
			t.Errorf("parseFast(%q) accepted it for a %s", c.k, c.n.OpType)
		}
	}
}

// Every kernel PlaceFast names parses back to its layer.
func TestPlaceFastParses(t *testing.T) {
	for _, k := range []string{fastName(plan.FP16, "conv", fast.ChooseTile(256, 784).String()), fastName(fast.BF16, "conv", fast.ChooseTile(64, 49).String())} {
		if _, _, err := parseFast(k, &ir.Node{OpType: "Conv"}); err != nil || !strings.HasPrefix(k, "fast.") {
			t.Errorf("%s: %v", k, err)
		}
	}
}

// A fast MatMul's fused layer names the Adds its kernel's epilogue runs
// (a bias, then a residual), the other passes after them; Open reads the
// epilogue back and refuses one the layer does not have.
func TestMatMulEpilogue(t *testing.T) {
	for _, c := range []struct {
		passes []string
		want   string
	}{
		{[]string{"vx_channel_affine"}, "+epilogue(bias)"},
		{[]string{"vx_channel_affine", "vx_add"}, "+epilogue(bias,res)"},
		{[]string{"vx_add"}, "+epilogue(res)"},
		{[]string{"vx_channel_affine", "vx_unary(Gelu none)"}, "+epilogue(bias,gelu)"},
		{[]string{"vx_channel_affine", "vx_add", "vx_unary(Gelu none)"}, "+epilogue(bias,res,gelu)"},
		{[]string{"vx_unary(Gelu none)"}, "+epilogue(gelu)"},
		{[]string{"vx_channel_affine", "vx_unary(Gelu tanh)"}, "+epilogue(bias)+vx_unary(Gelu tanh)"},
		{[]string{"vx_add_bcast", "vx_unary(Gelu none)"}, "+vx_add_bcast+vx_unary(Gelu none)"},
		{[]string{"vx_channel_affine", "vx_add_bcast", "vx_unary(Gelu none)"}, "+epilogue(bias)+vx_add_bcast+vx_unary(Gelu none)"},
		{[]string{"vx_channel_affine", "vx_add_bcast"}, "+epilogue(bias)+vx_add_bcast"},
		{[]string{"vx_add", "vx_channel_affine"}, "+epilogue(res)+vx_channel_affine"},
		{[]string{"vx_add_bcast", "vx_add"}, "+vx_add_bcast+vx_add"},
		{[]string{"vx_unary(Relu)"}, "+vx_unary(Relu)"},
	} {
		if got := matmulEpilogue(c.passes); got != c.want {
			t.Errorf("matmulEpilogue(%v) = %q, want %q", c.passes, got, c.want)
		}
	}
	mm := func(adds int) *ir.Node {
		n := &ir.Node{OpType: fused.OpFused, Domain: fused.Domain, Inputs: make([]string, 2+adds), Attrs: map[string]*ir.Attr{
			fused.AttrBase: {Name: fused.AttrBase, Kind: ir.AttrString, S: "MatMul"}}}
		n.Attrs[fused.AttrLayout] = &ir.Attr{Name: fused.AttrLayout, Kind: ir.AttrInts, Ints: []int64{2, int64(adds), 0}}
		return n
	}
	// mmg: with a fused Gelu of that approximation.
	mmg := func(adds int, approx string) *ir.Node {
		n := mm(adds)
		n.Attrs[fused.AttrActivation] = &ir.Attr{Name: fused.AttrActivation, Kind: ir.AttrString, S: "Gelu"}
		n.Attrs[fused.AttrActVersion] = &ir.Attr{Name: fused.AttrActVersion, Kind: ir.AttrInt, I: 20}
		n.Attrs[fused.ActPrefix+"approximate"] = &ir.Attr{Name: fused.ActPrefix + "approximate", Kind: ir.AttrString, S: approx}
		return n
	}
	if h, ok := fused.LayerOf(mmg(1, "none")); !ok || h.Activation != "Gelu" || h.Adds != 1 {
		t.Fatalf("test layer %+v", h)
	}
	for _, c := range []struct {
		k    string
		n    *ir.Node
		epi  []string
		gelu bool
	}{
		{"fast.fp16.matmul(128x64)+epilogue(bias,res)", mm(2), []string{"bias", "res"}, false},
		{"fast.fp16.matmul(128x64)+epilogue(bias)+vx_unary(Gelu none)", mmg(1, "none"), []string{"bias"}, false},
		{"fast.fp16.matmul(128x64)+epilogue(bias,gelu)", mmg(1, "none"), []string{"bias"}, true},
		{"fast.fp16.matmul(128x64)+epilogue(bias,res,gelu)", mmg(2, "none"), []string{"bias", "res"}, true},
		{"fast.fp16.matmul(64x32)+epilogue(gelu)", mmg(0, "none"), nil, true},
		{"fast.fp16.matmul(128x64)+vx_channel_affine+vx_add", mm(2), nil, false},
		{"fast.bf16.matmul(64x64)", mm(0), nil, false},
	} {
		sp, _, err := parseFast(c.k, c.n)
		if err != nil || !slices.Equal(sp.epi, c.epi) || sp.gelu != c.gelu || sp.tile.BM == 0 {
			t.Errorf("parseFast(%q) = %+v, %v; want the epilogue %v, GELU %v", c.k, sp, err, c.epi, c.gelu)
		}
	}
	for _, c := range []struct {
		k string
		n *ir.Node
	}{
		{"fast.fp16.matmul(128x64)+epilogue(bias,res)", mm(1)},
		{"fast.fp16.matmul(128x64)+epilogue(res,bias)", mm(2)},
		{"fast.fp16.matmul(128x64)+epilogue(gelu)", mm(2)},
		{"fast.fp16.matmul(128x64)+epilogue(gelu)", mmg(2, "none")},      // Adds left for after the GELU
		{"fast.fp16.matmul(128x64)+epilogue(bias,gelu)", mm(1)},          // no GELU in the layer
		{"fast.fp16.matmul(128x64)+epilogue(bias,gelu)", mmg(1, "tanh")}, // another GELU
		{"fast.fp16.matmul(128x64)+epilogue(bias,gelu)+vx_add", mmg(2, "none")},
		{"fast.fp16.matmul(128x64)+epilogue(gelu,bias)", mmg(1, "none")},
		{"fast.fp16.matmul(128x64)+epilogue(bias", mm(2)},
	} {
		if _, _, err := parseFast(c.k, c.n); err == nil {
			t.Errorf("parseFast(%q) accepted it for %v", c.k, c.n.Attrs)
		}
	}
}
