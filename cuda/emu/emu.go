// Package emu runs a fast-mode GPU plan on the CPU with the bits the GPU
// gave: every layer the plan places on a fast tensor-core kernel runs
// through cuda/mma's emulation of that GPU architecture's MMA arithmetic
// (the fast kernels' own k order, 16-bit conversions and FP32 epilogue),
// every other layer through vouch's CPU kernels, which give the exact GPU
// kernels' bits. It is how a fast-mode decision replays bit for bit on a
// machine without a GPU (issue 19, item 5).
//
// Rewrite turns the plan's graph into one the CPU executor runs: a
// ConvChain holding a fast convolution is unfolded into its body nodes (the
// chain's bits are its nodes'), and each fast layer becomes a node of
// Domain, op Fast, keeping the layer's inputs, outputs and attributes plus
// the placement's kernel name; Ops runs those nodes.
package emu

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/vouchml/vouch/cuda/mma"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// Domain is the operator domain of the emulated fast layers.
const Domain = "vouch.emu"

// Attributes an emulated node carries besides the layer's own.
const (
	attrOp     = "emu_op"     // the layer's op type
	attrDomain = "emu_domain" // the layer's domain
	attrKernel = "emu_kernel" // the placement's fast kernel name
)

// ErrPlan wraps every refusal: not a fast plan, no model for its
// architecture, a fast kernel this emulation does not know.
var ErrPlan = errors.New("emu: plan")

// Backend is the audit record's backend of an emulated run, for arch.
func Backend(arch string) string { return "cpu-emulated-" + arch + "-fast" }

// Check reports whether plan p can be emulated: a fast GPU plan whose
// architecture has a fitted MMA model.
func Check(p *plan.Plan) error {
	g := p.Header.GPU
	if g == nil || g.Mode != plan.ModeFast {
		return fmt.Errorf("%w: not a fast-mode GPU plan (nothing to emulate: run it on the CPU)", ErrPlan)
	}
	for _, f := range []mma.Format{mma.FP16, mma.BF16} {
		if _, ok := mma.ModelFor(g.Arch, f); !ok {
			return fmt.Errorf("%w: no fitted tensor-core model for %s (%v): this plan's fast layers replay bit for bit only on an %s GPU", ErrPlan, g.Arch, f, g.Arch)
		}
	}
	return nil
}

// Rewrite returns the graph of plan p in which every fast layer is an
// emulated node (see the package doc). p's graph is not modified.
func Rewrite(p *plan.Plan) (*ir.Graph, error) {
	if err := Check(p); err != nil {
		return nil, err
	}
	src := p.Graph
	pl := p.Header.GPU.Layers
	if len(pl) != len(src.Nodes) {
		return nil, fmt.Errorf("%w: placement of %d layers for %d nodes", ErrPlan, len(pl), len(src.Nodes))
	}
	g := *src
	g.Nodes = nil
	g.Initializers = maps.Clone(src.Initializers)
	arch := p.Header.GPU.Arch
	for i, n := range src.Nodes {
		k := pl[i].Kernel
		if !pl[i].Fast() {
			g.Nodes = append(g.Nodes, n)
			continue
		}
		prec, op, _ := plan.ParseFastKernel(k)
		if n.OpType == fused.ConvChain {
			body, err := chainBody(n, prec, op, arch)
			if err != nil {
				return nil, fmt.Errorf("%w: layer %s: %w", ErrPlan, n.Name, err)
			}
			for name, t := range n.Attrs["body"].G.Initializers {
				if have, dup := g.Initializers[name]; dup && have != t && (have.DType != t.DType || !slices.Equal(have.Shape, t.Shape) || !reflect.DeepEqual(have.Data, t.Data)) {
					return nil, fmt.Errorf("%w: layer %s: body weight %q is also a different graph weight", ErrPlan, n.Name, name)
				}
				g.Initializers[name] = t
			}
			g.Nodes = append(g.Nodes, body...)
			continue
		}
		e, err := emulated(n, prec, k, arch)
		if err != nil {
			return nil, fmt.Errorf("%w: layer %s: %w", ErrPlan, n.Name, err)
		}
		g.Nodes = append(g.Nodes, e)
	}
	return &g, nil
}

// chainBody unfolds a ConvChain whose placement is "conv(chain T1,T2,...)":
// its body nodes in order, those with a tile emulated, the "exact" ones
// as they are.
func chainBody(n *ir.Node, prec plan.Precision, op, arch string) ([]*ir.Node, error) {
	a := n.Attrs["body"]
	if a == nil || a.G == nil {
		return nil, fmt.Errorf("ConvChain without a body")
	}
	list, ok := strings.CutPrefix(op, "conv(chain ")
	list, ok2 := strings.CutSuffix(list, ")")
	if !ok || !ok2 {
		return nil, fmt.Errorf("fast kernel %q for a ConvChain: want conv(chain TILE,...)", op)
	}
	tiles := strings.Split(list, ",")
	body := a.G
	if len(tiles) != len(body.Nodes) {
		return nil, fmt.Errorf("fast kernel %q names %d body layers, the chain has %d", op, len(tiles), len(body.Nodes))
	}
	if len(body.Inputs) != 1 || len(body.Outputs) != 1 || body.Inputs[0].Name != n.Input(0) || body.Outputs[0].Name != n.Outputs[0] {
		return nil, fmt.Errorf("ConvChain whose body's input and output are not the layer's")
	}
	var out []*ir.Node
	for i, b := range body.Nodes {
		if tiles[i] == "exact" {
			out = append(out, b)
			continue
		}
		e, err := emulated(b, prec, plan.FastKernel(prec, "conv("+tiles[i]+")"), arch)
		if err != nil {
			return nil, fmt.Errorf("body layer %s: %w", b.Name, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// emulated is node n as an emulated fast layer of kernel k.
func emulated(n *ir.Node, prec plan.Precision, k, arch string) (*ir.Node, error) {
	switch fused.BaseOf(n) {
	case "Conv", "Gemm", "MatMul", "Attention":
	default:
		return nil, fmt.Errorf("fast kernel %q for a %s layer: this vouch emulates fast Conv, Gemm, MatMul and Attention layers", k, n.OpType)
	}
	if prec == plan.Int8 {
		if _, err := int8Scale(k); err != nil {
			return nil, err
		}
		if fused.BaseOf(n) == "MatMul" {
			return nil, fmt.Errorf("fast kernel %q for a MatMul: the int8 kernels run Conv and Gemm", k)
		}
	} else if _, err := format(prec); err != nil {
		return nil, err
	}
	if fused.BaseOf(n) == "Conv" && n.Int("group", 1) != 1 {
		return nil, fmt.Errorf("fast kernel %q for a Conv in %d groups (the tensor-core kernels take one)", k, n.Int("group", 1))
	}
	e := *n
	e.Domain, e.OpType = Domain, "Fast"
	e.Inputs, e.Outputs = slices.Clone(n.Inputs), slices.Clone(n.Outputs)
	e.Attrs = maps.Clone(n.Attrs)
	if e.Attrs == nil {
		e.Attrs = map[string]*ir.Attr{}
	}
	for name, v := range map[string]string{attrOp: n.OpType, attrDomain: n.Domain, attrKernel: k, "emu_arch": arch} {
		e.Attrs[name] = &ir.Attr{Name: name, Kind: ir.AttrString, S: v}
	}
	return &e, nil
}

// original is an emulated node as the layer it stands for.
func original(n *ir.Node) *ir.Node {
	o := *n
	o.Domain, o.OpType = n.String(attrDomain, ""), n.String(attrOp, "")
	o.Attrs = maps.Clone(n.Attrs)
	for _, k := range []string{attrOp, attrDomain, attrKernel, "emu_arch"} {
		delete(o.Attrs, k)
	}
	return &o
}

func format(p plan.Precision) (mma.Format, error) {
	switch p {
	case plan.FP16:
		return mma.FP16, nil
	case plan.BF16:
		return mma.BF16, nil
	}
	return 0, fmt.Errorf("precision %q has no emulated tensor-core kernel (fp16, bf16)", p)
}

// Ops returns the emulated layers' op table (register it under Domain);
// base is the registry of the layers' own kernels (shape inference, and
// the exact passes after a fast MatMul).
func Ops(base *kernel.Registry) kernel.Table {
	o := &fastOp{base: base}
	return kernel.Table{"Fast": {Run: o.run, Infer: o.infer}}
}

type fastOp struct{ base *kernel.Registry }

func (o *fastOp) infer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	orig := original(n)
	op, err := o.base.Lookup(orig)
	if err != nil {
		return nil, err
	}
	return op.Infer(orig, in)
}

func (o *fastOp) run(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	k := n.String(attrKernel, "")
	prec, _, ok := plan.ParseFastKernel(k)
	if !ok {
		return nil, fmt.Errorf("emu: %q is not a fast kernel", k)
	}
	orig := original(n)
	if prec == plan.Int8 {
		sx, err := int8Scale(k)
		if err != nil {
			return nil, err
		}
		switch fused.BaseOf(orig) {
		case "Conv":
			return conv(int8Product(sx), orig, in)
		case "Gemm":
			return gemm(int8Product(sx), orig, in)
		}
		return nil, fmt.Errorf("emu: no int8 emulation of %s", orig.OpType)
	}
	f, err := format(prec)
	if err != nil {
		return nil, err
	}
	arch := n.String("emu_arch", "")
	m, ok := mma.ModelFor(arch, f)
	if !ok {
		return nil, fmt.Errorf("emu: no tensor-core model for %s %v", arch, f)
	}
	switch fused.BaseOf(orig) {
	case "Conv":
		return conv(mmaProduct(m, f), orig, in)
	case "Gemm":
		return gemm(mmaProduct(m, f), orig, in)
	case "MatMul":
		return o.matmul(c, m, f, orig, in)
	case "Attention":
		return attention(m, f, orig, in, n.String(attrKernel, ""))
	}
	return nil, fmt.Errorf("emu: no emulation of %s", orig.OpType)
}
