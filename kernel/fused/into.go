package fused

import (
	"fmt"
	"math"
	"reflect"
	"sync/atomic"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// Into runs a fused layer without allocating: the base op's Into writes
// into out, then the Add and the activation run their Into in place on out
// (out as their input 0 and their output; elementwise kernels marked
// kernel.Op.InPlace tolerate that). SiLU runs its Sigmoid and Mul as an
// Elementwise layer over out, in place (block by block, so the Sigmoid's
// output needs only a block buffer). The operations and their order are
// Run's, so are the bits.
//
// That needs the base op's output to have the layer's output shape (an Add
// operand that broadcasts the base up does not fit), every part to have an
// Into, and the Add and activation to be InPlace; otherwise the layer runs
// Run and copies. The parts of each node are split once and cached, with
// the base output shape at the last input shapes seen.
//
// The in slice's entries are borrowed as scratch for the parts' argument
// lists and restored before returning; the tensors are never written.

type entry struct {
	p    *parts
	err  error
	memo atomic.Pointer[memo]
}

// memo is the base output shape for one set of base input shapes.
type memo struct {
	in   [][]int
	base []int
}

// prepare is Fused's Op.Prepare: the parts parsed, and the base op's own
// Prepare on the base inputs (under the base node, as into runs it).
func (f *fusedOp) prepare(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) error {
	e := f.entry(c, n)
	if e.err != nil {
		return e.err
	}
	base, err := f.reg.Lookup(e.p.base)
	if err != nil || base.Prepare == nil || len(in) < len(e.p.baseIn) {
		return err
	}
	return base.Prepare(c, e.p.base, in[:len(e.p.baseIn)])
}

// entryKey keys a Fused node's parsed parts in its kernel.State.
type entryKey struct{ n *ir.Node }

// entry returns n's parsed parts, kept in c's kernel.State (parsed on
// every call where c keeps none: shape inference).
func (f *fusedOp) entry(c *kernel.Ctx, n *ir.Node) *entry {
	e, _ := kernel.Prepared(c, entryKey{n}, nil, func() (*entry, error) {
		p, err := split(n)
		return &entry{p: p, err: err}, nil
	})
	return e
}

// baseShape returns the base op's output shape for its inputs in.
func (f *fusedOp) baseShape(e *entry, in []*tensor.Tensor) ([]int, error) {
	if m := e.memo.Load(); m != nil && len(m.in) == len(in) {
		same := true
		for i, t := range in {
			if t == nil || !equalInts(t.Shape, m.in[i]) {
				same = false
				break
			}
		}
		if same {
			return m.base, nil
		}
	}
	args := make([]ir.InferInput, len(in))
	m := &memo{in: make([][]int, len(in))}
	for i, t := range in {
		if t == nil {
			return nil, fmt.Errorf("fused layer: base input %d is missing", i)
		}
		args[i] = ir.InferInput{Present: true, Type: ir.TensorType(t)}
		m.in[i] = append([]int{}, t.Shape...)
	}
	ts, err := f.reg.InferNode(e.p.base, args)
	if err != nil {
		return nil, err
	}
	s, ok := ts[0].Static()
	if !ok {
		return nil, fmt.Errorf("fused layer: base output shape not static")
	}
	m.base = s
	e.memo.Store(m)
	return s, nil
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (f *fusedOp) into(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	e := f.entry(c, n)
	if e.err != nil {
		return e.err
	}
	if len(out) == 0 || out[0] == nil {
		return fmt.Errorf("fused layer: no output slot")
	}
	p := e.p
	nb := len(p.baseIn)
	base, err := f.reg.Lookup(p.base)
	if err != nil {
		return err
	}
	fits := base.Into != nil
	var add, add2, act *kernel.Op
	if p.add != nil {
		if add, err = f.reg.Lookup(p.add); err != nil {
			return err
		}
		fits = fits && add.Into != nil && add.InPlace
	}
	if p.add2 != nil {
		if add2, err = f.reg.Lookup(p.add2); err != nil {
			return err
		}
		fits = fits && add2.Into != nil && add2.InPlace
	}
	if p.act != nil {
		if act, err = f.reg.Lookup(p.act); err != nil {
			return err
		}
		fits = fits && act.Into != nil && act.InPlace
	}
	if p.mul != nil {
		mul, err := f.reg.Lookup(p.mul)
		if err != nil {
			return err
		}
		fits = fits && mul.Into != nil && mul.InPlace
	}
	if fits {
		s, err := f.baseShape(e, in[:nb])
		if err != nil {
			return err
		}
		fits = equalInts(s, out[0].Shape)
	}
	if !fits {
		res, err := f.run(c, n, in)
		if err != nil {
			return err
		}
		if r := res[0]; r.DType != out[0].DType || r.Len() != out[0].Len() {
			return fmt.Errorf("fused layer: result is %v%v, output slot is %v%v", r.DType, r.Shape, out[0].DType, out[0].Shape)
		}
		reflect.Copy(reflect.ValueOf(out[0].Data), reflect.ValueOf(res[0].Data))
		return nil
	}
	y := out[:1]
	// Hand the Add and the activation to the base kernel as an epilogue
	// where they are ones it can apply (kernel.Epilogue: a clamp, or Gelu
	// as Act); if it did, they are done. An activation the epilogue cannot
	// do then runs as its own pass after it.
	addDone, add2Done := false, false
	if ep, withAct, ok := epilogue(c, p, in, y[0]); ok {
		c.Epilogue = ep
		err := base.Into(c, p.base, in[:nb], y)
		applied := c.Epilogue.Applied
		c.Epilogue = kernel.Epilogue{}
		if err != nil {
			return fmt.Errorf("%s part: %w", p.base.OpType, err)
		}
		if applied && withAct {
			return nil
		}
		addDone = applied
		add2Done = applied && ep.Residual2 != nil
	} else if err := base.Into(c, p.base, in[:nb], y); err != nil {
		return fmt.Errorf("%s part: %w", p.base.OpType, err)
	}
	// The parts after the base take (y, their own inputs...): the entry
	// before their inputs in the fused node's list becomes y for the call.
	part := func(op *kernel.Op, x *ir.Node, first, end int) error {
		saved := in[first-1]
		in[first-1] = y[0]
		err := op.Into(c, x, in[first-1:end], y)
		in[first-1] = saved
		if err != nil {
			return fmt.Errorf("%s part: %w", x.OpType, err)
		}
		return nil
	}
	next := nb
	if add != nil {
		if !addDone {
			if err := part(add, p.add, next, next+1); err != nil {
				return err
			}
		}
		next++
	}
	if add2 != nil {
		if !add2Done {
			if err := part(add2, p.add2, next, next+1); err != nil {
				return err
			}
		}
		next++
	}
	if p.silu != nil {
		// x·gate(x) in place, blockwise (see Elementwise).
		if err := f.ew.into(c, p.silu, y, y); err != nil {
			return fmt.Errorf("%s part: %w", p.act.OpType, err)
		}
		return nil
	}
	if act != nil {
		if err := part(act, p.act, next, len(in)); err != nil {
			return err
		}
	}
	return nil
}

// epilogue returns the kernel.Epilogue that does the layer's Add and
// activation, or the Add alone, and true, when they can be one: a float32
// output, and an Add operand of exactly the output's shape (a
// residual) or of shape [N] or [1, ..., 1, N] with N the output's last
// dimension (a column bias); the base output is the Add's first operand,
// as in Run. withAct reports whether the epilogue does the activation as
// well: none, Relu, or Clip with float32 scalar bounds (read as clipInto
// reads them: attributes before opset 11, optional inputs since), Gelu
// (as Act, see actOf), SiLU or HardSigmoidMul (as Act: siluAct,
// hardSwishActs, for c's instruction set). An activation it cannot do is left to its own pass,
// after the Add, and only with an Add in the epilogue. A second Add
// (layout[1] == 2) goes in as Residual2 when its operand has exactly the
// output's shape; otherwise the epilogue does the first Add alone and the
// second Add and the activation run as their own passes. The epilogue's
// operations are then exactly the Adds' and the activation's, element by
// element.
func epilogue(c *kernel.Ctx, p *parts, in []*tensor.Tensor, out *tensor.Tensor) (e kernel.Epilogue, withAct, ok bool) {
	if out.DType != tensor.Float32 || (p.add == nil && p.act == nil) {
		return e, false, false
	}
	if p.add != nil {
		r := in[p.addIn[0]]
		if r == nil || r.DType != tensor.Float32 {
			return e, false, false
		}
		d, ok := r.Data.([]float32)
		if !ok || len(d) != r.Len() {
			return e, false, false
		}
		switch {
		case equalInts(r.Shape, out.Shape) && len(d) == out.Len():
			e.Residual = d
		case colBias(r.Shape, out.Shape):
			e.ColBias = d
		default:
			return e, false, false
		}
	}
	if p.add2 != nil {
		r := in[p.add2In[0]]
		var d []float32
		if r != nil && r.DType == tensor.Float32 {
			d, _ = r.Data.([]float32)
		}
		if d == nil || len(d) != r.Len() || !equalInts(r.Shape, out.Shape) || len(d) != out.Len() {
			return e, false, true
		}
		e.Residual2 = d
	}
	if p.act == nil {
		return e, true, true
	}
	if p.hsAct != nil {
		e.Act = p.hsAct[0]
		if c.AVX512() && amd64.EnabledZ {
			e.Act = p.hsAct[1]
		}
		return e, true, true
	}
	if p.silu != nil {
		e.Act = siluAct(c, p.sigFirst)
		return e, true, true
	}
	if e, ok := clampOf(p, in, e); ok {
		return e, true, true
	}
	if f := actOf(p); f != nil {
		e.Act = f
		return e, true, true
	}
	return e, false, p.add != nil
}

// actOf returns the slice function that elementwise's kernel runs for the
// layer's activation on float32 data, for the epilogue's Act, or nil
// where there is none to hand over: Gelu, approximate "none" or "tanh"
// (vmath.Vec.GeluErf32s, vmath.Vec.GeluTanh32s: the very functions of its
// float32 Into, so the same bits).
func actOf(p *parts) func(v vmath.Vec, dst, src []float32) {
	if p.act.OpType != "Gelu" || len(p.actIn) != 0 {
		return nil
	}
	switch p.act.String("approximate", "none") {
	case "none":
		return vmath.Vec.GeluErf32s
	case "tanh":
		return vmath.Vec.GeluTanh32s
	}
	return nil
}

// colBias reports whether an Add operand of shape r broadcasts over every
// axis of out but the last, where it has out's last dimension.
func colBias(r, out []int) bool {
	if len(r) == 0 || len(r) > len(out) || r[len(r)-1] != out[len(out)-1] || out[len(out)-1] == 0 {
		return false
	}
	for _, d := range r[:len(r)-1] {
		if d != 1 {
			return false
		}
	}
	return true
}

// clampOf adds the layer's activation to e as its bounds, when it is a
// Relu or a Clip with float32 scalar bounds.
func clampOf(p *parts, in []*tensor.Tensor, e kernel.Epilogue) (kernel.Epilogue, bool) {
	switch p.act.OpType {
	case "Relu":
		if len(p.actIn) != 0 {
			return e, false
		}
		e.Lo, e.HasLo = 0, true
	case "Clip":
		if v := p.act.Version; v > 0 && v < 11 {
			if len(p.actIn) != 0 {
				return e, false
			}
			e.Lo, e.HasLo = p.act.Float("min", float32(math.Inf(-1))), true
			e.Hi, e.HasHi = p.act.Float("max", float32(math.Inf(1))), true
			break
		}
		if len(p.actIn) > 2 {
			return e, false
		}
		for i, k := range p.actIn {
			b := in[k]
			if b == nil {
				continue
			}
			v, ok := b.Data.([]float32)
			if !ok || len(v) != 1 {
				return e, false
			}
			if i == 0 {
				e.Lo, e.HasLo = v[0], true
			} else {
				e.Hi, e.HasHi = v[0], true
			}
		}
	default:
		return e, false
	}
	return e, true
}
