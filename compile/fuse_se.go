package compile

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// fuseChannelMul makes a float32 Mul of x, of shape [N, C, d...] with
// more than one element a plane, by an operand of shape [N, C, 1...] (the
// scale of a squeeze-excitation block, as EfficientNet, MobileNetV3,
// MnasNet and RegNetY compute it) a fused.ChannelMul layer: each channel
// plane scaled in one pass by its own float32, instead of elementwise's
// broadcasting rows. The products are the Mul's, in its operand order:
// the bits are the same.
func fuseChannelMul(s *state) error {
	g := s.g
	for _, n := range g.Nodes {
		if n.Domain != "" || n.OpType != "Mul" || len(n.Inputs) != 2 || len(n.Outputs) != 1 || n.Version > 0 && n.Version < 7 {
			continue
		}
		a, b := g.Types[n.Inputs[0]], g.Types[n.Inputs[1]]
		first := false
		switch {
		case channelScale(a, b):
		case channelScale(b, a):
			first = true
		default:
			continue
		}
		x, sc := n.Inputs[0], n.Inputs[1]
		if first {
			x, sc = sc, x
		}
		i := int64(0)
		if first {
			i = 1
		}
		*n = ir.Node{Name: n.Name, OpType: fused.ChannelMul, Domain: fusedDomain, Version: 1, Inputs: []string{x, sc}, Outputs: n.Outputs,
			Attrs: map[string]*ir.Attr{fused.AttrScaleFirst: {Name: fused.AttrScaleFirst, Kind: ir.AttrInt, I: i}}}
		s.fused("fused", map[string]any{"layer": n.Name, "from": s.origin[n.Name], "kind": "channel-mul"})
	}
	return nil
}

// channelScale reports whether x (float32, [N, C, d...], rank 3 or more,
// its planes' sizes known and more than one element) is multiplied by s of
// shape [N, C, 1...] (N and C the same dimensions as x's, known or the same
// symbol).
func channelScale(x, s ir.Type) bool {
	if x.DType != tensor.Float32 || s.DType != tensor.Float32 || !x.RankKnown || !s.RankKnown || len(x.Shape) < 3 || len(s.Shape) != len(x.Shape) {
		return false
	}
	for i := 0; i < 2; i++ {
		if x.Shape[i] != s.Shape[i] || x.Shape[i].Value < 0 && x.Shape[i].Param == "" {
			return false
		}
	}
	plane := int64(1)
	for i, d := range x.Shape[2:] {
		if !d.Known() || s.Shape[2+i] != (ir.Dim{Value: 1}) {
			return false
		}
		plane *= d.Value
	}
	return plane > 1
}

// pointGemm rewrites a float32 1x1 Conv (group 1, no padding) of an input
// whose spatial dimensions are all 1 (a squeeze-excitation block's two
// convolutions, on the global average) as Flatten, Gemm (transB, the
// weights as [M, C]) and Reshape back to [N, M, 1, ...]: the Gemm's
// panels kernel computes one row of outputs from the packed weights,
// where the convolution's GEMM tiled a single column. Both compute each
// output as one FMA chain over the input channels ascending from +0, then
// add the bias (Gemm's C with alpha = beta = 1: 1·v and 1·b are exact);
// the pass takes only finite biases, so that the order of canonicalising
// a NaN and adding the bias cannot matter. The activation that followed
// the Conv follows the Reshape (an elementwise layer).
func pointGemm(s *state) error {
	g := s.g
	var out []*ir.Node
	for _, n := range g.Nodes {
		if nodes := pointGemmOf(s, n); nodes != nil {
			out = append(out, nodes...)
			continue
		}
		out = append(out, n)
	}
	g.Nodes = out
	return nil
}

func pointGemmOf(s *state, n *ir.Node) []*ir.Node {
	g := s.g
	if n.OpType != "Conv" || n.Domain != "" || len(n.Inputs) < 2 || len(n.Outputs) != 1 || n.Int("group", 1) != 1 {
		return nil
	}
	if ap := n.String("auto_pad", "NOTSET"); ap != "NOTSET" && ap != "" {
		return nil
	}
	w, ok := g.Initializers[n.Input(1)]
	xt, ok2 := g.Types[n.Input(0)]
	if !ok || !ok2 || w.DType != tensor.Float32 || xt.DType != tensor.Float32 || !xt.RankKnown || len(w.Shape) < 3 || len(xt.Shape) != len(w.Shape) {
		return nil
	}
	for i, d := range w.Shape[2:] {
		if d != 1 || xt.Shape[2+i] != (ir.Dim{Value: 1}) {
			return nil
		}
	}
	for _, p := range n.Ints("pads", nil) {
		if p != 0 {
			return nil
		}
	}
	if xt.Shape[1] != (ir.Dim{Value: int64(w.Shape[1])}) {
		return nil
	}
	var bias string
	if b := n.Input(2); b != "" {
		bt, ok := g.Initializers[b]
		if !ok || bt.DType != tensor.Float32 || len(bt.Shape) != 1 || bt.Shape[0] != w.Shape[0] || !allFinite32(bt.Data.([]float32)) {
			return nil
		}
		bias = b
	}
	M, C := w.Shape[0], w.Shape[1]
	name := n.Name
	w2 := name + "/gemm_weight"
	g.Initializers[w2] = tensor.From(append([]float32{}, w.Data.([]float32)...), M, C)
	shape := []int64{-1, int64(M)}
	for range w.Shape[2:] {
		shape = append(shape, 1)
	}
	shp := name + "/shape"
	g.Initializers[shp] = tensor.From(shape, len(shape))
	flat, y := name+"/flat", name+"/gemm"
	fl := &ir.Node{Name: flat, OpType: "Flatten", Version: 13, Inputs: []string{n.Inputs[0]}, Outputs: []string{flat},
		Attrs: map[string]*ir.Attr{"axis": {Name: "axis", Kind: ir.AttrInt, I: 1}}}
	gm := &ir.Node{Name: name, OpType: "Gemm", Version: 13, Inputs: []string{flat, w2}, Outputs: []string{y},
		Attrs: map[string]*ir.Attr{"transB": {Name: "transB", Kind: ir.AttrInt, I: 1}}}
	if bias != "" {
		gm.Inputs = append(gm.Inputs, bias)
	}
	rs := &ir.Node{Name: name + "/reshape", OpType: "Reshape", Version: 14, Inputs: []string{y, shp}, Outputs: n.Outputs, Attrs: map[string]*ir.Attr{}}
	g.Types[flat] = ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{xt.Shape[0], {Value: int64(C)}}}
	g.Types[y] = ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{xt.Shape[0], {Value: int64(M)}}}
	for _, m := range []*ir.Node{fl, rs} {
		s.origin[m.Name] = s.origin[n.Name]
	}
	s.fused("fused", map[string]any{"layer": name, "from": s.origin[n.Name], "kind": "pointwise-gemm"})
	return []*ir.Node{fl, gm, rs}
}
