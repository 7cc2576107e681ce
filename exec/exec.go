// Package exec runs graphs: it binds inputs, checks them against the
// graph's declared types, runs each node's kernel in topological order and
// returns the graph outputs. It never imports the ONNX decoder or the
// compiler.
//
// A kernel that panics (a bug, or a hostile model reaching a path no check
// caught) is turned into an error naming the node; the process survives.
//
// Every run works under Limits (Executor.SetLimits): a memory budget that
// bounds the arena at Bind and every value a kernel allocates (sized from
// the node's actual inputs before the kernel runs), a bound on subgraph
// body runs (Loop, Scan) and a wall-time budget. Passing one is an error
// wrapping ErrBudget, never an out-of-memory crash or a hang.
package exec

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// ErrInput is wrapped by every error about the caller's inputs (missing,
// unknown, wrong dtype or shape).
var ErrInput = errors.New("bad input")

// Executor runs one graph. It is safe for concurrent use: Run keeps its
// state on the stack.
type Executor struct {
	g        *ir.Graph
	reg      *kernel.Registry
	ops      map[*ir.Node]*kernel.Op
	lastUse  map[string]int // top-level value -> index of the last node reading it
	keepOuts map[string]bool
	isInput  map[string]bool // the top-level graph's inputs
	limits   Limits
	cpu      CPU // how kernels run (cpu.go)
	// copyConcats makes Bind copy every Concat's inputs (SetCopyConcats).
	copyConcats bool
	// state is each node's prepared kernel state (kernel.State), for
	// Run; a Bound keeps its own per step. Both go with their owner.
	state map[*ir.Node]*kernel.State
}

// New prepares g for execution with the kernels of reg. It fails if any
// node, including in subgraphs, has no kernel.
func New(g *ir.Graph, reg *kernel.Registry) (*Executor, error) {
	e := &Executor{g: g, reg: reg, ops: map[*ir.Node]*kernel.Op{}, lastUse: map[string]int{}, keepOuts: map[string]bool{}, limits: Limits{}.withDefaults(),
		state: map[*ir.Node]*kernel.State{}}
	if err := e.resolve(g); err != nil {
		return nil, err
	}
	for i, n := range g.Nodes {
		for _, in := range n.Inputs {
			e.lastUse[in] = i
		}
		for _, a := range n.Attrs {
			for _, sg := range subgraphs(a) {
				for _, name := range ir.FreeVars(sg) {
					e.lastUse[name] = i
				}
			}
		}
	}
	for _, o := range g.Outputs {
		e.keepOuts[o.Name] = true
	}
	e.isInput = map[string]bool{}
	for _, v := range g.Inputs {
		e.isInput[v.Name] = true
	}
	return e, nil
}

func subgraphs(a *ir.Attr) []*ir.Graph {
	if a.G != nil {
		return append([]*ir.Graph{a.G}, a.Graphs...)
	}
	return a.Graphs
}

func (e *Executor) resolve(g *ir.Graph) error {
	for _, n := range g.Nodes {
		op, err := e.reg.Lookup(n)
		if err != nil {
			return fmt.Errorf("exec: %s: %w", n.Label(), err)
		}
		e.ops[n] = op
		e.state[n] = new(kernel.State)
		for _, i := range kernel.ConstInputs(n) {
			name := n.Input(i)
			if _, ok := g.Initializers[name]; !ok {
				if _, ok := e.g.Initializers[name]; !ok {
					return fmt.Errorf("exec: %s: tactic %q needs input %d (%q) to be an initializer", n.Label(), kernel.Tactic(n), i, name)
				}
			}
		}
		for _, a := range n.Attrs {
			for _, sg := range subgraphs(a) {
				if err := e.resolve(sg); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Graph returns the graph this executor runs.
func (e *Executor) Graph() *ir.Graph { return e.g }

// Run executes the graph on inputs (by graph input name) and returns the
// outputs by name.
func (e *Executor) Run(inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	if err := CheckInputs(e.g, inputs); err != nil {
		return nil, err
	}
	vals := make(map[string]*tensor.Tensor, len(e.g.Initializers)+len(inputs))
	for k, v := range e.g.Initializers {
		vals[k] = v
	}
	for k, v := range inputs {
		vals[k] = v
	}
	pool := e.cpu.pool()
	pool.Hold()
	defer pool.Release()
	if err := e.runNodes(e.g, vals, nil, true, newRun(e.limits)); err != nil {
		return nil, err
	}
	out := make(map[string]*tensor.Tensor, len(e.g.Outputs))
	for _, o := range e.g.Outputs {
		t, ok := vals[o.Name]
		if !ok {
			return nil, fmt.Errorf("exec: output %q was not produced", o.Name)
		}
		out[o.Name] = t
	}
	return out, nil
}

// CheckInputs verifies that inputs has exactly the graph's inputs, each with
// the declared element type and a shape that fits the declared one.
func CheckInputs(g *ir.Graph, inputs map[string]*tensor.Tensor) error {
	declared := map[string]bool{}
	for _, v := range g.Inputs {
		declared[v.Name] = true
		t, ok := inputs[v.Name]
		if !ok || t == nil {
			return fmt.Errorf("exec: %w: missing input %q (%v)", ErrInput, v.Name, v.Type)
		}
		if err := t.Check(); err != nil {
			return fmt.Errorf("exec: %w: input %q: %w", ErrInput, v.Name, err)
		}
		if v.Type.DType != tensor.Undefined && t.DType != v.Type.DType {
			return fmt.Errorf("exec: %w: input %q: expected dtype %v, got %v", ErrInput, v.Name, v.Type.DType, t.DType)
		}
		if v.Type.RankKnown {
			if len(v.Type.Shape) != len(t.Shape) {
				return fmt.Errorf("exec: %w: input %q: expected shape %v (rank %d), got %s", ErrInput, v.Name, v.Type, len(v.Type.Shape), tensor.ShapeString(t.Shape))
			}
			for i, d := range v.Type.Shape {
				if d.Known() && int(d.Value) != t.Shape[i] {
					return fmt.Errorf("exec: %w: input %q: dimension %d: expected %d, got %d (shape %s)", ErrInput, v.Name, i, d.Value, t.Shape[i], tensor.ShapeString(t.Shape))
				}
			}
		}
	}
	for name := range inputs {
		if !declared[name] {
			if _, isInit := g.Initializers[name]; isInit {
				continue // overriding a legacy initializer-input is allowed
			}
			return fmt.Errorf("exec: %w: unknown input %q", ErrInput, name)
		}
	}
	return nil
}

func (e *Executor) runNodes(g *ir.Graph, vals map[string]*tensor.Tensor, outer map[string]*tensor.Tensor, top bool, r *run) error {
	for i, n := range g.Nodes {
		if err := r.check(n); err != nil {
			return err
		}
		in := make([]*tensor.Tensor, len(n.Inputs))
		for j, name := range n.Inputs {
			if name == "" {
				continue
			}
			t, ok := vals[name]
			if !ok && outer != nil {
				t, ok = outer[name]
			}
			if !ok {
				return fmt.Errorf("exec: %s: input %q has no value", n.Label(), name)
			}
			in[j] = t
		}
		scope := vals
		if outer != nil {
			scope = mergeScope(outer, vals)
		}
		if top {
			if err := r.reserve(n, e.ops[n], in); err != nil {
				return err
			}
		}
		outs, err := e.runNode(n, in, scope, r, top)
		if err != nil {
			return err
		}
		for j, name := range n.Outputs {
			if name == "" {
				continue
			}
			if j >= len(outs) || outs[j] == nil {
				return fmt.Errorf("exec: %s: kernel produced no value for output %q", n.Label(), name)
			}
			if err := outs[j].Check(); err != nil {
				return fmt.Errorf("exec: %s: output %q: %w", n.Label(), name, err)
			}
			vals[name] = outs[j]
			if top {
				r.live += tensorBytes(outs[j])
			}
		}
		if top {
			for _, name := range n.Inputs {
				if e.lastUse[name] == i && !e.keepOuts[name] {
					if _, isInit := g.Initializers[name]; !isInit {
						if !e.isInput[name] {
							r.live -= tensorBytes(vals[name])
						}
						delete(vals, name)
					}
				}
			}
		}
	}
	return nil
}

func mergeScope(outer, local map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	m := make(map[string]*tensor.Tensor, len(outer)+len(local))
	for k, v := range outer {
		m[k] = v
	}
	for k, v := range local {
		m[k] = v
	}
	return m
}

// runNode runs one node's allocating kernel; sized says its outputs were
// already checked against the budget (run.reserve).
func (e *Executor) runNode(n *ir.Node, in []*tensor.Tensor, scope map[string]*tensor.Tensor, r *run, sized bool) (outs []*tensor.Tensor, err error) {
	op := e.ops[n]
	if op == nil {
		return nil, fmt.Errorf("exec: %s: no kernel", n.Label())
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("exec: %s: kernel panicked: %v\n%s", n.Label(), r, debug.Stack())
		}
	}()
	if !sized {
		if err := CheckOutputs(n, op, in, r.limits.MaxBytes); err != nil {
			return nil, err
		}
	}
	ctx := e.kernelCtx()
	ctx.Sub = &subRunner{e: e, scope: scope, run: r}
	ctx.State = e.state[n]
	outs, err = op.Run(&ctx, n, in)
	if err != nil {
		return nil, fmt.Errorf("exec: %s: %w", n.Label(), err)
	}
	return outs, nil
}

type subRunner struct {
	e     *Executor
	scope map[string]*tensor.Tensor
	run   *run
}

// RunSubgraph implements kernel.SubgraphRunner.
func (s *subRunner) RunSubgraph(g *ir.Graph, inputs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if len(inputs) != len(g.Inputs) {
		return nil, fmt.Errorf("subgraph %q takes %d inputs, got %d", g.Name, len(g.Inputs), len(inputs))
	}
	if err := s.run.subgraph(g); err != nil {
		return nil, err
	}
	vals := make(map[string]*tensor.Tensor, len(g.Initializers)+len(inputs))
	for k, v := range g.Initializers {
		vals[k] = v
	}
	for i, v := range g.Inputs {
		vals[v.Name] = inputs[i]
	}
	if err := s.e.runNodes(g, vals, s.scope, false, s.run); err != nil {
		return nil, err
	}
	out := make([]*tensor.Tensor, len(g.Outputs))
	for i, o := range g.Outputs {
		t, ok := vals[o.Name]
		if !ok {
			t, ok = s.scope[o.Name]
		}
		if !ok {
			return nil, fmt.Errorf("subgraph %q: output %q was not produced", g.Name, o.Name)
		}
		out[i] = t
	}
	return out, nil
}
