package engine

import (
	"fmt"
	"strings"

	"github.com/vouchml/vouch/cuda/fast"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// INT8 fast layers (issue 19). A Conv or Gemm that the 16-bit fast
// kernels take (fastConv, fastGemm) runs on fast_int8.cu's kernels when
// FastOptions.Scales holds the activation scale of its data input:
// Scales[n.Inputs[0]], the value name the layer reads, which is the
// tensor name compile's calibration gives the scale of an int8 layer's
// input (the precision pass's weighted.x, compile.CalibrateInputs, a
// calibration cache's lines). A ConvChain's body convolutions read the
// graph's value names too, each looked up on its own. Without a scale, or
// with a reduction past fast.MaxK8, the layer keeps its exact kernel and
// the note says why. The tile is the 16-bit kernels' (fast.ChooseTile).

// fastPrec reports whether op has a fast kernel in precision p (the
// 16-bit kernels' ops, or int8's conv and gemm).
func fastPrec(p plan.Precision, op string) bool {
	return fast.Supported(p) || p == plan.Int8 && (op == "conv" || op == "gemm")
}

// fastInt8For names n's INT8 kernel, or says why it has none (reason ""
// with no kernel: an op int8 is not about).
func fastInt8For(n *ir.Node, g *ir.Graph, types map[string]ir.Type, pl plan.Placement, scales map[string]float32) (kernel, reason string) {
	base := fused.BaseOf(n)
	switch {
	case pl.Backend != plan.BackendCUDA:
		return "", "on the CPU (" + pl.Reason + "): no fast kernel"
	case base == "Conv":
		t, why := fastConv(n, g, types)
		if why == "" {
			why = int8Input(n, g, scales)
		}
		if why != "" {
			return "", why
		}
		return fastName(plan.Int8, "conv", t.String()), ""
	case base == "Gemm":
		t, why := fastGemm(n, g, types)
		if why == "" {
			why = int8Input(n, g, scales)
		}
		if why != "" {
			return "", why
		}
		return fastName(plan.Int8, "gemm", t.String()), ""
	case base == "MatMul":
		return "", "int8 has no MatMul kernel (fast_int8.cu runs Conv and Gemm): exact"
	case n.OpType == "ConvChain":
		body := n.Attrs["body"]
		if body == nil || body.G == nil {
			return "", "ConvChain without a body"
		}
		bt := chainTypes(n, types)
		var tiles, whys []string
		nfast := 0
		for _, b := range body.G.Nodes {
			if fused.BaseOf(b) != "Conv" {
				tiles = append(tiles, "exact")
				continue
			}
			t, why := fastConv(b, body.G, bt)
			if why == "" {
				why = int8Input(b, body.G, scales)
			}
			if why != "" {
				tiles = append(tiles, "exact")
				whys = append(whys, b.Name+": "+why)
				continue
			}
			tiles = append(tiles, t.String())
			nfast++
		}
		if nfast == 0 {
			return "", "no body convolution has an int8 kernel (" + strings.Join(whys, "; ") + ")"
		}
		return fastName(plan.Int8, "conv", "chain "+strings.Join(tiles, ",")), ""
	}
	_, why := fastKernelFor(n, g, types, plan.Int8, pl.Kernel)
	return "", why
}

// int8Input checks what int8 adds to a layer fastConv or fastGemm took:
// its input's scale and the reduction's length.
func int8Input(n *ir.Node, g *ir.Graph, scales map[string]float32) string {
	w := g.Initializers[n.Input(1)]
	if k := int8K(n, w); k > fast.MaxK8 {
		return fmt.Sprintf("reduction of %d (int8's int32 sums take at most %d): exact", k, fast.MaxK8)
	}
	s, ok := scales[n.Input(0)]
	if !ok {
		return fmt.Sprintf("no int8 scale for its input %q (FastOptions.Scales, from the calibration): exact", n.Input(0))
	}
	if err := fast.CheckScale(s); err != nil {
		return fmt.Sprintf("input %q: %v: exact", n.Input(0), err)
	}
	return ""
}

// int8K is the reduction length of a Conv (C*KH*KW) or Gemm (K) with
// weights w.
func int8K(n *ir.Node, w *tensor.Tensor) int {
	if fused.BaseOf(n) == "Gemm" {
		if n.Int("transB", 0) != 0 {
			return w.Shape[1]
		}
		return w.Shape[0]
	}
	return w.Len() / w.Shape[0]
}

// int8Weights quantizes the weights of an INT8 Conv or Gemm layer per
// output channel (fast.QuantizeWeights): a Conv's [M][C][KH][KW], a
// Gemm's B as its N output features of K (transB or not).
func int8Weights(n *ir.Node, g *ir.Graph) (fast.Int8Weights, error) {
	w := g.Initializers[n.Input(1)]
	if w == nil || w.DType != tensor.Float32 || len(w.Shape) < 2 {
		return fast.Int8Weights{}, fmt.Errorf("engine: %s: int8 weights %q are not a constant float32 tensor", n.Name, n.Input(1))
	}
	d := w.Data.([]float32)
	switch fused.BaseOf(n) {
	case "Conv":
		K := w.Len() / w.Shape[0]
		return fast.QuantizeWeights(d, w.Shape[0], K, K, 1)
	case "Gemm":
		if len(w.Shape) != 2 {
			break
		}
		if n.Int("transB", 0) != 0 { // B is [N][K]
			return fast.QuantizeWeights(d, w.Shape[0], w.Shape[1], w.Shape[1], 1)
		}
		// B is [K][N]: output feature j is column j.
		return fast.QuantizeWeights(d, w.Shape[1], w.Shape[0], 1, w.Shape[1])
	}
	return fast.Int8Weights{}, fmt.Errorf("engine: %s: a %s layer has no int8 kernel", n.Name, n.OpType)
}
