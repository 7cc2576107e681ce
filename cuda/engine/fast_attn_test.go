package engine_test

import (
	"strings"
	"testing"

	. "github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/plan"
)

// tiny_bert's fast placement: its Attention layers on the fused kernel
// (its sequence is unknown at build time: the longest, s128), its
// LayerNormalizations on va_layernorm (exact arithmetic: no precision),
// which the exact placement leaves on vx_layernorm; bf16 names its
// attention so; int8 and fp32 leave both exact.
func TestPlaceFastTransformer(t *testing.T) {
	res := build(t, "tiny_bert")
	g := res.Graph
	exact := Place(g, g.Types)
	for _, c := range []struct {
		p          plan.Precision
		attn, norm string
	}{
		{plan.FP16, "fast.fp16.attention(s128)", kernels.FastLayerNorm},
		{fastBF16, "fast.bf16.attention(s128)", kernels.FastLayerNorm},
		{plan.FP32, "", kernels.LayerNorm},
	} {
		got, _ := PlaceFast(g, g.Types, FastOptions{Precision: c.p})
		na, nn := 0, 0
		for i, n := range g.Nodes {
			switch n.OpType {
			case "Attention":
				na++
				want := c.attn
				if want == "" {
					want = exact[i].Kernel
				}
				if got[i].Kernel != want || (c.attn != "") != (got[i].Precision == c.p) {
					t.Errorf("%s %s: %+v, want %q", c.p, got[i].Layer, got[i], want)
				}
			case "LayerNormalization":
				nn++
				if exact[i].Kernel != kernels.LayerNorm || got[i].Kernel != c.norm || got[i].Precision != "" {
					t.Errorf("%s %s: %+v (exact %q), want %q without a precision", c.p, got[i].Layer, got[i], exact[i].Kernel, c.norm)
				}
			}
		}
		if na == 0 || nn == 0 {
			t.Fatalf("tiny_bert: %d Attention, %d LayerNormalization layers", na, nn)
		}
	}
	got, _ := PlaceFast(g, g.Types, FastOptions{Precision: plan.FP16})
	sec := plan.GPU{Device: "cuda", Mode: plan.ModeFast, Arch: "sm_90", Layers: got,
		Kernels: plan.GPUKernels{Source: "fast.cu", SourceSHA256: strings.Repeat("ab", 32), PTXSHA256: strings.Repeat("ab", 32), CubinSHA256: strings.Repeat("ab", 32)}}
	if _, err := plan.AddGPU(res.Plan, sec, []byte("image")); err != nil {
		t.Fatalf("AddGPU of the placement: %v", err)
	}
}

// tiny_bert's fast placement folds the moves around each fused attention
// (FoldKernel): each folded Transpose feeds an Attention layer alone or
// reads one's output, each folded Split feeds Reshapes only; an exact
// placement folds nothing.
func TestPlaceFastFolds(t *testing.T) {
	res := build(t, "tiny_bert")
	g := res.Graph
	readers := map[string][]string{}
	prod := map[string]string{}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			readers[in] = append(readers[in], n.OpType)
		}
		for _, o := range n.Outputs {
			prod[o] = n.OpType
		}
	}
	got, _ := PlaceFast(g, g.Types, FastOptions{Precision: plan.FP16})
	nt, ns := 0, 0
	for i, n := range g.Nodes {
		if got[i].Kernel != FoldKernel {
			continue
		}
		switch n.OpType {
		case "Transpose":
			nt++
			r := readers[n.Outputs[0]]
			if !(len(r) == 1 && r[0] == "Attention") && prod[n.Input(0)] != "Attention" {
				t.Errorf("%s folded: read by %v, reads a %s", n.Name, r, prod[n.Input(0)])
			}
		case "Split":
			ns++
			for _, o := range n.Outputs {
				if r := readers[o]; len(r) != 1 || r[0] != "Reshape" {
					t.Errorf("%s folded: output %s read by %v", n.Name, o, r)
				}
			}
		default:
			t.Errorf("%s (%s) folded", n.Name, n.OpType)
		}
	}
	if nt == 0 {
		t.Errorf("tiny_bert fp16: no folded Transpose")
	}
	t.Logf("tiny_bert fp16: %d Transposes, %d Splits folded", nt, ns)
	for i, l := range Place(g, g.Types) {
		if l.Kernel == FoldKernel {
			t.Errorf("exact placement folds %s", g.Nodes[i].Name)
		}
	}
}
