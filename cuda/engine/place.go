// Package engine runs a GPU plan: the layers the plan places on "cuda" with
// the exact-mode kernels of package cuda/exact, every other layer with
// vouch's CPU kernels inside the same run (its inputs downloaded, its
// outputs uploaded when a GPU layer reads them). Exact mode performs the
// CPU contract's arithmetic in the same order, so a run's outputs have the
// bits the same plan gives on the CPU.
//
// Place decides, at build time and without a GPU, where each layer runs;
// the plan records it, and a Program follows the record: it never moves a
// layer. A layer placed on "cuda" whose operands turn out not to fit its
// kernel (an unexpected shape) fails the run with an error naming the
// layer, rather than running somewhere the plan does not say.
package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// Place returns every top-level layer's placement, in g's order. types
// are the compiler's inferred value types (may be nil: a rule that needs a
// type then keeps the layer on the CPU).
func Place(g *ir.Graph, types map[string]ir.Type) []plan.Placement {
	out := make([]plan.Placement, 0, len(g.Nodes))
	for i, n := range g.Nodes {
		name := n.Name
		if name == "" {
			name = fmt.Sprintf("%s_%d", n.OpType, i) // plan.Encode's name for it
		}
		k, why := kernelFor(n, g, types, false)
		if why == "" {
			out = append(out, plan.Placement{Layer: name, Backend: plan.BackendCUDA, Kernel: k})
		} else {
			out = append(out, plan.Placement{Layer: name, Backend: plan.BackendCPU, Reason: why})
		}
	}
	return out
}

// kernelFor names the GPU kernels that run n, or says why none does.
// chain is set inside a ConvChain's body, whose Adds are residuals by the
// chain's construction (kernel/fused.ConvChain).
func kernelFor(n *ir.Node, g *ir.Graph, types map[string]ir.Type, chain bool) (kernel, reason string) {
	if n.Domain != "" && n.Domain != "vouch" {
		return "", fmt.Sprintf("domain %q has no GPU kernels", n.Domain)
	}
	// The families first: a family may run a layer with a subgraph (an
	// Elementwise layer's body).
	if k, why, ok := extraKernel(n, g, types); ok {
		return k, why
	}
	switch n.OpType {
	case "Clip", "Relu", "MaxPool", "AveragePool", "GlobalAveragePool", "Conv", "Gemm", "MatMul", "Softmax", "LayerNormalization":
		// These kernels take float32 only: an integer Clip or MaxPool
		// stays on the CPU (found by the ONNX node tests on the GPU).
		if t, ok := types[n.Input(0)]; ok && t.DType != tensor.Float32 {
			return "", fmt.Sprintf("%s of %v (the GPU kernels take float32)", n.OpType, t.DType)
		}
	}
	if n.OpType == "Gemm" && n.Input(2) != "" {
		// The GPU adds C as a full [M, N] matrix or a row of N; a scalar
		// or one-element C broadcast stays on the CPU.
		t, ok := types[n.Input(2)]
		if c := g.Initializers[n.Input(2)]; c != nil {
			t, ok = ir.TensorType(c), true
		}
		single := ok && t.RankKnown && len(t.Shape) <= 2
		for _, d := range t.Shape {
			single = single && d.Known() && d.Value == 1
		}
		if single || !ok || !t.RankKnown {
			return "", "Gemm whose C is a scalar, a single element or of unknown rank (the GPU adds C as [M, N] or a row of N)"
		}
	}
	switch n.OpType {
	case fused.OpFused:
		return fusedKernel(n, g, types, chain)
	case fused.ExpandDepthwise:
		a, b, err := edwParts(n)
		if err != nil {
			return "", err.Error()
		}
		ka, why := kernelFor(a, g, types, false)
		if why != "" {
			return "", "expansion: " + why
		}
		kb, why := kernelFor(b, g, types, false)
		if why != "" {
			return "", "depthwise: " + why
		}
		return ka + ";" + kb, ""
	case "ConvChain":
		body := n.Attrs["body"]
		if body == nil || body.G == nil {
			return "", "ConvChain without a body"
		}
		for _, b := range body.G.Nodes {
			if _, why := kernelFor(b, body.G, body.G.Types, true); why != "" {
				return "", fmt.Sprintf("body layer %s: %s", b.Name, why)
			}
		}
		return "chain(" + kernels.Conv2D + ")", ""
	case "Attention":
		return attentionKernels(n)
	case "MatMul":
		if why := matmulOK(n, types); why != "" {
			return "", why
		}
		return kernels.SGEMM, ""
	case "Div":
		if len(n.Inputs) != 2 || !floatRank(types, n.Input(0)) || !floatRank(types, n.Input(1)) {
			return "", "Div of other than two float32 operands of known rank (at most 6)"
		}
		return kernels.DivBcast, ""
	case "Conv":
		if why := convOK(n); why != "" {
			return "", why
		}
		return kernels.Conv2D, ""
	case "Gemm":
		if why := gemmOK(n); why != "" {
			return "", why
		}
		return kernels.SGEMM + "+" + kernels.Affine, ""
	case "Relu":
		return kernels.Unary, ""
	case "Clip":
		if why := clipOK(n, n.Version, 1, g); why != "" {
			return "", why
		}
		return kernels.Clip, ""
	case "Add":
		if len(n.Inputs) != 2 {
			return "", "Add without two operands"
		}
		if t, ok := types[n.Input(0)]; ok && t.DType == tensor.Float32 && sameStatic(types, n.Input(0), n.Input(1)) {
			return kernels.Add, ""
		}
		if !floatRank(types, n.Input(0)) || !floatRank(types, n.Input(1)) {
			return "", "Add of other than float32 operands of known rank (at most 6)"
		}
		return kernels.AddBcast, ""
	case "MaxPool":
		if len(n.Outputs) > 1 && n.Outputs[1] != "" {
			return "", "MaxPool with an Indices output"
		}
		if why := poolOK(n); why != "" {
			return "", why
		}
		return kernels.MaxPool2D, ""
	case "AveragePool":
		if why := poolOK(n); why != "" {
			return "", why
		}
		if d := n.Ints("dilations", nil); slices.ContainsFunc(d, func(v int64) bool { return v != 1 }) {
			return "", "AveragePool with dilations"
		}
		if p := n.Ints("pads", nil); p != nil && (len(p) != 4 || p[0] != p[2] || p[1] != p[3]) {
			return "", fmt.Sprintf("AveragePool pads %v (asymmetric)", p)
		}
		return kernels.AvgPool2D, ""
	case "GlobalAveragePool":
		return kernels.GlobalAvg, ""
	case "Flatten":
		return "view", ""
	case "Reshape":
		if n.Version < 5 {
			return "", "Reshape before opset 5 (a shape attribute)"
		}
		if t, ok := types[n.Input(0)]; !ok || t.DType != tensor.Float32 {
			return "", "Reshape of other than float32 (integer shape arithmetic stays on the host)"
		}
		return "view", ""
	case "Resize":
		if n.String("mode", "nearest") != "nearest" {
			return "", fmt.Sprintf("Resize mode %s (the GPU runs nearest)", n.String("mode", "nearest"))
		}
		if n.String("coordinate_transformation_mode", "") == "tf_crop_and_resize" {
			return "", "Resize tf_crop_and_resize (extrapolated values)"
		}
		if t, ok := types[n.Input(0)]; !ok || t.DType != tensor.Float32 {
			return "", "Resize of other than float32"
		}
		for _, c := range n.Inputs[1:] {
			if c != "" && g.Initializers[c] == nil {
				return "", fmt.Sprintf("Resize whose input %s is not a constant", c)
			}
		}
		return kernels.Gather + "(map)", ""
	case "Transpose", "Slice", "Split", "Concat", "Gather":
		if n.OpType == "Gather" && len(n.Inputs) == 2 && g.Initializers[n.Inputs[1]] == nil {
			// Indices computed at run time: read on the host, uploaded,
			// the gather kernel.
			t, ok := types[n.Inputs[1]]
			if !ok || (t.DType != tensor.Int64 && t.DType != tensor.Int32) || !floatRank(types, n.Inputs[0]) {
				return "", "Gather of other than float32 data by integer indices (integer shape arithmetic stays on the host)"
			}
			return kernels.Gather, ""
		}
		if why := moveOK(n, g, types); why != "" {
			return "", why
		}
		return kernels.Copy, ""
	case "LayerNormalization":
		if len(n.Outputs) > 1 && (n.Outputs[1] != "" || len(n.Outputs) > 2 && n.Outputs[2] != "") {
			return "", "LayerNormalization with Mean or InvStdDev outputs"
		}
		if ax := n.Int("axis", -1); ax != -1 {
			if t, ok := types[n.Input(0)]; !ok || !t.RankKnown || ax != int64(len(t.Shape)-1) {
				return "", "LayerNormalization over more than the last axis"
			}
		}
		return kernels.LayerNorm, ""
	case "Softmax":
		if n.Version < 13 {
			return "", "Softmax before opset 13 (2-D coercion)"
		}
		if ax := n.Int("axis", -1); ax != -1 {
			if t, ok := types[n.Input(0)]; !ok || !t.RankKnown || ax != int64(len(t.Shape)-1) {
				return "", "Softmax over an axis other than the last"
			}
		}
		return kernels.Softmax, ""
	}
	if intsOnly(n, types) {
		return "", fmt.Sprintf("%s of integers: shape arithmetic stays on the host", n.OpType)
	}
	return "", fmt.Sprintf("no exact GPU kernel for %s yet", n.OpType)
}

// intsOnly reports whether every input and output of n is an integer
// value of known type (shape arithmetic, no float data).
func intsOnly(n *ir.Node, types map[string]ir.Type) bool {
	for _, v := range append(slices.Clone(n.Inputs), n.Outputs...) {
		if v == "" {
			continue
		}
		t, ok := types[v]
		if !ok || (t.DType != tensor.Int64 && t.DType != tensor.Int32) {
			return false
		}
	}
	return true
}

// fusedKernel covers kernel/fused's Fused layers over Conv and Gemm with a
// residual Add at most and Relu or no activation.
func fusedKernel(n *ir.Node, g *ir.Graph, types map[string]ir.Type, chain bool) (string, string) {
	h, _ := fused.LayerOf(n)
	layout := []int{h.BaseInputs, h.Adds, h.ActInputs}
	if h.Base == "MatMul" && h.Check(len(n.Inputs)) == nil {
		return matmulFused(n, h, g, types)
	}
	if h.Check(len(n.Inputs)) != nil || h.Adds > 1 {
		return "", fmt.Sprintf("fused layout %v (more than one Add)", layout)
	}
	act := h.Activation
	switch act {
	case "", "Relu":
		if h.ActInputs != 0 {
			return "", fmt.Sprintf("fused layout %v: activation inputs", layout)
		}
	case "Clip":
		if why := clipOK(n, h.ActVersion, h.BaseInputs+h.Adds, g); why != "" {
			return "", "fused " + why
		}
	default:
		return "", fmt.Sprintf("fused activation %s has no GPU epilogue yet", act)
	}
	base := &ir.Node{OpType: h.Base, Version: h.BaseVersion, Attrs: n.Attrs}
	k := ""
	switch base.OpType {
	case "Conv":
		if why := convOK(base); why != "" {
			return "", why
		}
		if h.BaseInputs < 2 || h.BaseInputs > 3 {
			return "", fmt.Sprintf("fused Conv with %d inputs", h.BaseInputs)
		}
		k = kernels.Conv2D
	case "Gemm":
		if why := gemmOK(base); why != "" {
			return "", why
		}
		if h.BaseInputs != 3 || h.Adds != 0 {
			return "", "fused Gemm without a bias or with an Add"
		}
		k = kernels.SGEMM + "+" + kernels.Affine
	default:
		return "", fmt.Sprintf("fused %s has no GPU kernel yet", base.OpType)
	}
	if h.Adds == 1 {
		// The Add must be a same-shape residual (the conv epilogue's).
		if !chain && !sameStatic(types, n.Input(h.BaseInputs), n.Outputs[0]) {
			return "", "fused Add that broadcasts (or shapes unknown at build time)"
		}
		k += "+residual"
	}
	switch act {
	case "Relu":
		k += "+" + kernels.Unary + "(Relu)"
	case "Clip":
		k += "+" + kernels.Clip
	}
	return k, ""
}

// clipOK checks a Clip's bounds: before opset 11 attributes, from 11 the
// inputs from first on (at most two), each absent or a float32 weight of
// one element.
// matmulFused covers a fused MatMul of a float32 value by a 2-D matrix:
// the chain (kernels.SGEMM, batches folded into rows), then its Adds in
// order (a bias over the last axis, kernels.Affine with scale 1, or an
// operand of the output's shape, kernels.Add), then Relu, Clip or Gelu
// (kernels.Unary) as their own passes: kernel/fused's epilogue does the
// same operations element by element (y = acc + b, then + r, then the
// activation).
func matmulFused(n *ir.Node, h fused.Layer, g *ir.Graph, types map[string]ir.Type) (string, string) {
	if h.BaseInputs != 2 {
		return "", fmt.Sprintf("fused MatMul with %d inputs", h.BaseInputs)
	}
	if why := matmulOK(n, types); why != "" {
		return "", why
	}
	k := kernels.SGEMM
	for i := range h.Adds {
		r := n.Input(2 + i)
		switch {
		case sameStatic(types, r, n.Outputs[0]):
			k += "+" + kernels.Add
		case i == 0 && rowBias(types, r, n.Outputs[0]):
			k += "+" + kernels.Affine
		case floatRank(types, r):
			k += "+" + kernels.AddBcast
		default:
			return "", fmt.Sprintf("fused MatMul's Add %d of other than a float32 operand of known rank (at most 6)", i+1)
		}
	}
	switch h.Activation {
	case "":
	case "Relu":
		k += "+" + kernels.Unary + "(Relu)"
	case "Clip":
		if why := clipOK(n, h.ActVersion, h.BaseInputs+h.Adds, g); why != "" {
			return "", "fused " + why
		}
		k += "+" + kernels.Clip
	case "Gelu":
		if h.ActInputs != 0 {
			return "", "fused Gelu with inputs"
		}
		switch a := n.String(fused.ActPrefix+"approximate", "none"); a {
		case "none", "tanh":
			k += "+" + kernels.Unary + "(Gelu " + a + ")"
		default:
			return "", fmt.Sprintf("fused Gelu approximate %q", a)
		}
	default:
		return "", fmt.Sprintf("fused activation %s has no GPU epilogue yet", h.Activation)
	}
	return k, ""
}

// attentionKernels admits a vouch Attention layer (kernel/fused's chain)
// whose body is float32 MatMuls, Divs, Adds and last-axis Softmaxes (the
// scores and the weighted sum): the GPU runs the body's nodes one after
// the other, the operations of the nodes the layer replaced. The body
// carries no types, so its shapes are checked at run time.
func attentionKernels(n *ir.Node) (string, string) {
	body := n.Attrs["body"]
	if body == nil || body.G == nil {
		return "", "Attention without a body"
	}
	var ks []string
	for _, b := range body.G.Nodes {
		if b.Domain != "" {
			return "", fmt.Sprintf("Attention body layer %s of domain %q", b.Name, b.Domain)
		}
		switch b.OpType {
		case "MatMul":
			ks = append(ks, kernels.SGEMM)
		case "Div":
			ks = append(ks, kernels.DivBcast)
		case "Add":
			ks = append(ks, kernels.AddBcast)
		case "Softmax":
			if b.Version < 13 || b.Int("axis", -1) != -1 {
				return "", fmt.Sprintf("Attention body Softmax (opset %d, axis %d) not over the last axis", b.Version, b.Int("axis", -1))
			}
			ks = append(ks, kernels.Softmax)
		default:
			return "", fmt.Sprintf("Attention body layer %s (%s) has no GPU kernel yet", b.Name, b.OpType)
		}
	}
	return "body(" + strings.Join(ks, ",") + ")", ""
}

// matmulOK admits a float32 MatMul of A (rank 2 or more) by a 2-D B (A's
// batches fold into its rows, kernel/nn's bUnbatched case), or of A and B
// of one rank >= 3 (their batch dimensions must then be equal at run
// time: one product per batch); each output one chain over k.
func matmulOK(n *ir.Node, types map[string]ir.Type) string {
	ta, ok1 := types[n.Input(0)]
	tb, ok2 := types[n.Input(1)]
	if !ok1 || !ok2 || !ta.RankKnown || !tb.RankKnown {
		return "MatMul operand ranks unknown at build time"
	}
	if ta.DType != tensor.Float32 || tb.DType != tensor.Float32 {
		return "MatMul of other than float32"
	}
	if len(ta.Shape) < 2 || len(tb.Shape) != 2 && (len(tb.Shape) != len(ta.Shape) || len(ta.Shape) < 3) {
		return fmt.Sprintf("MatMul of rank %d by rank %d (the GPU takes rank >= 2 by a 2-D matrix, or equal ranks >= 3)", len(ta.Shape), len(tb.Shape))
	}
	return ""
}

// rowBias reports whether r's static shape is [N] or [1, ..., N] with N
// the last dimension of out (a bias that broadcasts over every other axis).
func rowBias(types map[string]ir.Type, r, out string) bool {
	tr, ok1 := types[r]
	to, ok2 := types[out]
	if !ok1 || !ok2 || !tr.RankKnown || !to.RankKnown || len(tr.Shape) == 0 || len(to.Shape) == 0 {
		return false
	}
	sr, ok := tr.Static()
	if !ok {
		return false
	}
	last := to.Shape[len(to.Shape)-1]
	if !last.Known() || int(last.Value) != sr[len(sr)-1] || len(sr) > len(to.Shape) {
		return false
	}
	return tensor.NumElems(sr) == sr[len(sr)-1]
}

func clipOK(n *ir.Node, version int64, first int, g *ir.Graph) string {
	if version > 0 && version < 11 {
		return ""
	}
	if len(n.Inputs)-first > 2 {
		return "Clip with more than two bounds"
	}
	for _, b := range n.Inputs[min(first, len(n.Inputs)):] {
		if b == "" {
			continue
		}
		if t, ok := g.Initializers[b]; !ok || t.DType != tensor.Float32 || t.Len() != 1 {
			return "Clip with a bound that is not a float32 constant"
		}
	}
	return ""
}

// moveOK admits a data-movement layer (exact.Copy): float32 values of
// known rank up to exact.MaxCopyRank, and its sizes (Slice's starts, ends,
// axes and steps, Split's sizes, Gather's indices: at most 64) constants,
// so that a captured graph never holds a value read on the host.
func moveOK(n *ir.Node, g *ir.Graph, types map[string]ir.Type) string {
	data := n.Inputs[:1]
	consts := n.Inputs[1:]
	switch n.OpType {
	case "Concat":
		data, consts = n.Inputs, nil
	case "Transpose":
		consts = nil
	case "Slice":
		if n.Version < 10 {
			consts = nil
		}
	case "Split":
		if n.Version < 13 {
			consts = nil
		}
	}
	if len(data) == 0 || data[0] == "" {
		return n.OpType + " without data"
	}
	for _, d := range data {
		t, ok := types[d]
		if !ok || t.DType != tensor.Float32 || !t.RankKnown {
			return n.OpType + " of other than float32 values of known rank (integer shape arithmetic stays on the host)"
		}
		if len(t.Shape) > exact.MaxCopyRank && n.OpType != "Gather" {
			return fmt.Sprintf("%s of a rank-%d value (the GPU copy walks at most %d axes)", n.OpType, len(t.Shape), exact.MaxCopyRank)
		}
	}
	for _, c := range consts {
		if c == "" {
			continue
		}
		t, ok := g.Initializers[c]
		if !ok || (t.DType != tensor.Int64 && t.DType != tensor.Int32) {
			return fmt.Sprintf("%s whose input %s is not an integer constant", n.OpType, c)
		}
		if n.OpType == "Gather" && t.Len() > 64 {
			return fmt.Sprintf("Gather of %d constant indices (the GPU copies at most 64, one copy each)", t.Len())
		}
	}
	if n.OpType == "Gather" && len(n.Inputs) < 2 {
		return "Gather without indices"
	}
	return ""
}

// floatRank reports whether v is float32 of known rank, at most
// exact.MaxCopyRank (the broadcasting kernels' geometry).
func floatRank(types map[string]ir.Type, v string) bool {
	t, ok := types[v]
	return ok && t.DType == tensor.Float32 && t.RankKnown && len(t.Shape) <= exact.MaxCopyRank
}

func convOK(n *ir.Node) string {
	if n.String("auto_pad", "NOTSET") != "NOTSET" {
		return "Conv with auto_pad"
	}
	if k := n.Ints("kernel_shape", nil); k != nil && len(k) != 2 {
		return fmt.Sprintf("a %d-D Conv", len(k))
	}
	if p := n.Ints("pads", nil); p != nil && (len(p) != 4 || p[0] != p[2] || p[1] != p[3]) {
		return fmt.Sprintf("Conv pads %v (asymmetric)", p)
	}
	if s := n.Ints("strides", nil); s != nil && len(s) != 2 {
		return "Conv strides"
	}
	if d := n.Ints("dilations", nil); d != nil && len(d) != 2 {
		return "Conv dilations"
	}
	return ""
}

func gemmOK(n *ir.Node) string {
	if n.Int("transA", 0) != 0 || n.Float("alpha", 1) != 1 || n.Float("beta", 1) != 1 {
		return "Gemm with transA, alpha or beta"
	}
	return ""
}

func poolOK(n *ir.Node) string {
	k := n.Ints("kernel_shape", nil)
	switch {
	case len(k) != 2:
		return fmt.Sprintf("a %d-D pool", len(k))
	case n.String("auto_pad", "NOTSET") != "NOTSET":
		return "pool with auto_pad"
	case n.Int("ceil_mode", 0) != 0 || n.Int("storage_order", 0) != 0:
		return "pool with ceil_mode or storage_order"
	}
	return ""
}

func sameStatic(types map[string]ir.Type, a, b string) bool {
	ta, ok1 := types[a]
	tb, ok2 := types[b]
	if !ok1 || !ok2 {
		return false
	}
	sa, ok1 := ta.Static()
	sb, ok2 := tb.Static()
	if ok1 && ok2 {
		return slices.Equal(sa, sb)
	}
	// Symbolic dimensions (the batch) compare by name.
	return ta.RankKnown && tb.RankKnown && ta.String() == tb.String()
}

// edwParts rebuilds an ExpandDepthwise layer's two parts
// (fused.ExpandDepthwiseParts): a writes the value n.Name+"/a", which b
// reads; b writes n's output. The GPU runs them one after the other, the
// operations of the two layers.
func edwParts(n *ir.Node) (a, b *ir.Node, err error) { return fused.ExpandDepthwiseParts(n) }
