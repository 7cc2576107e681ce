package compile

import (
	"fmt"

	"slices"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/q8"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// This file derives the facts a plan states about itself — each layer's
// precision (plan.LayerPrecision), the plan's precision label, the CPU
// features its kernels use and their FLOPs — from the chosen layers and
// tactics, never from the options the build was asked for: a build asked
// for fp16 whose precision pass was disabled has fp32 layers and says so.

// Feature sets the kernels of each layer precision can use, whatever the
// host: the float32 vector kernels (kernel/amd64) and the int8/fp16 ones
// (kernel/q8). A plan requires their intersection with the target's.
var (
	vectorFeatures = []string{"avx", "avx2", "fma", "avx512f"}
	int8Features   = []string{"avx", "avx2", "f16c", "avx512f", "avx512vl", "avx512vnni", "avx512bw"}
	fp16Features   = []string{"f16c"}
)

// moveOps only move or relabel data: their kernels use no vector features.
var moveOps = map[string]bool{
	"Identity": true, "Reshape": true, "Flatten": true, "Squeeze": true, "Unsqueeze": true,
	"Shape": true, "Size": true, "Constant": true, "Cast": true, "Gather": true, "Concat": true,
	"Slice": true, "Transpose": true, "Split": true, "Expand": true, "Tile": true,
	"ConstantOfShape": true, "Range": true, "Pad": true,
}

// layerFeatures are the CPU features n's kernel can use.
func layerFeatures(n *ir.Node) []string {
	switch plan.LayerPrecision(n.Domain, n.OpType) {
	case plan.Int8:
		return int8Features
	case plan.FP16:
		return append(slices.Clone(vectorFeatures), fp16Features...)
	}
	if n.Domain == "" && moveOps[n.OpType] {
		return nil
	}
	return vectorFeatures
}

// hostFeatures are the features this machine's kernels detect, the
// default target.
func hostFeatures() []string {
	return append(append([]string{}, amd64.Features()...), q8.Features()...)
}

// requiredFeatures lists the CPU features g's layers use on the target
// (target, or this machine when target is empty), sorted: the union over
// the layers of what each layer's kernel can use, limited to what the
// target has. A machine without them runs the portable twins, which give
// the same bits.
func requiredFeatures(g *ir.Graph, target []string) []string {
	if len(target) == 0 {
		target = hostFeatures()
	}
	f := []string{}
	for _, n := range g.Nodes {
		for _, x := range layerFeatures(n) {
			if slices.Contains(target, x) {
				f = append(f, x)
			}
		}
	}
	slices.Sort(f)
	return slices.Compact(f)
}

// planLayers are g's layers as the label function reads them.
func planLayers(g *ir.Graph) []plan.Layer {
	l := make([]plan.Layer, len(g.Nodes))
	for i, n := range g.Nodes {
		l[i] = plan.Layer{Name: n.Name, Kind: n.OpType, Domain: n.Domain}
	}
	return l
}

// layerFLOPs counts multiply-adds ×2 of a layer's dot products at the
// types given (the opt profile's): a plain or fused Conv, Gemm or MatMul,
// the same wrapped in Q8 (int8) or F16 (fp16 weights), and every
// convolution of a ConvChain's body.
func layerFLOPs(n *ir.Node, types map[string]ir.Type, reg *kernel.Registry) int64 {
	base := n.OpType
	switch {
	case n.Domain == fusedDomain && n.OpType == fused.ConvChain:
		return chainFLOPs(n, types, reg)
	case n.Domain == fusedDomain && (n.OpType == fused.OpFused || n.OpType == fused.OpQ8 || n.OpType == fused.OpF16):
		base = fused.BaseOf(n)
	}
	return dotFLOPs(base, n, types)
}

// chainFLOPs sums the FLOPs of a ConvChain's body, its types inferred from
// the chain's input type.
func chainFLOPs(n *ir.Node, types map[string]ir.Type, reg *kernel.Registry) int64 {
	a, ok := n.Attrs["body"]
	if !ok || a.G == nil || len(a.G.Inputs) != 1 {
		return 0
	}
	body := *a.G
	in := *body.Inputs[0]
	in.Type = types[n.Input(0)]
	body.Inputs = []*ir.Value{&in}
	body.Types = map[string]ir.Type{}
	if err := ir.Infer(&body, reg, nil); err != nil {
		return 0
	}
	var total int64
	for _, m := range body.Nodes {
		total += layerFLOPs(m, body.Types, reg)
	}
	return total
}

// dotFLOPs counts the FLOPs of a Conv, MatMul or Gemm computed by n.
func dotFLOPs(base string, n *ir.Node, types map[string]ir.Type) int64 {
	out, ok := types[n.Outputs[0]].Static()
	if !ok {
		return 0
	}
	w, ok := types[n.Input(1)].Static()
	if !ok {
		return 0
	}
	outN := int64(tensor.NumElems(out))
	switch base {
	case "Conv":
		if len(w) < 2 {
			return 0
		}
		return 2 * outN * int64(tensor.NumElems(w[1:]))
	case "MatMul":
		a, ok := types[n.Input(0)].Static()
		if !ok || len(a) == 0 {
			return 0
		}
		return 2 * outN * int64(a[len(a)-1])
	case "Gemm":
		a, ok := types[n.Input(0)].Static()
		if !ok || len(a) != 2 {
			return 0
		}
		k := a[1]
		if n.Int("transA", 0) == 1 {
			k = a[0]
		}
		return 2 * outN * int64(k)
	}
	return 0
}

func budgetOf(maxBytes int64) int64 {
	if maxBytes <= 0 {
		return exec.DefaultMaxBytes
	}
	return maxBytes
}

// checkBudget refuses a plan one of whose values, at the profile's max
// shapes, is larger than the budget: a model whose constants claim 2^33
// elements fails at build, not when its first request allocates them.
func checkBudget(g *ir.Graph, types map[string]ir.Type, maxBytes int64) error {
	budget := budgetOf(maxBytes)
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			if b, ok := exec.TypeBytes(types[o]); ok && b > budget {
				return fmt.Errorf("compile: %s: %w: output %q is %v at the profile's max shapes, %d bytes, more than the plan's budget of %d (max_bytes)", n.Label(), exec.ErrBudget, o, types[o], b, budget)
			}
		}
	}
	return nil
}
