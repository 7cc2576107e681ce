package compile

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/q8"
	"github.com/vouchml/vouch/quant"
	"github.com/vouchml/vouch/tensor"
)

// The precision pass chooses each weighted layer's precision (Conv, Gemm
// and MatMul with constant float32 weights, fused or not) and rewrites the
// layer:
//
//   - fp16: the layer becomes a "vouch" F16 layer whose float32 constant
//     inputs are stored as float16 (round to nearest even); it computes in
//     float32 on the rounded weights.
//   - int8: the layer becomes a "vouch" Q8 layer: symmetric per-channel
//     int8 weights, the input quantized per tensor with the calibrated
//     scale, integer accumulation, float32 output (kernel/q8 documents the
//     arithmetic).
//   - fp32: unchanged.
//
// Options.Precision sets the default (best starts from int8);
// Quant.LayerPrecision overrides named layers. Layers that cannot take the
// precision (no kernel: transA Gemm, non-constant weights, depthwise or
// non-2-D Conv for int8, weights beyond float16's range for fp16), and
// grouped convolutions of fewer than 8 output channels a group and
// convolutions of reductions of at most 16 (minInt8ConvK) under int8
// (fp32's kernels are faster), stay fp32, and the log says why.
// A HardSigmoid and Mul that alone read an int8 layer's output (PyTorch's
// HardSwish) fold into its epilogue (fuseQ8HardSwish), with the same bits.
//
// Every decision leaves a line in the build log: each calibrated tensor's
// range, chosen threshold and clipped fraction (a warning from 1%), each
// int8 layer's output SQNR against fp32, the accuracy comparison, and,
// under best, each layer returned to fp32 and why.

// precisionResult is what the pass hands back to Build.
type precisionResult struct {
	layer  map[string]string // layer name -> precision
	report *buildlog.PrecisionReport
	cache  *quant.Cache // the scales used (written beside every int8 plan)
}

// clipWarn is the clipped fraction from which a warning is logged.
const clipWarn = 0.01

// weighted describes one layer the pass may rewrite.
type weighted struct {
	n      *ir.Node
	base   string // Conv, Gemm, MatMul
	x      string // the activation input
	reason string // why int8 is impossible ("" if possible)
	slow   string // why int8 is possible but kept fp32 unless asked for (--layer-precision, a QDQ model)
	fp16no string // why fp16 is impossible
}

func baseOf(n *ir.Node) string {
	if n.Domain == fused.Domain && n.OpType == fused.OpFused {
		return fused.BaseOf(n)
	}
	if n.Domain == "" {
		return n.OpType
	}
	return ""
}

// weightedLayers lists the layers with constant float32 weights.
func weightedLayers(g *ir.Graph) []*weighted {
	var out []*weighted
	for _, n := range g.Nodes {
		b := baseOf(n)
		if (b != "Conv" && b != "Gemm" && b != "MatMul") || len(n.Inputs) < 2 {
			continue
		}
		w, ok := g.Initializers[n.Inputs[1]]
		if !ok || w.DType != tensor.Float32 {
			continue
		}
		l := &weighted{n: n, base: b, x: n.Inputs[0]}
		l.reason = int8Blocker(g, n, b, w)
		if l.reason == "" && b == "Conv" && n.Int("group", 1) > 1 && w.Shape[1] == 1 {
			l.slow = int8DepthwiseSlow
		}
		out = append(out, l)
	}
	return out
}

// int8DepthwiseSlow is why a depthwise convolution the int8 kernel takes
// (kernel/q8 dw.go) stays fp32 by default: measured on the zoo's
// MobileNetV3-Large (1 thread, thread CPU time, alternating plans),
// its plan with the 15 depthwise layers in int8 (and 25 u8 edges) ran
// about 20% slower than with them at fp32 (6 u8 edges): fp32's depthwise
// kernels with their fused HardSwish are as fast per layer (per-layer
// microbenchmarks: int8 faster on 56×56 and 28×28 maps, slower at
// 112×112 stride 2 and on 7×7 maps). --layer-precision NAME=int8 and QDQ
// models take it.
const int8DepthwiseSlow = "depthwise convolution: int8 measured slower than fp32 here (--layer-precision NAME=int8 takes it)"

// minInt8ConvK is the longest reduction (input channels a group × kernel
// taps) of a convolution that int8 keeps at fp32: measured per layer on
// the zoo's MobileNetV3 (1 thread), 16-channel 1×1 convolutions at
// 112×112 ran slower in int8 than in fp32 (16→16: 113 vs 96 µs, 16→64:
// 322 vs ~233 µs, and at fp32 the latter fuses with its depthwise
// convolution), where the products are few and the passes over the
// activations (quantize, dequantize) are not; from 24 channels int8 is as
// fast or faster.
const minInt8ConvK = 16

// int8Blocker says why a layer cannot run in int8, or "".
func int8Blocker(g *ir.Graph, n *ir.Node, base string, w *tensor.Tensor) string {
	l, isFused := fused.LayerOf(n)
	isFused = isFused && n.OpType == fused.OpFused
	nbase := len(n.Inputs)
	if isFused && l.BaseInputs > 0 {
		nbase = l.BaseInputs
	}
	bias := ""
	if nbase > 2 {
		bias = n.Inputs[2]
	}
	if bias != "" {
		if b, ok := g.Initializers[bias]; !ok || b.DType != tensor.Float32 {
			return "bias is not a float32 constant"
		}
	}
	switch base {
	case "Conv":
		if len(w.Shape) != 4 {
			return "int8 convolutions are 2-D"
		}
		if grp := n.Int("group", 1); grp > 1 && w.Shape[1] == 1 {
			// kernel/q8's depthwise path (dw.go).
			st, dl := n.Ints("strides", []int64{1, 1}), n.Ints("dilations", []int64{1, 1})
			if int(grp) != w.Shape[0] || len(st) != 2 || len(dl) != 2 ||
				!q8.DepthwiseOK(w.Shape[2], w.Shape[3], int(st[0]), int(st[1]), int(dl[0]), int(dl[1])) {
				return fmt.Sprintf("depthwise convolution: the int8 kernel takes kernels up to 8×8, strides 1 and 2, no dilation, one output channel a group (W %v)", w.Shape)
			}
			if w.Len()/w.Shape[0] > 131072 {
				return "reduction too long for int32 accumulation"
			}
			return ""
		} else if grp > 1 && w.Shape[0]/int(grp) < 8 {
			// ResNeXt's groups of 4: the int8 direct kernels fill 16
			// channels a lane block, at least half of it; below that
			// fp32's grouped kernel (DwTapsZ) is faster. (RegNetY's
			// groups of 8 run the quad tiles: 1.3-1.6 -> 2.0-2.8x.)
			return fmt.Sprintf("grouped convolution of %d output channels a group: the int8 kernels need 8", w.Shape[0]/int(grp))
		}
		if k := w.Len() / w.Shape[0]; k <= minInt8ConvK {
			return fmt.Sprintf("reduction of %d per output: quantizing the input and dequantizing the output cost more than the int8 products save", k)
		}
		if w.Len()/w.Shape[0] > 131072 {
			return "reduction too long for int32 accumulation"
		}
	case "Gemm":
		if n.Int("transA", 0) != 0 {
			return "Gemm with transA"
		}
		if len(w.Shape) != 2 {
			return "Gemm weights not 2-D"
		}
		if bias != "" {
			N := w.Shape[0]
			if n.Int("transB", 0) == 0 {
				N = w.Shape[1]
			}
			b := g.Initializers[bias]
			if b.Len() != N && b.Len() != 1 {
				return "Gemm C does not broadcast as a per-column bias"
			}
		}
	case "MatMul":
		if len(w.Shape) != 2 {
			return "MatMul weights not 2-D"
		}
	}
	return ""
}

func precisionPass(s *state) error {
	o := s.opts
	res := &precisionResult{layer: map[string]string{}, report: &buildlog.PrecisionReport{Precision: o.Precision}}
	s.prec = res
	layers := weightedLayers(s.g)
	byName := map[string]*weighted{}
	for _, l := range layers {
		byName[l.n.Name] = l
	}
	for _, name := range quant.SortedNames(o.Quant.LayerPrecision) {
		if byName[name] == nil {
			var known []string
			for _, l := range layers {
				known = append(known, l.n.Name)
			}
			return fmt.Errorf("--layer-precision names %q, which is not a weighted layer of the built graph (layers: %s)", name, strings.Join(known, ", "))
		}
	}
	want := map[string]string{}
	for _, l := range layers {
		p := o.Precision
		if p == "best" {
			p = "int8"
		}
		why := "default precision " + o.Precision
		if s.qdq != nil && s.qdq.weights[l.n.Inputs[1]] != nil && s.qdq.act[l.x] > 0 {
			// A pre-quantized layer runs in int8 at any build precision.
			p, why = "int8", "QDQ model"
		}
		if lp, ok := o.Quant.LayerPrecision[l.n.Name]; ok {
			p, why = lp, "--layer-precision"
		}
		switch {
		case p == "int8" && l.reason != "":
			s.log.Info("precision", "kept-fp32", map[string]any{"layer": l.n.Name, "wanted": "int8", "reason": l.reason})
			res.report.Layers = append(res.report.Layers, buildlog.LayerPrecision{Layer: l.n.Name, Precision: "fp32", Reason: l.reason})
			p = "fp32"
		case p == "int8" && l.slow != "" && why != "--layer-precision" && why != "QDQ model":
			s.log.Info("precision", "kept-fp32", map[string]any{"layer": l.n.Name, "wanted": "int8", "reason": l.slow})
			res.report.Layers = append(res.report.Layers, buildlog.LayerPrecision{Layer: l.n.Name, Precision: "fp32", Reason: l.slow})
			p = "fp32"
		case p == "fp16":
			if r := fp16Blocker(s.g, l.n); r != "" {
				s.log.Info("precision", "kept-fp32", map[string]any{"layer": l.n.Name, "wanted": "fp16", "reason": r})
				res.report.Layers = append(res.report.Layers, buildlog.LayerPrecision{Layer: l.n.Name, Precision: "fp32", Reason: r})
				p = "fp32"
			}
		}
		want[l.n.Name] = p
		if p != "fp32" {
			s.log.Info("precision", "chosen", map[string]any{"layer": l.n.Name, "precision": p, "reason": why})
		}
	}
	anyReduced := false
	for _, p := range want {
		if p != "fp32" {
			anyReduced = true
		}
	}
	if !anyReduced {
		s.log.Info("precision", "all-fp32", map[string]any{"layers": len(layers)})
		res.report = nil
		return nil
	}
	ref := cloneGraph(s.g)
	var scales map[string]float32
	needInt8 := false
	for _, p := range want {
		needInt8 = needInt8 || p == "int8"
	}
	if needInt8 {
		var err error
		if scales, err = calibrate(s, ref, layers, want, res); err != nil {
			return err
		}
	}
	conv := &converter{g: ref, scales: scales, qdq: s.qdq, wbits: s.opts.Quant.weightBits()}
	if needInt8 && conv.wbits != 8 {
		res.report.WeightBits = conv.wbits
	}
	current := conv.apply(want)
	if err := evaluate(s, ref, conv, layers, want, &current, res); err != nil {
		return err
	}
	// Install the chosen graph.
	s.g.Nodes = current.Nodes
	s.g.Initializers = current.Initializers
	fuseQ8HardSwish(s.g, s.log)
	for _, l := range layers {
		res.layer[l.n.Name] = want[l.n.Name]
	}
	sort.Slice(res.report.Layers, func(i, j int) bool { return res.report.Layers[i].Layer < res.report.Layers[j].Layer })
	return nil
}

// fp16Blocker says why a layer's weights cannot be stored as float16.
func fp16Blocker(g *ir.Graph, n *ir.Node) string {
	for _, in := range n.Inputs {
		t, ok := g.Initializers[in]
		if !ok || t.DType != tensor.Float32 {
			continue
		}
		for _, v := range t.Data.([]float32) {
			if math.Abs(float64(v)) > 65504 {
				return fmt.Sprintf("weight %s holds %g, beyond float16's range", in, v)
			}
		}
	}
	return ""
}

// cloneGraph copies g's node list (nodes are copied) and initializer map.
func cloneGraph(g *ir.Graph) *ir.Graph {
	c := *g
	c.Nodes = make([]*ir.Node, len(g.Nodes))
	for i, n := range g.Nodes {
		m := *n
		c.Nodes[i] = &m
	}
	c.Initializers = make(map[string]*tensor.Tensor, len(g.Initializers))
	for k, v := range g.Initializers {
		c.Initializers[k] = v
	}
	return &c
}

// finite clamps ±Inf (and NaN) for JSON.
func finite(v float64) float64 {
	switch {
	case math.IsNaN(v):
		return 0
	case v > 999:
		return 999
	case v < -999:
		return -999
	}
	return math.Round(v*100) / 100
}
