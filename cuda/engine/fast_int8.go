package engine

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vouchml/vouch/cuda/exact"
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
//
// The plan carries the scale in the kernel name, after the tile: "x="
// and the float32's IEEE bits as 8 lowercase hex digits (the calibration
// cache's notation), e.g. fast.int8.conv(128x64 x=3c23d70a), and in a
// ConvChain's list per body convolution. At Open the weights are
// quantized, packed and uploaded once with their per-channel multipliers;
// a run quantizes each INT8 layer's input into a scratch buffer of the
// run's (fast.Int8Scratch) and runs the GEMM.

// int8Tile is an INT8 layer's tile and scale as its kernel name writes
// them.
func int8Tile(t fast.Tile, scale float32) string {
	return fmt.Sprintf("%s x=%08x", t, math.Float32bits(scale))
}

// parseFastTile reads a fast kernel name's tile: for int8 the tile and
// the scale int8Tile wrote, else a tile alone (scale 0).
func parseFastTile(p plan.Precision, s string) (fast.Tile, float32, error) {
	if p != plan.Int8 {
		t, err := fast.ParseTile(s)
		return t, 0, err
	}
	ts, hex, ok := strings.Cut(s, " x=")
	bits, err := strconv.ParseUint(hex, 16, 32)
	if !ok || err != nil || len(hex) != 8 {
		return fast.Tile{}, 0, fmt.Errorf("int8 tile %q: want TILE x=SCALEBITS (8 hex digits)", s)
	}
	t, err := fast.ParseTile(ts)
	if err != nil {
		return fast.Tile{}, 0, err
	}
	sc := math.Float32frombits(uint32(bits))
	if err := fast.CheckScale(sc); err != nil {
		return fast.Tile{}, 0, err
	}
	return t, sc, nil
}

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
		return fastName(plan.Int8, "conv", int8Tile(t, scales[n.Input(0)])), ""
	case base == "Gemm":
		t, why := fastGemm(n, g, types)
		if why == "" {
			why = int8Input(n, g, scales)
		}
		if why != "" {
			return "", why
		}
		return fastName(plan.Int8, "gemm", int8Tile(t, scales[n.Input(0)])), ""
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
			tiles = append(tiles, int8Tile(t, scales[b.Input(0)]))
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

// int8MultKey is where a layer's multipliers float32(s_x * s_w[m]) are
// kept: by weights and scale (the packed weights by weights alone).
func int8MultKey(g *ir.Graph, wn string, scale float32) wkey {
	return wkey{g, fmt.Sprintf("%s\x00int8 mult %08x", wn, math.Float32bits(scale))}
}

// packInt8 quantizes, packs and uploads an INT8 layer's weights and its
// multipliers, and loads fast_int8.cu's kernels on first use.
func (pr *Program) packInt8(g *ir.Graph, n *ir.Node, sp fastSpec) error {
	if pr.fe8 == nil {
		fe8, err := fast.LoadInt8(pr.e.Mod)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrPlan, err)
		}
		pr.fe8 = fe8
	}
	wn := n.Input(1)
	wk, mk := packKey(g, wn, plan.Int8), int8MultKey(g, wn, sp.scale)
	if pr.weights[wk] != nil && pr.weights[mk] != nil {
		return nil
	}
	w, err := int8Weights(n, g)
	if err != nil {
		return err
	}
	var packed []byte
	if sp.op == "conv" {
		sh := g.Initializers[wn].Shape
		if len(sh) != 4 {
			return fmt.Errorf("fast int8 conv: weights of shape %v", sh)
		}
		if packed, err = w.PackConv(exact.ConvGeom{M: sh[0], C: sh[1], KH: sh[2], KW: sh[3]}); err != nil {
			return err
		}
	} else {
		packed = w.PackGemm()
	}
	_, bufs, err := fast.UploadInt8(pr.c, packed, w.Mult(sp.scale), sp.scale)
	if err != nil {
		for _, b := range bufs {
			b.Free()
		}
		return err
	}
	if old := pr.weights[wk]; old != nil {
		bufs[0].Free() // the same bytes, packed for another scale's layer
	} else {
		pr.weights[wk] = bufs[0]
	}
	pr.weights[mk] = bufs[1]
	return nil
}

// int8Layer is the running layer's device weights.
func (s *state) int8Layer(w uint64, wn string) (fast.Int8Layer, error) {
	m := s.pr.weights[int8MultKey(s.g, wn, s.cur.scale)]
	if m == nil {
		return fast.Int8Layer{}, fmt.Errorf("fast int8: no multipliers for %q", wn)
	}
	return fast.Int8Layer{W: w, Mult: m.Ptr, Scale: s.cur.scale}, nil
}

// int8Conv runs a Conv layer on fast_int8.cu: w its packed weights (wn
// their name), the input quantized into a scratch buffer of the run.
func (s *state) int8Conv(g exact.ConvGeom, w uint64, wn string, x, bias, res uint64, act exact.Act, y uint64) error {
	l, err := s.int8Layer(w, wn)
	if err != nil {
		return err
	}
	sc, err := s.alloc(int((fast.Int8Scratch(g) + 3) / 4))
	if err != nil {
		return err
	}
	return s.pr.fe8.Conv(s.l.st, s.cur.tile, g, l, x, sc.Ptr, bias, res, act, y)
}

// int8Gemm runs a Gemm of a (M x K) by its constant B (packed w, named
// bn) on fast_int8.cu.
func (s *state) int8Gemm(M, N, K int, a, w uint64, bn string, bias uint64, act exact.Act, y uint64) error {
	l, err := s.int8Layer(w, bn)
	if err != nil {
		return err
	}
	sc, err := s.alloc(int((fast.Int8Scratch(exact.ConvGeom{N: M, C: K, H: 1, W: 1}) + 3) / 4))
	if err != nil {
		return err
	}
	return s.pr.fe8.GEMM(s.l.st, s.cur.tile, M, N, K, l, a, sc.Ptr, bias, act, y)
}
