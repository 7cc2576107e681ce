package fused

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/tensor"
)

// ExpandDepthwise is a 1x1 convolution (the expansion of a MobileNet
// block) and the depthwise 3x3 convolution that reads its output, as one
// layer. Each part is a Conv or a Fused Conv with a clamp.
//
// Layout of a "vouch" ExpandDepthwise node:
//
//	inputs:  the expansion's inputs, then the depthwise's but its first
//	attrs:   split       int     the number of the expansion's inputs
//	         a:type, b:type        string  each part's op type (Conv, Fused)
//	         a:domain, b:domain    string  its domain
//	         a:version, b:version  int     its opset version
//	         a.<name>, b.<name>    any     its attributes
//
// The layer computes the expansion's outputs a band of rows at a time,
// just before the depthwise rows that read them (nn.ExpandDepthwise), so
// the expanded tensor stays in cache; every output is the one each part
// computes on its own, so the bits are those of the two layers.
const ExpandDepthwise = "ExpandDepthwise"

// ExpandDepthwiseNode returns the ExpandDepthwise layer of parts a (the
// expansion) and b (the depthwise convolution, reading a's only output),
// named after a, with b's outputs.
func ExpandDepthwiseNode(a, b *ir.Node) *ir.Node {
	f := &ir.Node{Name: a.Name, OpType: ExpandDepthwise, Domain: Domain, Version: 1, Attrs: map[string]*ir.Attr{}}
	f.Inputs = append(append([]string{}, a.Inputs...), b.Inputs[1:]...)
	f.Outputs = append([]string{}, b.Outputs...)
	f.Attrs["split"] = &ir.Attr{Name: "split", Kind: ir.AttrInt, I: int64(len(a.Inputs))}
	for p, n := range map[string]*ir.Node{"a": a, "b": b} {
		f.Attrs[p+":type"] = &ir.Attr{Name: p + ":type", Kind: ir.AttrString, S: n.OpType}
		f.Attrs[p+":domain"] = &ir.Attr{Name: p + ":domain", Kind: ir.AttrString, S: n.Domain}
		f.Attrs[p+":version"] = &ir.Attr{Name: p + ":version", Kind: ir.AttrInt, I: n.Version}
		for k, v := range n.Attrs {
			c := *v
			c.Name = p + "." + k
			f.Attrs[c.Name] = &c
		}
	}
	return f
}

// edwParts is an ExpandDepthwise node's two parts, rebuilt.
type edwParts struct {
	a, b   *ir.Node
	split  int
	pa, pb *parts // the Fused parts' own parts (nil for a plain Conv)
}

// ExpandDepthwiseParts rebuilds an ExpandDepthwise layer's two parts
// (the layout ExpandDepthwiseNode writes: the expansion's inputs, then
// the depthwise's but its first; attributes a:type, a:domain, a:version,
// a.<name>, and b's): a, named and writing n.Name+"/a", which b, named
// n.Name+"/b", reads; b writes n's output. Running a then b performs the
// operations of the layer.
func ExpandDepthwiseParts(n *ir.Node) (a, b *ir.Node, err error) {
	sp := int(n.Int("split", 0))
	if sp < 2 || sp >= len(n.Inputs) || len(n.Outputs) != 1 {
		return nil, nil, fmt.Errorf("expand-depthwise layer: split %d of %d inputs, %d outputs", sp, len(n.Inputs), len(n.Outputs))
	}
	mid := n.Name + "/a"
	part := func(p string) (*ir.Node, error) {
		x := &ir.Node{Name: n.Name + "/" + p, OpType: n.String(p+":type", ""), Domain: n.String(p+":domain", ""),
			Version: n.Int(p+":version", 0), Attrs: map[string]*ir.Attr{}}
		for k, v := range n.Attrs {
			if name, ok := strings.CutPrefix(k, p+"."); ok {
				c := *v
				c.Name = name
				x.Attrs[name] = &c
			}
		}
		if x.OpType == "" {
			return nil, fmt.Errorf("expand-depthwise layer: part %s has no op type", p)
		}
		return x, nil
	}
	if a, err = part("a"); err != nil {
		return nil, nil, err
	}
	if b, err = part("b"); err != nil {
		return nil, nil, err
	}
	a.Inputs, a.Outputs = append([]string{}, n.Inputs[:sp]...), []string{mid}
	b.Inputs, b.Outputs = append([]string{mid}, n.Inputs[sp:]...), []string{n.Outputs[0]}
	return a, b, nil
}

func edwSplit(n *ir.Node) (*edwParts, error) {
	a, b, err := ExpandDepthwiseParts(n)
	if err != nil {
		return nil, err
	}
	e := &edwParts{a: a, b: b, split: int(n.Int("split", 0))}
	for _, x := range []*ir.Node{a, b} {
		if x.Domain != Domain || x.OpType != "Fused" {
			continue
		}
		q, err := split(x)
		if err != nil {
			return nil, fmt.Errorf("expand-depthwise layer: part %s: %w", x.Name, err)
		}
		if x == a {
			e.pa = q
		} else {
			e.pb = q
		}
	}
	return e, nil
}

type edwOp struct {
	reg *kernel.Registry
}

type edwEntry struct {
	p   *edwParts
	err error
}

// prepare is ExpandDepthwise's Op.Prepare: the parts split at bind time.
func (o *edwOp) prepare(c *kernel.Ctx, n *ir.Node, _ []*tensor.Tensor) error {
	return o.entry(c, n).err
}

// edwEntryKey keys an ExpandDepthwise node's parts in its kernel.State.
type edwEntryKey struct{ n *ir.Node }

// entry returns n's parts, kept in c's kernel.State (split on every call
// where c keeps none: shape inference).
func (o *edwOp) entry(c *kernel.Ctx, n *ir.Node) *edwEntry {
	e, _ := kernel.Prepared(c, edwEntryKey{n}, nil, func() (*edwEntry, error) {
		p, err := edwSplit(n)
		return &edwEntry{p: p, err: err}, nil
	})
	return e
}

func (o *edwOp) infer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	e := o.entry(nil, n)
	if e.err != nil {
		return nil, e.err
	}
	if len(in) < e.p.split {
		return nil, fmt.Errorf("expand-depthwise layer: %d inputs, split %d", len(in), e.p.split)
	}
	opA, err := o.reg.Lookup(e.p.a)
	if err != nil {
		return nil, err
	}
	ta, err := opA.Infer(e.p.a, in[:e.p.split])
	if err != nil {
		return nil, fmt.Errorf("expansion part: %w", err)
	}
	opB, err := o.reg.Lookup(e.p.b)
	if err != nil {
		return nil, err
	}
	inB := append([]ir.InferInput{{Present: true, Type: ta[0]}}, in[e.p.split:]...)
	tb, err := opB.Infer(e.p.b, inB)
	if err != nil {
		return nil, fmt.Errorf("depthwise part: %w", err)
	}
	return tb, nil
}

// run is the layer as its two parts, one after the other (the portable
// path, and the reference the fast one is tested against).
func (o *edwOp) run(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	e := o.entry(c, n)
	if e.err != nil {
		return nil, e.err
	}
	if len(in) < e.p.split {
		return nil, fmt.Errorf("expand-depthwise layer: %d inputs, split %d", len(in), e.p.split)
	}
	opA, err := o.reg.Lookup(e.p.a)
	if err != nil {
		return nil, err
	}
	ya, err := opA.Run(c, e.p.a, in[:e.p.split])
	if err != nil {
		return nil, fmt.Errorf("expansion part: %w", err)
	}
	opB, err := o.reg.Lookup(e.p.b)
	if err != nil {
		return nil, err
	}
	yb, err := opB.Run(c, e.p.b, append([]*tensor.Tensor{ya[0]}, in[e.p.split:]...))
	if err != nil {
		return nil, fmt.Errorf("depthwise part: %w", err)
	}
	return yb, nil
}

func (o *edwOp) into(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	e := o.entry(c, n)
	if e.err != nil {
		return e.err
	}
	if len(out) == 0 || out[0] == nil {
		return fmt.Errorf("expand-depthwise layer: no output slot")
	}
	if len(in) >= e.p.split && o.fast(c, e.p, in, out[0]) {
		return nil
	}
	res, err := o.run(c, n, in)
	if err != nil {
		return err
	}
	if r := res[0]; r.DType != out[0].DType || r.Len() != out[0].Len() {
		return fmt.Errorf("expand-depthwise layer: result is %v%v, output slot is %v%v", r.DType, r.Shape, out[0].DType, out[0].Shape)
	}
	reflect.Copy(reflect.ValueOf(out[0].Data), reflect.ValueOf(res[0].Data))
	return nil
}

// partAct is a Fused part's activation as an epilogue: a clamp (Relu,
// Clip), or SiLU or HardSigmoidMul as its Act (for c's instruction set,
// as the Fused layer hands them to its base kernel).
func partAct(c *kernel.Ctx, p *parts, in []*tensor.Tensor) (kernel.Epilogue, bool) {
	switch {
	case p.hsAct != nil:
		e := kernel.Epilogue{Act: p.hsAct[0]}
		if c.AVX512() && amd64.EnabledZ {
			e.Act = p.hsAct[1]
		}
		return e, true
	case p.silu != nil:
		return kernel.Epilogue{Act: siluAct(c, p.sigFirst)}, true
	}
	return clampOf(p, in, kernel.Epilogue{})
}

// fast runs the layer through nn.ExpandDepthwise where it applies (float32
// tensors, clamp or SiLU/HardSigmoidMul epilogues, the vector kernels on),
// and reports whether it did.
func (o *edwOp) fast(c *kernel.Ctx, p *edwParts, in []*tensor.Tensor, y *tensor.Tensor) bool {
	ina, inb := in[:p.split], in[p.split:]
	f32 := func(t *tensor.Tensor) []float32 {
		if t == nil {
			return nil
		}
		d, _ := t.Data.([]float32)
		return d
	}
	x, w1, w2 := ina[0], ina[1], kernel.Input(inb, 0)
	if x == nil || w1 == nil || w2 == nil || f32(x) == nil || f32(w1) == nil || f32(w2) == nil || f32(y) == nil ||
		len(x.Shape) != 4 || len(w1.Shape) != 4 || len(w2.Shape) != 4 {
		return false
	}
	b1, b2 := kernel.Input(ina, 2), kernel.Input(inb, 1)
	if p.pa != nil {
		b1 = nil
		if len(p.pa.baseIn) > 2 {
			b1 = ina[2]
		}
	}
	if p.pb != nil {
		b2 = nil
		if len(p.pb.baseIn) > 2 {
			b2 = inb[1]
		}
	}
	if (b1 != nil && f32(b1) == nil) || (b2 != nil && f32(b2) == nil) {
		return false
	}
	var ea, eb kernel.Epilogue
	ok := true
	if p.pa != nil {
		if p.pa.act != nil {
			ea, ok = partAct(c, p.pa, in)
		}
	}
	if ok && p.pb != nil {
		// The depthwise part's inputs sit after the expansion's, its
		// first (the expansion's output) left out.
		pb := *p.pb
		pb.actIn = make([]int, len(p.pb.actIn))
		for i, k := range p.pb.actIn {
			pb.actIn[i] = p.split + k - 1
		}
		if pb.act != nil {
			eb, ok = partAct(c, &pb, in)
		}
	}
	if !ok {
		return false
	}
	// The depthwise convolution's own attributes (a Fused part's base).
	attrs := p.b
	if p.pb != nil {
		attrs = p.pb.base
	}
	return nn.ExpandDepthwise(c, nn.ExpandDW{
		X: f32(x), XShape: x.Shape, W1: f32(w1), W1Shape: w1.Shape, B1: f32(b1), E1: ea,
		W2: f32(w2), W2Shape: w2.Shape, B2: f32(b2), E2: eb, Attrs: attrs, Y: f32(y), YShape: y.Shape,
	})
}
