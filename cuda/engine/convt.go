package engine

import (
	"fmt"

	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// ConvTranspose runs on the GPU (1-D to 3-D, any groups, strides, pads,
// dilations, output_padding, output_shape and auto_pad) with vx_convt:
// per output the chain kernel/nn computes for that geometry (exact.ConvT).
func init() { families = append(families, family{place: placeConvT, run: runConvT}) }

// placeConvT admits a float32 ConvTranspose of rank 3 to 5 (1-D to 3-D)
// with float32 weights and bias. Geometry errors that only the shapes
// reveal (a negative output size, attributes of the wrong length) fail
// the run on the GPU as they fail it on the CPU.
func placeConvT(n *ir.Node, g *ir.Graph, types map[string]ir.Type) (kernel, reason string, ok bool) {
	if n.OpType != "ConvTranspose" {
		return "", "", false
	}
	if len(n.Inputs) < 2 || len(n.Inputs) > 3 || n.Inputs[0] == "" || n.Inputs[1] == "" {
		return "", fmt.Sprintf("ConvTranspose with %d inputs", len(n.Inputs)), true
	}
	for i, v := range n.Inputs {
		if v == "" {
			continue
		}
		t, ok := types[v]
		if !ok || !t.RankKnown {
			return "", fmt.Sprintf("ConvTranspose input %d (%s) of a type unknown at build time", i, v), true
		}
		if t.DType != tensor.Float32 {
			return "", fmt.Sprintf("ConvTranspose of %v (the GPU runs float32)", t.DType), true
		}
		if i < 2 && (len(t.Shape) < 3 || len(t.Shape) > 5) {
			return "", fmt.Sprintf("a %d-D ConvTranspose (the GPU runs 1-D to 3-D)", len(t.Shape)-2), true
		}
	}
	if tx, tw := types[n.Inputs[0]], types[n.Inputs[1]]; len(tx.Shape) != len(tw.Shape) {
		return "", fmt.Sprintf("ConvTranspose of rank %d by weights of rank %d", len(tx.Shape), len(tw.Shape)), true
	}
	switch ap := n.String("auto_pad", "NOTSET"); ap {
	case "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER":
	default:
		return "", fmt.Sprintf("ConvTranspose auto_pad %q", ap), true
	}
	return kernels.ConvT, "", true
}

// ConvTGeometry is kernel/nn's ConvTranspose geometry (transposeSetup) for
// X of shape x and W of shape w: the output size from strides, dilations,
// output_padding and pads, or from output_shape or auto_pad SAME_*, whose
// total padding splits as Python's floor division does.
func ConvTGeometry(n *ir.Node, x, w []int) (exact.ConvTGeom, error) {
	var g exact.ConvTGeom
	if len(x) < 3 || len(x) > 5 || len(w) != len(x) {
		return g, fmt.Errorf("ConvTranspose of X %v by W %v: the GPU runs 1-D to 3-D (X and W of one rank, 3 to 5)", x, w)
	}
	nd := len(x) - 2
	g.Rank, g.N, g.C, g.G = nd, x[0], x[1], int(n.Int("group", 1))
	if g.G < 1 || g.C%g.G != 0 || w[0] != g.C {
		return g, fmt.Errorf("ConvTranspose: W %v must have %d input channels divisible by group %d", w, g.C, g.G)
	}
	if w[1] < 0 || int64(w[1])*int64(g.G) >= 1<<31 {
		return g, fmt.Errorf("ConvTranspose: W %v: %d output channels per group", w, w[1])
	}
	g.M = w[1] * g.G
	in, k := x[2:], w[2:]
	attr := func(name string, count, def int) ([]int, error) {
		v := n.Ints(name, nil)
		out := make([]int, count)
		for i := range out {
			out[i] = def
		}
		if v == nil {
			return out, nil
		}
		if len(v) != count {
			return nil, fmt.Errorf("ConvTranspose: attribute %s has %d values, want %d", name, len(v), count)
		}
		for i, e := range v {
			if e < -1<<30 || e > 1<<30 {
				return nil, fmt.Errorf("ConvTranspose: attribute %s value %d out of range", name, e)
			}
			out[i] = int(e)
		}
		return out, nil
	}
	stride, err := attr("strides", nd, 1)
	if err != nil {
		return g, err
	}
	dil, err := attr("dilations", nd, 1)
	if err != nil {
		return g, err
	}
	opad, err := attr("output_padding", nd, 0)
	if err != nil {
		return g, err
	}
	pads, err := attr("pads", 2*nd, 0)
	if err != nil {
		return g, err
	}
	for i := range nd {
		if stride[i] < 1 || dil[i] < 1 || k[i] < 1 || in[i] < 0 || in[i] >= 1<<30 || k[i] >= 1<<30 {
			return g, fmt.Errorf("ConvTranspose: input %v, strides %v, dilations %v and kernel %v must be positive, the input not negative (all below 2^30)", in, stride, dil, k)
		}
	}
	ap := n.String("auto_pad", "NOTSET")
	var oshape []int
	if v := n.Ints("output_shape", nil); v != nil {
		if len(v) == nd+2 {
			v = v[2:]
		}
		if len(v) != nd {
			return g, fmt.Errorf("ConvTranspose: output_shape %v, want %d spatial values", v, nd)
		}
		oshape = make([]int, nd)
		for i, e := range v {
			if e < -1<<30 || e > 1<<30 {
				return g, fmt.Errorf("ConvTranspose: output_shape %v out of range", v)
			}
			oshape[i] = int(e)
		}
	} else if ap == "SAME_UPPER" || ap == "SAME_LOWER" {
		oshape = make([]int, nd)
		for i := range oshape {
			oshape[i] = in[i] * stride[i]
		}
	}
	out, padB, padE := make([]int, nd), make([]int, nd), make([]int, nd)
	for i := range nd {
		full := stride[i]*(in[i]-1) + opad[i] + (k[i]-1)*dil[i] + 1
		if oshape != nil {
			total := full - oshape[i]
			half := total >> 1 // floor division, also for a negative total
			if ap == "SAME_UPPER" {
				padB[i], padE[i] = half, total-half
			} else {
				padB[i], padE[i] = total-half, half
			}
			out[i] = oshape[i]
		} else {
			if ap != "VALID" {
				padB[i], padE[i] = pads[i], pads[nd+i]
			}
			out[i] = full - padB[i] - padE[i]
		}
		if out[i] < 0 {
			return g, fmt.Errorf("ConvTranspose: negative output size in spatial dimension %d", i)
		}
	}
	// The spatial dimensions fill (D, H, W) from the end; the leading
	// ones of a lower rank are unit.
	dims := [3][7]*int{
		{&g.D, &g.OD, &g.KD, &g.SD, &g.DD, &g.PD, &g.PED},
		{&g.H, &g.OH, &g.KH, &g.SH, &g.DH, &g.PH, &g.PEH},
		{&g.W, &g.OW, &g.KW, &g.SW, &g.DW, &g.PW, &g.PEW},
	}
	for j, d := range dims {
		v := [7]int{1, 1, 1, 1, 1, 0, 0}
		if i := j - (3 - nd); i >= 0 {
			v = [7]int{in[i], out[i], k[i], stride[i], dil[i], padB[i], padE[i]}
		}
		for f, p := range d {
			*p = v[f]
		}
	}
	return g, nil
}

// ConvTShape is the output shape of g: [N, M] and its Rank spatial
// dimensions.
func ConvTShape(g exact.ConvTGeom) []int {
	return append([]int{g.N, g.M}, []int{g.OD, g.OH, g.OW}[3-g.Rank:]...)
}

// runConvT runs a ConvTranspose layer: its geometry from the operands'
// shapes, a one-int buffer for the tiled geometry's weight check, then
// exact.ConvT.
func runConvT(s *state, n *ir.Node) (bool, error) {
	if n.OpType != "ConvTranspose" {
		return false, nil
	}
	x, xs, err := s.dev(n.Input(0))
	if err != nil {
		return true, err
	}
	w, ws, err := s.dev(n.Input(1))
	if err != nil {
		return true, err
	}
	g, err := ConvTGeometry(n, xs, ws)
	if err != nil {
		return true, err
	}
	var bias uint64
	if bn := n.Input(2); bn != "" {
		var bs []int
		if bias, bs, err = s.dev(bn); err != nil {
			return true, err
		}
		if len(bs) != 1 || bs[0] != g.M {
			return true, fmt.Errorf("ConvTranspose bias of shape %v, want [%d]", bs, g.M)
		}
	}
	var flag uint64
	if g.Tiled() {
		b, err := s.alloc(1)
		if err != nil {
			return true, err
		}
		flag = b.Ptr
	}
	y, err := s.out(n.Outputs[0], ConvTShape(g))
	if err != nil {
		return true, err
	}
	return true, s.pr.e.ConvT(s.l.st, g, x, w, bias, flag, y)
}
