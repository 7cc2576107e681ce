package fused

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// into is a Chain layer's allocation-free form: it runs the body's nodes
// in order through their own Into kernels, on scratch tensors preallocated
// for the body's intermediate values. The kernels and their order are
// those of the subgraph run (and Into == Run for each), so the bits are
// the same.
//
// The first call for a node at given input types and shapes builds a
// *chainRun: it runs the body node by node through Run, which gives each
// intermediate value's type and shape, allocates a scratch tensor of each,
// and copies the result out. Later calls at the same types and shapes take
// a prepared run from the node's free list (one per concurrent caller) and
// allocate nothing. A body that reads a value from outside itself, or a
// node without Into, runs through the subgraph runner and copies.
func (c *chainOp) into(ctx *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if len(out) == 0 || out[0] == nil {
		return fmt.Errorf("%s layer: no output slot", n.OpType)
	}
	e := c.entry(ctx, n)
	r := e.get(in)
	if r == nil {
		var err error
		r, err = c.build(ctx, n, in, out[0])
		if err != nil {
			return err
		}
		if r != nil {
			e.put(r)
		}
		return nil
	}
	err := r.exec(ctx, in, out[0])
	e.put(r)
	return err
}

type chainEntry struct {
	mu   sync.Mutex
	free []*chainRun
	// viaRun is set once the body is found not to fit (a node without
	// Into, or a value from outside the body).
	viaRun bool
}

// chainKey keys a chain's prepared runs in its node's kernel.State.
type chainKey struct{ n *ir.Node }

// entry returns n's prepared runs, kept in ctx's kernel.State (none are
// kept where ctx keeps no State: every call prepares its own).
func (c *chainOp) entry(ctx *kernel.Ctx, n *ir.Node) *chainEntry {
	e, _ := kernel.Prepared(ctx, chainKey{n}, nil, func() (*chainEntry, error) { return &chainEntry{}, nil })
	return e
}

// get pops a prepared run for inputs of in's types and shapes, or nil.
func (e *chainEntry) get(in []*tensor.Tensor) *chainRun {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.free) - 1; i >= 0; i-- {
		if r := e.free[i]; r.fits(in) {
			e.free = slices.Delete(e.free, i, i+1)
			return r
		}
	}
	return nil
}

// put returns r to the free list (which keeps at most 16 runs: more are
// dropped, and rebuilt on demand).
func (e *chainEntry) put(r *chainRun) {
	e.mu.Lock()
	if len(e.free) < 16 {
		e.free = append(e.free, r)
	}
	e.mu.Unlock()
}

type chainStep struct {
	op      *kernel.Op
	n       *ir.Node
	in, out []*tensor.Tensor
}

// chainRun is one prepared execution of a body at fixed input types and
// shapes.
type chainRun struct {
	cells []*tensor.Tensor // the body's inputs, pointed at the layer's
	steps []chainStep
	// result is the body's output value; when direct, it is written by
	// steps[last].out[slot] and read by no other step, so that slot is
	// pointed at the layer's output for the call.
	result     *tensor.Tensor
	direct     bool
	last, slot int
}

func (r *chainRun) fits(in []*tensor.Tensor) bool {
	if len(in) != len(r.cells) {
		return false
	}
	for i, t := range in {
		c := r.cells[i]
		if t == nil || t.DType != c.DType || !equalInts(t.Shape, c.Shape) {
			return false
		}
	}
	return true
}

func (r *chainRun) exec(ctx *kernel.Ctx, in []*tensor.Tensor, y *tensor.Tensor) error {
	for i, t := range in {
		r.cells[i].Data = t.Data
	}
	direct := r.direct && y.DType == r.result.DType && equalInts(y.Shape, r.result.Shape)
	if direct {
		r.steps[r.last].out[r.slot] = y
	}
	var err error
	for i := range r.steps {
		s := &r.steps[i]
		var t0 time.Time
		if ctx.Trace != nil {
			t0 = time.Now()
		}
		if err = s.op.Into(ctx, s.n, s.in, s.out); err != nil {
			err = fmt.Errorf("%s (%s) in chain: %w", s.n.Label(), s.n.OpType, err)
			break
		}
		if ctx.Trace != nil {
			ctx.Trace(s.n, time.Since(t0))
		}
	}
	if direct {
		r.steps[r.last].out[r.slot] = r.result
	}
	for _, c := range r.cells {
		c.Data = nil
	}
	if err != nil || direct {
		return err
	}
	return copyResult(y, r.result)
}

func copyResult(y, res *tensor.Tensor) error {
	if res.DType != y.DType || res.Len() != y.Len() {
		return fmt.Errorf("chain layer: result is %v%v, output slot is %v%v", res.DType, res.Shape, y.DType, y.Shape)
	}
	reflect.Copy(reflect.ValueOf(y.Data), reflect.ValueOf(res.Data))
	return nil
}

// build runs the body through Run for this call and prepares a chainRun
// for the next ones (nil when the body does not fit Into).
func (c *chainOp) build(ctx *kernel.Ctx, n *ir.Node, in []*tensor.Tensor, y *tensor.Tensor) (*chainRun, error) {
	g, err := body(n)
	if err != nil {
		return nil, err
	}
	e := c.entry(ctx, n)
	e.mu.Lock()
	viaRun := e.viaRun
	e.mu.Unlock()
	r, res, ok, err := c.prepare(ctx, g, in)
	if err != nil {
		return nil, err
	}
	if !ok || viaRun {
		e.mu.Lock()
		e.viaRun = true
		e.mu.Unlock()
		outs, err := c.run(ctx, n, in)
		if err != nil {
			return nil, err
		}
		return nil, copyResult(y, outs[0])
	}
	return r, copyResult(y, res)
}

// prepare runs g's nodes through Run on in, building the steps; ok is
// false when the body does not fit.
func (c *chainOp) prepare(ctx *kernel.Ctx, g *ir.Graph, in []*tensor.Tensor) (r *chainRun, res *tensor.Tensor, ok bool, err error) {
	r = &chainRun{}
	vals := make(map[string]*tensor.Tensor, len(g.Initializers)+len(g.Nodes)+len(in))
	scratch := map[*tensor.Tensor]bool{}
	for k, v := range g.Initializers {
		vals[k] = v
	}
	for i, v := range g.Inputs {
		t := in[i]
		if t == nil {
			return nil, nil, false, nil
		}
		cell := &tensor.Tensor{DType: t.DType, Shape: slices.Clone(t.Shape), Data: t.Data}
		r.cells = append(r.cells, cell)
		vals[v.Name] = cell
	}
	// cur holds the values Run computed, for the next nodes' Run.
	cur := make(map[*tensor.Tensor]*tensor.Tensor)
	for _, nd := range g.Nodes {
		op, err := c.reg.Lookup(nd)
		if err != nil {
			return nil, nil, false, err
		}
		if op.Into == nil {
			return nil, nil, false, nil
		}
		s := chainStep{op: op, n: nd, in: make([]*tensor.Tensor, len(nd.Inputs)), out: make([]*tensor.Tensor, len(nd.Outputs))}
		args := make([]*tensor.Tensor, len(nd.Inputs))
		for j, name := range nd.Inputs {
			if name == "" {
				continue
			}
			t, found := vals[name]
			if !found {
				return nil, nil, false, nil // a value from outside the body
			}
			s.in[j] = t
			args[j] = t
			if v, ok := cur[t]; ok {
				args[j] = v
			}
		}
		outs, err := op.Run(ctx, nd, args)
		if err != nil {
			return nil, nil, false, fmt.Errorf("%s (%s) in chain: %w", nd.Label(), nd.OpType, err)
		}
		for j, name := range nd.Outputs {
			if name == "" || j >= len(outs) || outs[j] == nil {
				continue
			}
			o := outs[j]
			if _, isStr := o.Data.([]string); isStr {
				return nil, nil, false, nil
			}
			t := tensor.New(o.DType, o.Shape...)
			scratch[t] = true
			cur[t] = o
			s.out[j] = t
			vals[name] = t
		}
		r.steps = append(r.steps, s)
	}
	out := g.Outputs[0].Name
	t, found := vals[out]
	if !found || !scratch[t] {
		return nil, nil, false, nil
	}
	r.result = t
	res = cur[t]
	r.fuseScores()
	// Write the body's output straight into the layer's output when only
	// its producing step touches it.
	r.direct = true
	for i, s := range r.steps {
		for j, o := range s.out {
			if o == t {
				r.last, r.slot = i, j
			}
		}
	}
	for i, s := range r.steps {
		for _, x := range s.in {
			if x == t {
				r.direct = false
			}
		}
		if i != r.last {
			for _, o := range s.out {
				if o == t {
					r.direct = false
				}
			}
		}
	}
	for _, cell := range r.cells {
		cell.Data = nil
	}
	return r, res, true, nil
}
