package compile

import (
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// dropPaddingTaps crops a Conv's kernel to the taps that some output reads
// inside the input: a tap that, along one spatial axis, lands in the
// padding for every output (DeepLabV3's ASPP: a 3x3 convolution of
// dilation 36 over a 28x28 map reads only its centre; the rest is
// padding) is dropped, its pads reduced to match, so the layer does the
// work that matters (that 3x3 becomes a 1x1).
//
// Exact: each output is one FMA chain from +0 over the taps in order, and
// in round-to-nearest such a chain is never -0 (a sum is -0 only when both
// terms are); a padding tap adds FMA(+0, w, acc) = acc + (±0) for a finite
// w, which is acc for every acc that is not -0. So the chain without the
// padding taps has the same bits, as long as every weight is finite (0·Inf
// is NaN): the pass checks that.
func dropPaddingTaps(s *state) error {
	g := s.g
	for _, n := range g.Nodes {
		if n.OpType != "Conv" || n.Domain != "" || len(n.Inputs) < 2 {
			continue
		}
		if ap := n.String("auto_pad", "NOTSET"); ap != "NOTSET" && ap != "" {
			continue
		}
		w, ok := g.Initializers[n.Input(1)]
		xt, ok2 := g.Types[n.Input(0)]
		if !ok || !ok2 || w.DType != tensor.Float32 || len(w.Shape) < 3 {
			continue
		}
		// Only the spatial sizes matter (the batch may be dynamic).
		nd := len(w.Shape) - 2
		if !xt.RankKnown || len(xt.Shape) != nd+2 {
			continue
		}
		x := make([]int, nd+2)
		known := true
		for i, d := range xt.Shape[2:] {
			known = known && d.Known()
			x[2+i] = int(d.Value)
		}
		if !known {
			continue
		}
		k := w.Shape[2:]
		strides, dils, pads := attrOr(n, "strides", nd, 1), attrOr(n, "dilations", nd, 1), attrOr(n, "pads", 2*nd, 0)
		if strides == nil || dils == nil || pads == nil {
			continue
		}
		lo, hi := make([]int, nd), make([]int, nd)
		crop := false
		for i := 0; i < nd; i++ {
			L, K, st, d, pb, pe := x[2+i], k[i], strides[i], dils[i], pads[i], pads[nd+i]
			O := (L+pb+pe-((K-1)*d+1))/st + 1
			if O < 1 || st < 1 || d < 1 {
				lo[i], hi[i] = 0, K-1
				continue
			}
			lo[i], hi[i] = -1, -1
			for t := 0; t < K; t++ {
				first, last := t*d-pb, (O-1)*st+t*d-pb // the input positions tap t reads
				if last >= 0 && first < L {
					if lo[i] < 0 {
						lo[i] = t
					}
					hi[i] = t
				}
			}
			if lo[i] < 0 { // every tap reads only padding: leave it be
				lo[i], hi[i] = 0, K-1
			}
			crop = crop || lo[i] > 0 || hi[i] < K-1
		}
		if !crop || !allFinite32(w.Data.([]float32)) {
			continue
		}
		// The cropped weights, and the pads that keep every output's taps.
		nk := make([]int, nd)
		for i := range nk {
			nk[i] = hi[i] - lo[i] + 1
		}
		shape := append(append([]int{}, w.Shape[:2]...), nk...)
		nw := tensor.New(tensor.Float32, shape...)
		src, dst := w.Data.([]float32), nw.Data.([]float32)
		ks, nks := tensor.NumElems(k), tensor.NumElems(nk)
		idx := make([]int, nd)
		for j := 0; j < nks; j++ {
			r := j
			for i := nd - 1; i >= 0; i-- {
				idx[i] = r%nk[i] + lo[i]
				r /= nk[i]
			}
			off := 0
			for i := 0; i < nd; i++ {
				off = off*k[i] + idx[i]
			}
			for oc := 0; oc < w.Shape[0]*w.Shape[1]; oc++ {
				dst[oc*nks+j] = src[oc*ks+off]
			}
		}
		np := make([]int64, 2*nd)
		for i := 0; i < nd; i++ {
			np[i] = int64(pads[i] - lo[i]*dils[i])
			np[nd+i] = int64(pads[nd+i] - (k[i]-1-hi[i])*dils[i])
		}
		if !nonNegative(np) {
			continue // the crop would need negative pads
		}
		name := n.Name + "/cropped_weight"
		g.Initializers[name] = nw
		n.Inputs[1] = name
		n.Attrs["pads"] = &ir.Attr{Name: "pads", Kind: ir.AttrInts, Ints: np}
		ks64 := make([]int64, nd)
		for i, v := range nk {
			ks64[i] = int64(v)
		}
		n.Attrs["kernel_shape"] = &ir.Attr{Name: "kernel_shape", Kind: ir.AttrInts, Ints: ks64}
		s.log.Info(s.pass, "cropped", map[string]any{"layer": n.Name, "kernel": k, "to": nk, "pads": np})
	}
	return nil
}

// attrOr reads an ints attribute of length want, or def repeated; nil when
// the attribute has another length.
func attrOr(n *ir.Node, name string, want, def int) []int {
	v := n.Ints(name, nil)
	if v == nil {
		out := make([]int, want)
		for i := range out {
			out[i] = def
		}
		return out
	}
	if len(v) != want {
		return nil
	}
	out := make([]int, want)
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

func allFinite32(v []float32) bool {
	for _, x := range v {
		if math.IsInf(float64(x), 0) || x != x {
			return false
		}
	}
	return true
}

func nonNegative(v []int64) bool {
	for _, x := range v {
		if x < 0 {
			return false
		}
	}
	return true
}
