package compile

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/q8"
	"github.com/vouchml/vouch/quant"
	"github.com/vouchml/vouch/tensor"
)

// converter rewrites layers of the fp32 reference graph into int8 or
// fp16 layers; each layer is converted once and reused by every variant
// the pass evaluates.
type converter struct {
	g      *ir.Graph
	scales map[string]float32
	qdq    *qdqInfo // a pre-quantized model's int8 weights
	memo   map[string]*conversion
	wbits  int // the int8 weights' width, 7 or 8 (QuantOptions.WeightBits)
}

type conversion struct {
	node  *ir.Node
	inits map[string]*tensor.Tensor
}

// apply returns a graph with each layer at its wanted precision.
func (c *converter) apply(want map[string]string) *ir.Graph {
	out := *c.g
	out.Nodes = make([]*ir.Node, len(c.g.Nodes))
	out.Initializers = make(map[string]*tensor.Tensor, len(c.g.Initializers))
	for k, v := range c.g.Initializers {
		out.Initializers[k] = v
	}
	for i, n := range c.g.Nodes {
		out.Nodes[i] = n
		p := want[n.Name]
		if p != "int8" && p != "fp16" {
			continue
		}
		cv := c.convert(n, p)
		out.Nodes[i] = cv.node
		for k, v := range cv.inits {
			out.Initializers[k] = v
		}
	}
	return &out
}

func (c *converter) convert(n *ir.Node, p string) *conversion {
	if c.memo == nil {
		c.memo = map[string]*conversion{}
	}
	key := n.Name + "\x00" + p
	if cv, ok := c.memo[key]; ok {
		return cv
	}
	var cv *conversion
	if p == "fp16" {
		cv = c.toF16(n)
	} else {
		cv = c.toQ8(n)
	}
	c.memo[key] = cv
	return cv
}

func copyAttrs(a map[string]*ir.Attr, drop ...string) map[string]*ir.Attr {
	out := make(map[string]*ir.Attr, len(a)+4)
outer:
	for k, v := range a {
		for _, d := range drop {
			if k == d {
				continue outer
			}
		}
		out[k] = v
	}
	return out
}

// toF16 stores every float32 constant input of n as float16.
func (c *converter) toF16(n *ir.Node) *conversion {
	cv := &conversion{inits: map[string]*tensor.Tensor{}}
	m := &ir.Node{Name: n.Name, OpType: fused.OpF16, Domain: fused.Domain, Version: 1, Inputs: append([]string{}, n.Inputs...), Outputs: n.Outputs,
		Attrs: copyAttrs(n.Attrs, kernel.TacticAttr)}
	var half []int64
	for i, in := range n.Inputs {
		t, ok := c.g.Initializers[in]
		if !ok || t.DType != tensor.Float32 {
			continue
		}
		h := make([]tensor.Half, t.Len())
		for j, v := range t.Data.([]float32) {
			h[j] = tensor.ToHalf(v)
		}
		name := in + "/fp16"
		cv.inits[name] = tensor.From(h, t.Shape...)
		m.Inputs[i] = name
		half = append(half, int64(i))
	}
	m.Attrs[fused.AttrInnerOp] = &ir.Attr{Name: fused.AttrInnerOp, Kind: ir.AttrString, S: n.OpType}
	m.Attrs["inner_domain"] = &ir.Attr{Name: "inner_domain", Kind: ir.AttrString, S: n.Domain}
	m.Attrs["inner_version"] = &ir.Attr{Name: "inner_version", Kind: ir.AttrInt, I: n.Version}
	m.Attrs["half"] = &ir.Attr{Name: "half", Kind: ir.AttrInts, Ints: half}
	cv.node = m
	return cv
}

// toQ8 makes n a Q8 layer (kernel/q8 documents the layout).
func (c *converter) toQ8(n *ir.Node) *conversion {
	g := c.g
	base := baseOf(n)
	l, isFused := fused.LayerOf(n)
	isFused = isFused && n.OpType == fused.OpFused
	nbase, add, nact := len(n.Inputs), int64(0), int64(0)
	version := n.Version
	if isFused {
		nbase, add, nact = l.BaseInputs, int64(l.Adds), int64(l.ActInputs)
		version = l.BaseVersion
	}
	w := g.Initializers[n.Inputs[1]]
	wd := w.Data.([]float32)
	var bias []float32
	if nbase > 2 && n.Inputs[2] != "" {
		bias = g.Initializers[n.Inputs[2]].Data.([]float32)
	}
	attrs := copyAttrs(n.Attrs, kernel.TacticAttr, fused.AttrLayout)
	var q []int8
	var ws []float32
	wshape := w.Shape
	var b []float32
	qw := (*qdqWeight)(nil)
	if c.qdq != nil {
		qw = c.qdq.weights[n.Inputs[1]]
	}
	switch base {
	case "Conv":
		q, ws = quant.WeightScalesBits(wd, w.Shape[0], c.bits())
		if qw != nil {
			q, ws = qw.q, qw.perChannel(w.Shape[0])
		}
		b = bias
	case "Gemm", "MatMul":
		K, N := w.Shape[0], w.Shape[1]
		wt := wd
		if base == "Gemm" && n.Int("transB", 0) == 1 {
			N, K = w.Shape[0], w.Shape[1]
		} else {
			wt = make([]float32, len(wd))
			for k := 0; k < K; k++ {
				for j := 0; j < N; j++ {
					wt[j*K+k] = wd[k*N+j]
				}
			}
		}
		wshape = []int{N, K}
		q, ws = quant.WeightScalesBits(wt, N, c.bits())
		if qw != nil {
			q, ws = qw.q, qw.perChannel(N)
			if !(base == "Gemm" && n.Int("transB", 0) == 1) {
				q = make([]int8, len(qw.q))
				for k := 0; k < K; k++ {
					for j := 0; j < N; j++ {
						q[j*K+k] = qw.q[k*N+j]
					}
				}
			}
		}
		if base == "Gemm" {
			alpha, beta := n.Float("alpha", 1), n.Float("beta", 1)
			if alpha != 1 {
				for i := range ws {
					ws[i] = float32(float64(ws[i]) * float64(alpha))
				}
			}
			if bias != nil {
				b = make([]float32, N)
				for j := range b {
					v := bias[0]
					if len(bias) == N {
						v = bias[j]
					}
					b[j] = v
					if beta != 1 {
						b[j] = float32(float64(beta) * float64(v))
					}
				}
			}
			for _, k := range []string{"alpha", "beta", "transA", "transB"} {
				delete(attrs, k)
			}
		}
	}
	cv := &conversion{inits: map[string]*tensor.Tensor{}}
	wq, wsn := n.Name+"/w_int8", n.Name+"/w_scale"
	cv.inits[wq] = tensor.From(q, wshape...)
	cv.inits[wsn] = tensor.From(ws, len(ws))
	bn := ""
	if b != nil {
		bn = n.Name + "/bias"
		cv.inits[bn] = tensor.From(b, len(b))
	}
	m := &ir.Node{Name: n.Name, OpType: fused.OpQ8, Domain: fused.Domain, Version: 1, Outputs: n.Outputs, Attrs: attrs,
		Inputs: append([]string{n.Inputs[0], wq, wsn, bn}, n.Inputs[nbase:]...)}
	attrs[fused.AttrBase] = &ir.Attr{Name: fused.AttrBase, Kind: ir.AttrString, S: base}
	attrs[fused.AttrBaseVersion] = &ir.Attr{Name: fused.AttrBaseVersion, Kind: ir.AttrInt, I: version}
	attrs[fused.AttrLayout] = &ir.Attr{Name: fused.AttrLayout, Kind: ir.AttrInts, Ints: []int64{4, add, nact}}
	attrs["x_scale"] = &ir.Attr{Name: "x_scale", Kind: ir.AttrFloat, F: c.scales[n.Inputs[0]]}
	if c.bits() == 7 && qw == nil {
		// A pre-quantized model's weights keep their own 8-bit values.
		attrs[q8.AttrWeightBits] = &ir.Attr{Name: q8.AttrWeightBits, Kind: ir.AttrInt, I: 7}
	}
	cv.node = m
	return cv
}

// bits is the int8 weights' width (8 unless the build asks for 7).
func (c *converter) bits() int {
	if c.wbits == 7 {
		return 7
	}
	return 8
}

// perChannel returns the weights' scales, one per output channel.
func (w *qdqWeight) perChannel(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = w.scales[0]
		if len(w.scales) == n {
			out[i] = w.scales[i]
		}
	}
	return out
}
