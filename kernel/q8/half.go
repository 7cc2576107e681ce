package q8

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// Layout of a "vouch" F16 node: the wrapped layer's inputs, some of them
// float16 constants; attrs:
//
//	inner_op, inner_domain  string  the wrapped layer's op type and domain
//	inner_version           int
//	half                    ints    the indices of the float16 inputs
//	every other attribute belongs to the wrapped layer
//
// The float16 inputs are converted to float32 once per node and kept (the
// plan stores half the bytes; the layer computes in float32 exactly as the
// unwrapped layer would on the rounded weights).

type f16Op struct {
	reg *kernel.Registry
}

// halfKey keys an F16 node's converted layer in its kernel.State.
type halfKey struct{ n *ir.Node }

type halfLayer struct {
	inner *ir.Node
	op    *kernel.Op
	half  []int
	src   []*tensor.Tensor // the float16 tensors converted
	conv  []*tensor.Tensor // their float32 forms
	mu    sync.Mutex
	bufs  [][]*tensor.Tensor // free argument lists (a warm call allocates none)
}

// HalfToFloat32 converts h to float32 exactly, through F16C where c's
// level allows it; a NaN gets its quiet bit set (as F16C does), so both
// twins agree on every input.
func HalfToFloat32(c *kernel.Ctx, dst []float32, h []tensor.Half) {
	i := 0
	if twinsOf(c).half && len(h) >= 8 {
		n8 := len(h) &^ 7
		_ = dst[n8-1]
		halfToFloat(&dst[0], (*uint16)(unsafe.Pointer(&h[0])), n8)
		i = n8
	}
	for ; i < len(h); i++ {
		f := h[i].Float32()
		if f != f {
			f = math.Float32frombits(math.Float32bits(f) | 0x400000)
		}
		dst[i] = f
	}
}

func innerNode(n *ir.Node) (*ir.Node, []int, error) {
	op := n.String(fused.AttrInnerOp, "")
	if op == "" {
		return nil, nil, fmt.Errorf("q8: F16 layer has no inner_op")
	}
	in := &ir.Node{Name: n.Name, OpType: op, Domain: n.String("inner_domain", ""), Version: n.Int("inner_version", 0),
		Inputs: n.Inputs, Outputs: n.Outputs, Attrs: map[string]*ir.Attr{}}
	for k, a := range n.Attrs {
		switch k {
		case fused.AttrInnerOp, "inner_domain", "inner_version", "half":
		default:
			in.Attrs[k] = a
		}
	}
	var half []int
	for _, i := range n.Ints("half", nil) {
		if i < 0 || int(i) >= len(n.Inputs) {
			return nil, nil, fmt.Errorf("q8: F16 layer: half input %d out of range", i)
		}
		half = append(half, int(i))
	}
	return in, half, nil
}

// prepare is F16's Op.Prepare: the float16 inputs converted at bind time,
// where they are constants, and the inner layer's own Prepare.
func (f *f16Op) prepare(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) error {
	_, half, err := innerNode(n)
	if err != nil || !constant(in, half...) {
		return err
	}
	l, err := f.layer(c, n, in)
	if err != nil {
		return err
	}
	if l.op.Prepare != nil {
		return l.op.Prepare(c, l.inner, l.args(in, nil))
	}
	return nil
}

// layer returns n's inner layer with its float16 inputs converted, kept
// in c's kernel.State (converted again for other inputs, and on every
// call where c keeps no State).
func (f *f16Op) layer(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) (*halfLayer, error) {
	return kernel.Prepared(c, halfKey{n}, func(l *halfLayer) bool {
		for j, i := range l.half {
			if i >= len(in) || in[i] != l.src[j] {
				return false
			}
		}
		return true
	}, func() (*halfLayer, error) { return f.convert(c, n, in) })
}

func (f *f16Op) convert(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) (*halfLayer, error) {
	inner, half, err := innerNode(n)
	if err != nil {
		return nil, err
	}
	op, err := f.reg.Lookup(inner)
	if err != nil {
		return nil, err
	}
	l := &halfLayer{inner: inner, op: op, half: half}
	for _, i := range half {
		if i >= len(in) || in[i] == nil {
			return nil, fmt.Errorf("q8: F16 layer: input %d is missing", i)
		}
		h, ok := in[i].Data.([]tensor.Half)
		if !ok {
			return nil, fmt.Errorf("q8: F16 layer: input %d is %v, want float16", i, in[i].DType)
		}
		t := tensor.New(tensor.Float32, in[i].Shape...)
		HalfToFloat32(c, t.Data.([]float32), h)
		l.src = append(l.src, in[i])
		l.conv = append(l.conv, t)
	}
	return l, nil
}

// args returns in with the float16 inputs replaced by their conversions
// (a copy: in is the executor's).
func (l *halfLayer) args(in []*tensor.Tensor, buf []*tensor.Tensor) []*tensor.Tensor {
	buf = append(buf[:0], in...)
	for j, i := range l.half {
		buf[i] = l.conv[j]
	}
	return buf
}

func (f *f16Op) run(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	l, err := f.layer(c, n, in)
	if err != nil {
		return nil, err
	}
	return l.op.Run(c, l.inner, l.args(in, nil))
}

func (f *f16Op) into(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	l, err := f.layer(c, n, in)
	if err != nil {
		return err
	}
	l.mu.Lock()
	var buf []*tensor.Tensor
	if k := len(l.bufs); k > 0 {
		buf, l.bufs = l.bufs[k-1], l.bufs[:k-1]
	}
	l.mu.Unlock()
	args := l.args(in, buf)
	defer func() {
		clear(args)
		l.mu.Lock()
		l.bufs = append(l.bufs, args)
		l.mu.Unlock()
	}()
	if l.op.Into != nil {
		return l.op.Into(c, l.inner, args, out)
	}
	res, err := l.op.Run(c, l.inner, args)
	if err != nil {
		return err
	}
	for i, o := range out {
		if o != nil && i < len(res) {
			*o = *res[i]
		}
	}
	return nil
}

func halfTypes(n *ir.Node, in []ir.InferInput) []ir.InferInput {
	out := append([]ir.InferInput{}, in...)
	for _, i := range n.Ints("half", nil) {
		if int(i) < len(out) && i >= 0 {
			out[i].Type.DType = tensor.Float32
			out[i].Const = nil
		}
	}
	return out
}

func (f *f16Op) infer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	inner, _, err := innerNode(n)
	if err != nil {
		return nil, err
	}
	return f.reg.InferNode(inner, halfTypes(n, in))
}

// tactics are the wrapped layer's (a Fused layer's are its base op's).
func (f *f16Op) tactics(n *ir.Node, in []ir.Type) []string {
	inner, half, err := innerNode(n)
	if err != nil {
		return nil
	}
	ts := append([]ir.Type{}, in...)
	for _, i := range half {
		if i < len(ts) {
			ts[i].DType = tensor.Float32
		}
	}
	if h, ok := fused.LayerOf(inner); ok {
		if h.BaseInputs < 1 || h.BaseInputs > len(ts) {
			return nil
		}
		inner = &ir.Node{Name: n.Name, OpType: h.Base, Version: h.BaseVersion, Attrs: inner.Attrs}
		ts = ts[:h.BaseInputs]
	}
	op, err := f.reg.Lookup(inner)
	if err != nil || op.Tactics == nil {
		return nil
	}
	return op.Tactics(inner, ts)
}
