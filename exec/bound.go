package exec

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"time"
	"unsafe"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// Bound is an Executor bound to one set of input shapes: every value's type
// is inferred once, the intermediate values live in one arena planned by
// PlanArena, and every per-node slice is allocated up front. When every
// layer has an allocation-free kernel (kernel.Op.Into), Execute allocates
// nothing; a layer without one runs its allocating kernel, which is correct
// but not free.
//
// A Bound is not safe for concurrent use: it holds one set of buffers. Bind
// one per goroutine (binding reads the Executor and never writes it).
type Bound struct {
	// Trace, when set, is called after each layer with its wall time (a
	// per-layer profile of the allocation-free path; `vouch bench --layers`).
	Trace func(n *ir.Node, d time.Duration)

	e      *Executor
	types  map[string]ir.Type
	arena  *plan.Arena
	buf    []byte // the arena, Alignment-aligned
	in     []*tensor.Tensor
	inType []ir.Type
	steps  []step
	outs   []*tensor.Tensor
	cells  map[string]*tensor.Tensor
	ctx    kernel.Ctx
	cur    int
	// runState is the accounting of the run in progress (its limits).
	runState run
	// concats counts the Concats by what they run (concat.go).
	concats ConcatStats
}

// step is one node's preallocated call.
type step struct {
	n    *ir.Node
	op   *kernel.Op
	mode int // runInto, runView or runAlloc
	in   []*tensor.Tensor
	out  []*tensor.Tensor // cells of the outputs (nil for omitted ones)
	// want holds the static types of an allocating kernel's outputs, to
	// check its results against (RankKnown false where not static).
	want []ir.Type
	sub  bool // the node has subgraphs
	// state is the node's prepared kernel state for this binding
	// (kernel.Prepared: packed weights, geometry), freed with the Bound.
	state *kernel.State
	// copies are what a Concat whose output holds some of its inputs
	// still copies (runCopy).
	copies []copyPart
}

// copyPart is one input of a Concat copied into its block of the output.
type copyPart struct {
	src *tensor.Tensor // the input's cell
	dst any            // the block: a slice of the arena of src's dtype
}

const (
	runInto = iota
	runView
	runAlloc
	runCopy
)

// Bind prepares the executor's graph for inputs of the given shapes, in
// graph-input order. It fails if a shape does not fit its input's declared
// type or if shape inference fails at those shapes.
func (e *Executor) Bind(shapes [][]int) (*Bound, error) {
	g := e.g
	if len(shapes) != len(g.Inputs) {
		return nil, fmt.Errorf("exec: %w: graph has %d inputs, got %d shapes", ErrInput, len(g.Inputs), len(shapes))
	}
	// Infer on a copy of the graph's header: the graph (and its declared
	// types) are shared with concurrent executors.
	gc := *g
	gc.Inputs = make([]*ir.Value, len(g.Inputs))
	inType := make([]ir.Type, len(g.Inputs))
	for i, v := range g.Inputs {
		if err := checkShape(v, shapes[i]); err != nil {
			return nil, err
		}
		inType[i] = ir.StaticType(v.Type.DType, shapes[i])
		gc.Inputs[i] = &ir.Value{Name: v.Name, Type: inType[i]}
	}
	gc.Types = make(map[string]ir.Type, len(g.Types))
	for k, t := range g.Types {
		gc.Types[k] = t
	}
	if err := specialize(&gc, e.reg, e.ops); err != nil {
		return nil, fmt.Errorf("exec: bind: %w", err)
	}
	lay := planLayout(&gc, gc.Types, e.reg, !e.copyConcats)
	if p := lay.arena.PeakBytes; p > e.limits.MaxBytes || p < 0 {
		return nil, fmt.Errorf("exec: bind: %w: the arena at these input shapes needs %d bytes, more than the budget of %d", ErrBudget, p, e.limits.MaxBytes)
	}
	for _, n := range gc.Nodes {
		for _, o := range n.Outputs {
			if sz, ok := TypeBytes(gc.Types[o]); ok && sz > e.limits.MaxBytes {
				return nil, fmt.Errorf("exec: bind: %s: %w: output %q would be %v, %d bytes, more than the budget of %d bytes per value", n.Label(), ErrBudget, o, gc.Types[o], sz, e.limits.MaxBytes)
			}
		}
	}
	b := &Bound{e: e, types: gc.Types, arena: lay.arena, concats: lay.concats, inType: inType, cells: map[string]*tensor.Tensor{}, ctx: e.kernelCtx()}
	if p := lay.arena.PeakBytes; p > 0 {
		raw := make([]byte, p+Alignment)
		pad := int((Alignment - uintptr(unsafe.Pointer(&raw[0]))%Alignment) % Alignment)
		b.buf = raw[pad : pad+int(p) : pad+int(p)]
	}
	for name, t := range gc.Initializers {
		b.cells[name] = t
	}
	b.in = make([]*tensor.Tensor, len(g.Inputs))
	for i, v := range g.Inputs {
		c := &tensor.Tensor{DType: inType[i].DType, Shape: shapes[i]}
		b.in[i] = c
		b.cells[v.Name] = c
	}
	for name, s := range lay.arena.Slots {
		t := gc.Types[name]
		shape, _ := t.Static()
		b.cells[name] = &tensor.Tensor{DType: t.DType, Shape: shape, Data: carve(b.buf, t.DType, s.Offset, tensor.NumElems(shape))}
	}
	for i, n := range gc.Nodes {
		s := step{n: n, op: e.ops[n], in: make([]*tensor.Tensor, len(n.Inputs)), out: make([]*tensor.Tensor, len(n.Outputs)), state: new(kernel.State)}
		for j, name := range n.Inputs {
			if name == "" {
				continue
			}
			c, ok := b.cells[name]
			if !ok {
				return nil, fmt.Errorf("exec: %s: input %q has no value", n.Label(), name)
			}
			s.in[j] = c
		}
		switch {
		case lay.view[i]:
			s.mode = runView
		case len(lay.parts[i]) > 0:
			s.mode = runCopy
			at := lay.arena.Slots[n.Outputs[0]].Offset
			for _, p := range lay.parts[i] {
				t := gc.Types[n.Inputs[p.in]]
				shape, _ := t.Static()
				s.copies = append(s.copies, copyPart{src: s.in[p.in], dst: carve(b.buf, t.DType, at+p.off, tensor.NumElems(shape))})
			}
		case lay.into[i]:
			s.mode = runInto
		default:
			s.mode = runAlloc
			s.want = make([]ir.Type, len(n.Outputs))
			for _, a := range n.Attrs {
				if len(subgraphs(a)) > 0 {
					s.sub = true
				}
			}
		}
		for j, name := range n.Outputs {
			if name == "" {
				continue
			}
			c, ok := b.cells[name]
			if !ok {
				c = &tensor.Tensor{}
				b.cells[name] = c
			}
			s.out[j] = c
			if s.mode == runAlloc {
				if t, ok := gc.Types[name]; ok {
					if _, static := t.Static(); static {
						s.want[j] = t
					}
				}
			}
		}
		b.steps = append(b.steps, s)
	}
	if err := b.prepare(gc.Initializers); err != nil {
		return nil, err
	}
	b.outs = make([]*tensor.Tensor, len(g.Outputs))
	for i, o := range g.Outputs {
		c, ok := b.cells[o.Name]
		if !ok {
			return nil, fmt.Errorf("exec: output %q is never produced", o.Name)
		}
		b.outs[i] = c
	}
	return b, nil
}

// prepare runs each allocation-free step's Op.Prepare under the step's
// context and State: its inputs' dtypes and shapes, and the values of the
// constant ones (consts: the bound graph's initializers).
func (b *Bound) prepare(consts map[string]*tensor.Tensor) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("exec: bind: %s: Prepare panicked: %v\n%s", b.steps[b.cur].n.Label(), r, debug.Stack())
		}
	}()
	for i := range b.steps {
		s := &b.steps[i]
		if s.mode != runInto || s.op.Prepare == nil {
			continue
		}
		b.cur = i
		in := make([]*tensor.Tensor, len(s.in))
		for j, t := range s.in {
			if t == nil {
				continue
			}
			if c, ok := consts[s.n.Inputs[j]]; ok {
				in[j] = c
				continue
			}
			in[j] = &tensor.Tensor{DType: t.DType, Shape: t.Shape}
		}
		ctx := b.ctx
		ctx.State = s.state
		if err := s.op.Prepare(&ctx, s.n, in); err != nil {
			return fmt.Errorf("exec: bind: %s: %w", s.n.Label(), err)
		}
	}
	return nil
}

// checkShape verifies that shape fits v's declared type.
func checkShape(v *ir.Value, shape []int) error {
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("exec: %w: input %q: negative dimension in %s", ErrInput, v.Name, tensor.ShapeString(shape))
		}
	}
	if !v.Type.RankKnown {
		return nil
	}
	if len(v.Type.Shape) != len(shape) {
		return fmt.Errorf("exec: %w: input %q: expected shape %v (rank %d), got %s", ErrInput, v.Name, v.Type, len(v.Type.Shape), tensor.ShapeString(shape))
	}
	for i, d := range v.Type.Shape {
		if d.Known() && int(d.Value) != shape[i] {
			return fmt.Errorf("exec: %w: input %q: dimension %d: expected %d, got %d (shape %s)", ErrInput, v.Name, i, d.Value, shape[i], tensor.ShapeString(shape))
		}
	}
	return nil
}

// carve returns n elements of dt's Go type laid over buf at off.
func carve(buf []byte, dt tensor.DType, off int64, n int) any {
	if n == 0 {
		return tensor.MakeSlice(dt, 0)
	}
	p := unsafe.Pointer(&buf[off])
	switch dt {
	case tensor.Float32:
		return unsafe.Slice((*float32)(p), n)
	case tensor.Float64:
		return unsafe.Slice((*float64)(p), n)
	case tensor.Float16:
		return unsafe.Slice((*tensor.Half)(p), n)
	case tensor.BFloat16:
		return unsafe.Slice((*tensor.BHalf)(p), n)
	case tensor.Int8:
		return unsafe.Slice((*int8)(p), n)
	case tensor.Int16:
		return unsafe.Slice((*int16)(p), n)
	case tensor.Int32:
		return unsafe.Slice((*int32)(p), n)
	case tensor.Int64:
		return unsafe.Slice((*int64)(p), n)
	case tensor.Uint8:
		return unsafe.Slice((*uint8)(p), n)
	case tensor.Uint16:
		return unsafe.Slice((*uint16)(p), n)
	case tensor.Uint32:
		return unsafe.Slice((*uint32)(p), n)
	case tensor.Uint64:
		return unsafe.Slice((*uint64)(p), n)
	case tensor.Bool:
		return unsafe.Slice((*bool)(p), n)
	}
	panic(fmt.Sprintf("exec: no arena slot for dtype %v", dt)) // staticNode keeps others out
}

// Arena returns the memory plan this Bound runs with; PeakBytes is the
// size of its arena.
func (b *Bound) Arena() *plan.Arena { return b.arena }

// Types returns every value's type at the bound shapes. The map must not be
// modified.
func (b *Bound) Types() map[string]ir.Type { return b.types }

// Allocating lists the nodes that run an allocating kernel (no Into, or a
// value whose type is not static at the bound shapes).
func (b *Bound) Allocating() []*ir.Node {
	var out []*ir.Node
	for _, s := range b.steps {
		if s.mode == runAlloc {
			out = append(out, s.n)
		}
	}
	return out
}

// Execute runs the graph on inputs, in graph-input order, each of the bound
// shape and the declared dtype. The outputs, in graph-output order, are
// owned by the Bound: they stay valid until the next Execute, which
// overwrites them.
func (b *Bound) Execute(inputs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if len(inputs) != len(b.in) {
		return nil, fmt.Errorf("exec: %w: graph has %d inputs, got %d", ErrInput, len(b.in), len(inputs))
	}
	for i, t := range inputs {
		name := b.e.g.Inputs[i].Name
		if t == nil {
			return nil, fmt.Errorf("exec: %w: missing input %q", ErrInput, name)
		}
		if err := t.Check(); err != nil {
			return nil, fmt.Errorf("exec: %w: input %q: %w", ErrInput, name, err)
		}
		want := b.in[i]
		if want.DType != tensor.Undefined && t.DType != want.DType {
			return nil, fmt.Errorf("exec: %w: input %q: expected dtype %v, got %v", ErrInput, name, want.DType, t.DType)
		}
		if !sameInts(t.Shape, want.Shape) {
			return nil, fmt.Errorf("exec: %w: input %q: bound to shape %s, got %s", ErrInput, name, tensor.ShapeString(want.Shape), tensor.ShapeString(t.Shape))
		}
	}
	for i, t := range inputs {
		b.in[i].DType, b.in[i].Data = t.DType, t.Data
	}
	if err := b.run(); err != nil {
		return nil, err
	}
	return b.outs, nil
}

// ExecuteContext is Execute that stops between nodes, and between the body
// runs of a Loop or Scan, once ctx is done (its client went away, its
// deadline passed): the error then wraps ctx's cause. Execute's caller
// would otherwise burn a worker on a run whose answer nobody reads.
func (b *Bound) ExecuteContext(ctx context.Context, inputs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	b.runState.ctx = ctx
	defer func() { b.runState.ctx = nil }()
	return b.Execute(inputs)
}

func (b *Bound) run() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("exec: %s: kernel panicked: %v\n%s", b.steps[b.cur].n.Label(), r, debug.Stack())
		}
	}()
	b.ctx.Trace = b.Trace
	// The workers poll for ranges through the whole run rather than
	// parking between split layers (a parked worker's wake-up cost 29 µs
	// against a 7.8 µs split 10 µs task: kernel/parallel BenchmarkHandoff).
	b.ctx.Pool.Hold()
	defer b.ctx.Pool.Release()
	r := &b.runState
	r.reset(b.e.limits)
	for i := range b.steps {
		b.cur = i
		s := &b.steps[i]
		if err := r.check(s.n); err != nil {
			return err
		}
		var start time.Time
		if b.Trace != nil {
			start = time.Now()
		}
		switch s.mode {
		case runView:
		case runCopy:
			for _, c := range s.copies {
				reflect.Copy(reflect.ValueOf(c.dst), reflect.ValueOf(c.src.Data))
			}
		case runInto:
			b.ctx.State = s.state
			if err := s.op.Into(&b.ctx, s.n, s.in, s.out); err != nil {
				return fmt.Errorf("exec: %s: %w", s.n.Label(), err)
			}
		default:
			if err := b.runAlloc(s); err != nil {
				return err
			}
		}
		if b.Trace != nil {
			b.Trace(s.n, time.Since(start))
		}
	}
	return nil
}

// runAlloc runs a node's allocating kernel and checks its outputs against
// the types inferred at Bind (the arena-planned nodes after it rely on
// them).
func (b *Bound) runAlloc(s *step) error {
	var scope map[string]*tensor.Tensor
	if s.sub {
		scope = make(map[string]*tensor.Tensor, len(b.cells))
		for k, c := range b.cells {
			scope[k] = c
		}
	}
	in := s.in
	outs, err := b.e.runNode(s.n, in, scope, &b.runState, false)
	if err != nil {
		return err
	}
	for j, c := range s.out {
		if c == nil {
			continue
		}
		name := s.n.Outputs[j]
		if j >= len(outs) || outs[j] == nil {
			return fmt.Errorf("exec: %s: kernel produced no value for output %q", s.n.Label(), name)
		}
		t := outs[j]
		if err := t.Check(); err != nil {
			return fmt.Errorf("exec: %s: output %q: %w", s.n.Label(), name, err)
		}
		if w := s.want[j]; w.RankKnown {
			shape, _ := w.Static()
			if t.DType != w.DType || !sameInts(t.Shape, shape) {
				return fmt.Errorf("exec: %s: output %q is %v%s, shape inference at the bound shapes gave %v", s.n.Label(), name, t.DType, tensor.ShapeString(t.Shape), w)
			}
		}
		*c = *t
	}
	return nil
}
