package exec

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Options are the choices of how an Engine runs its graph. None of them
// changes an output's bits: a plan's output is a function of (plan, input)
// alone, so these are speed, resource and placement knobs, never part of a
// plan or of its digest. The zero value runs on the CPU under the default
// Limits.
type Options struct {
	// Limits bound every run (zero fields: their defaults).
	Limits Limits
	// Device is the backend the layers run on: "" or "cpu" today. A
	// device backend (exec/backend*.go, CUDA next) adds its name; a name no
	// backend knows is an error at NewEngine, never a silent fall-back to
	// the CPU.
	Device string
	// CPU is how the CPU kernels run (instruction set, threads, pool;
	// cpu.go): the kernel.Ctx every CPU layer gets, on any device.
	CPU CPU
}

// DeviceCPU is the name of the CPU backend, the default.
const DeviceCPU = "cpu"

func (o Options) valid() error {
	if err := o.CPU.valid(); err != nil {
		return err
	}
	switch o.Device {
	case "", DeviceCPU:
		return nil
	}
	return fmt.Errorf("exec: unknown device %q (known: %s)", o.Device, DeviceCPU)
}

// Engine is the one way vouch runs a graph: serving, replay, `vouch run`
// and `vouch bench` all go through it, so a replayed output is computed by
// the very code that served it.
//
// A run binds the graph to the inputs' shapes once (type inference, the
// arena plan, allocation-free kernels: see Bound) and keeps the bound
// contexts in a pool per shape, one per concurrent caller, so repeated
// shapes run without allocating inside the engine. An Engine is safe for
// concurrent use.
type Engine struct {
	ex    *Executor
	opts  Options
	bound sync.Map // input-shape key -> *sync.Pool of *Bound
	dev   Program  // a device program (backend.go); nil on the CPU
	// emuArch is the architecture whose tensor cores an emulating engine
	// (device "emu") emulates; "" otherwise.
	emuArch string
}

// NewEngine prepares g to run with the kernels of reg under o. It fails if
// a node, including in subgraphs, has no kernel, or if o is not valid.
func NewEngine(g *ir.Graph, reg *kernel.Registry, o Options) (*Engine, error) {
	if err := o.valid(); err != nil {
		return nil, err
	}
	ex, err := New(g, reg)
	if err != nil {
		return nil, err
	}
	ex.SetLimits(o.Limits)
	o.Limits = ex.Limits()
	if err := ex.SetCPU(o.CPU); err != nil {
		return nil, err
	}
	if o.Device == "" {
		o.Device = DeviceCPU
	}
	return &Engine{ex: ex, opts: o}, nil
}

// Graph returns the graph the engine runs.
func (e *Engine) Graph() *ir.Graph { return e.ex.g }

// Options returns the engine's options, defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// Run checks inputs (by graph input name) against the graph's declared
// inputs and runs the graph on them, stopping once ctx is done (the error
// then wraps ctx's cause). The outputs, by name, are the caller's: they
// are copied out of the arena before its context goes back to the pool.
// Errors about the inputs wrap ErrInput; a run past its Limits wraps
// ErrBudget.
func (e *Engine) Run(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	g := e.ex.g
	if err := CheckInputs(g, inputs); err != nil {
		return nil, err
	}
	if e.dev != nil {
		return e.runDevice(ctx, inputs)
	}
	args := make([]*tensor.Tensor, len(g.Inputs))
	shapes := make([][]int, len(g.Inputs))
	key := make([]byte, 0, 64)
	for i, v := range g.Inputs {
		t := inputs[v.Name]
		args[i], shapes[i] = t, t.Shape
		for _, d := range t.Shape {
			key = strconv.AppendInt(key, int64(d), 10)
			key = append(key, ',')
		}
		key = append(key, ';')
	}
	pool, _ := e.bound.LoadOrStore(string(key), &sync.Pool{})
	b, _ := pool.(*sync.Pool).Get().(*Bound)
	if b == nil {
		var err error
		if b, err = e.ex.Bind(shapes); err != nil {
			return nil, err
		}
	}
	outs, err := b.ExecuteContext(ctx, args)
	if err != nil {
		// A failed run leaves the arena in no known state; the Bound is
		// dropped rather than pooled.
		return nil, err
	}
	res := make(map[string]*tensor.Tensor, len(outs))
	for i, o := range g.Outputs {
		res[o.Name] = outs[i].Clone()
	}
	pool.(*sync.Pool).Put(b)
	return res, nil
}

// Bind returns a context of the engine bound to inputs of these shapes, in
// graph-input order, for a caller that runs the same shapes many times
// and reads the outputs in place (`vouch bench`, per-layer profiles). It
// is the context Run uses, outside the pool.
func (e *Engine) Bind(shapes [][]int) (*Bound, error) { return e.ex.Bind(shapes) }
