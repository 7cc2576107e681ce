package compile

import (
	"fmt"
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

// splitPaddingTaps splits a 2-D Conv whose outputs along some axis read
// padding with some of their taps (what dropPaddingTaps leaves: taps that
// some outputs read inside the input) into one Conv per region of outputs
// that read the same taps inside, each with the kernel cropped to those
// taps, no padding and its part of the input sliced out, and Concats of
// their outputs in place of the Conv's output. DeepLabV3's ASPP 3x3 of
// dilation 12 over a 14x14 map reads the input with all nine taps at no
// output, one tap at most; split, its work falls by 80%.
//
// Exact for the reason dropPaddingTaps is: each output is its chain from
// +0 over the taps in order, without the taps that read padding (each
// FMA(+0, w, acc) = acc for finite w, which the pass checks), and the
// bias after. It splits only where the convolution is large and loses at
// least 40% of its work, into at most 16 regions.
func splitPaddingTaps(s *state) error {
	g := s.g
	var out []*ir.Node
	for _, n := range g.Nodes {
		if nodes := splitConv(s, n); nodes != nil {
			out = append(out, nodes...)
			continue
		}
		out = append(out, n)
	}
	g.Nodes = out
	return nil
}

// tapRun is a run of outputs [o0, o1) along one axis whose taps inside the
// input are [a, b].
type tapRun struct{ o0, o1, a, b int }

// tapRuns splits O outputs of an axis (input length L, kernel K, stride
// st, dilation d, leading pad pb) into runs of the same taps inside; ok is
// false when some output has none.
func tapRuns(L, K, st, d, pb, O int) (runs []tapRun, ok bool) {
	for o := 0; o < O; o++ {
		a, b := -1, -1
		for t := 0; t < K; t++ {
			if p := o*st + t*d - pb; p >= 0 && p < L {
				if a < 0 {
					a = t
				}
				b = t
			}
		}
		if a < 0 {
			return nil, false
		}
		if r := len(runs) - 1; r >= 0 && runs[r].a == a && runs[r].b == b {
			runs[r].o1 = o + 1
			continue
		}
		runs = append(runs, tapRun{o, o + 1, a, b})
	}
	return runs, true
}

// splitConv returns the nodes that replace n (splitPaddingTaps), or nil.
func splitConv(s *state, n *ir.Node) []*ir.Node {
	g := s.g
	if n.OpType != "Conv" || n.Domain != "" || len(n.Inputs) < 2 || len(n.Outputs) != 1 {
		return nil
	}
	if ap := n.String("auto_pad", "NOTSET"); ap != "NOTSET" && ap != "" {
		return nil
	}
	w, ok := g.Initializers[n.Input(1)]
	xt, ok2 := g.Types[n.Input(0)]
	if !ok || !ok2 || w.DType != tensor.Float32 || len(w.Shape) != 4 || !xt.RankKnown || len(xt.Shape) != 4 {
		return nil
	}
	if b := n.Input(2); b != "" {
		if _, ok := g.Initializers[b]; !ok {
			return nil
		}
	}
	H, W := xt.Shape[2], xt.Shape[3]
	if !H.Known() || !W.Known() {
		return nil
	}
	strides, dils, pads := attrOr(n, "strides", 2, 1), attrOr(n, "dilations", 2, 1), attrOr(n, "pads", 4, 0)
	if strides == nil || dils == nil || pads == nil {
		return nil
	}
	L := []int{int(H.Value), int(W.Value)}
	K := w.Shape[2:]
	var runs [2][]tapRun
	var O [2]int
	for i := 0; i < 2; i++ {
		if strides[i] < 1 || dils[i] < 1 {
			return nil
		}
		O[i] = (L[i]+pads[i]+pads[2+i]-((K[i]-1)*dils[i]+1))/strides[i] + 1
		if O[i] < 1 {
			return nil
		}
		r, ok := tapRuns(L[i], K[i], strides[i], dils[i], pads[i], O[i])
		if !ok {
			return nil
		}
		runs[i] = r
	}
	if len(runs[0])*len(runs[1]) < 2 || len(runs[0])*len(runs[1]) > 16 {
		return nil
	}
	full := O[0] * O[1] * K[0] * K[1]
	kept := 0
	for _, rh := range runs[0] {
		for _, rw := range runs[1] {
			kept += (rh.o1 - rh.o0) * (rw.o1 - rw.o0) * (rh.b - rh.a + 1) * (rw.b - rw.a + 1)
		}
	}
	macs := w.Shape[0] * w.Shape[1] * full
	if 10*kept > 6*full || macs < 20_000_000 || !allFinite32(w.Data.([]float32)) {
		return nil
	}
	var nodes []*ir.Node
	var rows []string
	name := n.Name
	i64s := func(tag string, v ...int64) string {
		nm := name + "/" + tag
		g.Initializers[nm] = tensor.From(v, len(v))
		return nm
	}
	xd0, xd1 := xt.Shape[0], ir.Dim{Value: int64(w.Shape[0])}
	for ri, rh := range runs[0] {
		var cols []string
		for ci, rw := range runs[1] {
			tag := fmt.Sprintf("r%d_%d", ri, ci)
			// Input rows and columns the region reads.
			h0 := rh.o0*strides[0] + rh.a*dils[0] - pads[0]
			h1 := h0 + (rh.o1-rh.o0-1)*strides[0] + (rh.b-rh.a)*dils[0] + 1
			w0 := rw.o0*strides[1] + rw.a*dils[1] - pads[1]
			w1 := w0 + (rw.o1-rw.o0-1)*strides[1] + (rw.b-rw.a)*dils[1] + 1
			x := n.Inputs[0]
			if h0 > 0 || w0 > 0 || h1 < L[0] || w1 < L[1] {
				sl := name + "/" + tag + "/x"
				nodes = append(nodes, &ir.Node{Name: sl, OpType: "Slice", Version: 13, Attrs: map[string]*ir.Attr{}, Outputs: []string{sl},
					Inputs: []string{x, i64s(tag+"/starts", int64(h0), int64(w0)), i64s(tag+"/ends", int64(h1), int64(w1)), i64s(tag+"/axes", 2, 3)}})
				g.Types[sl] = ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{xd0, xt.Shape[1], {Value: int64(h1 - h0)}, {Value: int64(w1 - w0)}}}
				x = sl
			}
			kh, kw := rh.b-rh.a+1, rw.b-rw.a+1
			cw := tensor.New(tensor.Float32, w.Shape[0], w.Shape[1], kh, kw)
			src, dst := w.Data.([]float32), cw.Data.([]float32)
			for oc := 0; oc < w.Shape[0]*w.Shape[1]; oc++ {
				for y := 0; y < kh; y++ {
					for z := 0; z < kw; z++ {
						dst[(oc*kh+y)*kw+z] = src[(oc*K[0]+rh.a+y)*K[1]+rw.a+z]
					}
				}
			}
			wn := name + "/" + tag + "/weight"
			g.Initializers[wn] = cw
			c := &ir.Node{Name: name + "/" + tag, OpType: "Conv", Version: n.Version, Attrs: map[string]*ir.Attr{}, Outputs: []string{name + "/" + tag + "/y"}}
			for k, a := range n.Attrs {
				c.Attrs[k] = a
			}
			c.Attrs["pads"] = &ir.Attr{Name: "pads", Kind: ir.AttrInts, Ints: []int64{0, 0, 0, 0}}
			c.Attrs["kernel_shape"] = &ir.Attr{Name: "kernel_shape", Kind: ir.AttrInts, Ints: []int64{int64(kh), int64(kw)}}
			c.Inputs = append([]string{x, wn}, n.Inputs[2:]...)
			g.Types[c.Outputs[0]] = ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{xd0, xd1, {Value: int64(rh.o1 - rh.o0)}, {Value: int64(rw.o1 - rw.o0)}}}
			s.origin[c.Name] = s.origin[n.Name]
			nodes = append(nodes, c)
			cols = append(cols, c.Outputs[0])
		}
		row := cols[0]
		if len(cols) > 1 {
			row = fmt.Sprintf("%s/row%d", name, ri)
			nodes = append(nodes, &ir.Node{Name: row, OpType: "Concat", Version: 13, Inputs: cols, Outputs: []string{row},
				Attrs: map[string]*ir.Attr{"axis": {Name: "axis", Kind: ir.AttrInt, I: 3}}})
			g.Types[row] = ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{xd0, xd1, {Value: int64(rh.o1 - rh.o0)}, {Value: int64(O[1])}}}
			s.origin[row] = s.origin[n.Name]
		}
		rows = append(rows, row)
	}
	last := &ir.Node{Name: name, OpType: "Concat", Version: 13, Inputs: rows, Outputs: n.Outputs,
		Attrs: map[string]*ir.Attr{"axis": {Name: "axis", Kind: ir.AttrInt, I: 2}}}
	if len(rows) == 1 {
		// One row of regions: its Concat is the output.
		prev := nodes[len(nodes)-1]
		prev.Outputs = n.Outputs
		prev.Name = name
	} else {
		nodes = append(nodes, last)
	}
	for _, m := range nodes {
		if _, ok := s.origin[m.Name]; !ok {
			s.origin[m.Name] = s.origin[n.Name]
		}
	}
	s.log.Info(s.pass, "split", map[string]any{"layer": name, "regions": len(runs[0]) * len(runs[1]), "macs": macs, "kept": w.Shape[0] * w.Shape[1] * kept})
	return nodes
}
