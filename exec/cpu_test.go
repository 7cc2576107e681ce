package exec_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestEngineCPU: Options.CPU reaches the kernels, and no setting of it
// changes a bit: every instruction-set level this CPU has, one thread, a
// thread count, a caller's pool (digits_cnn runs the vector convolution,
// GEMM and pooling kernels).
func TestEngineCPU(t *testing.T) {
	t.Parallel()
	p, in := sharedPlan(t, "digits_cnn")
	pool := parallel.New(3)
	defer pool.Close()
	var cpus []exec.CPU
	for _, l := range kernel.ISAs() {
		cpus = append(cpus, exec.CPU{ISA: l}, exec.CPU{ISA: l, Threads: 1}, exec.CPU{ISA: l, Threads: 2}, exec.CPU{ISA: l, Pool: pool})
	}
	var ref map[string]*tensor.Tensor
	for i, c := range cpus {
		eng, err := exec.NewEngine(p.Graph, builtin.Registry(), exec.Options{CPU: c})
		if err != nil {
			t.Fatal(err)
		}
		if got := eng.Options().CPU; got != c {
			t.Fatalf("Options().CPU = %+v, want %+v", got, c)
		}
		out, err := eng.Run(context.Background(), feeds(p.Graph, in))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			ref = out
			continue
		}
		for _, o := range p.Graph.Outputs {
			if !sameBits(out[o.Name], ref[o.Name]) {
				t.Fatalf("CPU %+v: output %q differs from the portable level's", c, o.Name)
			}
		}
	}
	for _, bad := range []exec.CPU{{ISA: kernel.ISAAVX512 + 1}, {Threads: -1}} {
		if _, err := exec.NewEngine(p.Graph, builtin.Registry(), exec.Options{CPU: bad}); err == nil {
			t.Errorf("CPU %+v accepted", bad)
		}
	}
}

// TestKernelCtx: the kernel.Ctx each kernel gets carries the executor's
// CPU options (level, workers) and a State per node that outlives a call,
// through Run, Bind/Execute and the Engine, and one Bound's States are not
// another's.
func TestKernelCtx(t *testing.T) {
	t.Parallel()
	type seen struct {
		level   kernel.ISA
		workers int
		state   *kernel.State
	}
	var got []seen
	record := func(c *kernel.Ctx) {
		got = append(got, seen{c.Level(), c.Workers().Workers(), c.State})
	}
	probe := &kernel.Op{
		Infer: kernel.InferSame(0),
		Run: func(c *kernel.Ctx, _ *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			record(c)
			return []*tensor.Tensor{in[0].Clone()}, nil
		},
		Into: func(c *kernel.Ctx, _ *ir.Node, in, out []*tensor.Tensor) error {
			record(c)
			copy(out[0].Data.([]float32), in[0].Data.([]float32))
			return nil
		},
	}
	reg := kernel.NewRegistry("", kernel.Table{"Probe": probe})
	f32 := ir.Type{DType: tensor.Float32, Shape: []ir.Dim{ir.Fixed(2)}, RankKnown: true}
	g := &ir.Graph{Name: "g", Inputs: []*ir.Value{{Name: "x", Type: f32}}, Outputs: []*ir.Value{{Name: "y", Type: f32}},
		Initializers: map[string]*tensor.Tensor{},
		Nodes:        []*ir.Node{{Name: "p", OpType: "Probe", Inputs: []string{"x"}, Outputs: []string{"y"}}}}
	x := map[string]*tensor.Tensor{"x": tensor.From([]float32{1, 2}, 2)}
	ex, err := exec.New(g, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.SetCPU(exec.CPU{ISA: kernel.ISAPortable, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := ex.Run(x); err != nil {
			t.Fatal(err)
		}
	}
	var bs [2]*exec.Bound
	for i := range bs {
		if bs[i], err = ex.Bind([][]int{{2}}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := bs[i].Execute([]*tensor.Tensor{x["x"]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	eng, err := exec.NewEngine(g, reg, exec.Options{CPU: exec.CPU{ISA: kernel.ISAAVX2, Threads: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Run(context.Background(), x); err != nil {
		t.Fatal(err)
	}
	if len(got) != 7 {
		t.Fatalf("%d kernel calls, want 7", len(got))
	}
	for i, s := range got[:6] {
		if s.level != kernel.ISAPortable || s.workers != 1 || s.state == nil {
			t.Fatalf("call %d: level %v, %d workers, state %p: want portable, 1, a State", i, s.level, s.workers, s.state)
		}
	}
	if got[0].state != got[1].state || got[2].state != got[3].state || got[4].state != got[5].state {
		t.Fatal("a node's State changed between calls")
	}
	if got[2].state == got[0].state || got[4].state == got[2].state {
		t.Fatal("a Bound shares its State with the executor or another Bound")
	}
	if want := min(kernel.ISAAVX2, kernel.CPUISA()); got[6].level != want || got[6].workers != 2 {
		t.Fatalf("engine: level %v, %d workers, want %v, 2", got[6].level, got[6].workers, want)
	}
}

// TestPrepareAtBind: Bind runs each step's Op.Prepare once, under the
// step's context (its CPU options and the State its Into then gets), with
// the inputs' shapes, the constants' values and no other values; a
// Prepare error fails the Bind.
func TestPrepareAtBind(t *testing.T) {
	t.Parallel()
	var prepared, ran []*kernel.State
	var fail bool
	op := &kernel.Op{
		Infer: kernel.InferSame(0),
		Run: func(_ *kernel.Ctx, _ *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			return []*tensor.Tensor{in[0].Clone()}, nil
		},
		Into: func(c *kernel.Ctx, _ *ir.Node, in, out []*tensor.Tensor) error {
			ran = append(ran, c.State)
			copy(out[0].Data.([]float32), in[0].Data.([]float32))
			return nil
		},
		Prepare: func(c *kernel.Ctx, _ *ir.Node, in []*tensor.Tensor) error {
			if in[0].Data != nil || len(in[0].Shape) != 1 || in[0].Shape[0] != 3 {
				t.Errorf("Prepare got the variable input %v %v", in[0].Shape, in[0].Data)
			}
			if w, ok := in[1].Data.([]float32); !ok || w[0] != 7 {
				t.Errorf("Prepare did not get the constant: %v", in[1].Data)
			}
			if c.Level() != kernel.ISAPortable || c.State == nil {
				t.Errorf("Prepare's Ctx: level %v, State %p", c.Level(), c.State)
			}
			prepared = append(prepared, c.State)
			if fail {
				return errors.New("no")
			}
			return nil
		},
	}
	reg := kernel.NewRegistry("", kernel.Table{"Probe": op})
	f32 := func(dims ...ir.Dim) ir.Type { return ir.Type{DType: tensor.Float32, Shape: dims, RankKnown: true} }
	g := &ir.Graph{Name: "g", Inputs: []*ir.Value{{Name: "x", Type: f32(ir.Dim{Value: -1, Param: "n"})}}, Outputs: []*ir.Value{{Name: "y", Type: f32(ir.Dim{Value: -1, Param: "n"})}},
		Initializers: map[string]*tensor.Tensor{"w": tensor.From([]float32{7}, 1)},
		Nodes:        []*ir.Node{{Name: "p", OpType: "Probe", Inputs: []string{"x", "w"}, Outputs: []string{"y"}}}}
	ex, err := exec.New(g, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.SetCPU(exec.CPU{ISA: kernel.ISAPortable}); err != nil {
		t.Fatal(err)
	}
	b, err := ex.Bind([][]int{{3}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := b.Execute([]*tensor.Tensor{tensor.From([]float32{1, 2, 3}, 3)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(prepared) != 1 || len(ran) != 2 || ran[0] != prepared[0] || ran[1] != prepared[0] {
		t.Fatalf("Prepare ran %d times, Into %d, on States %v then %v", len(prepared), len(ran), prepared, ran)
	}
	fail = true
	if _, err := ex.Bind([][]int{{3}}); err == nil || !strings.Contains(err.Error(), "no") {
		t.Fatalf("a failing Prepare: Bind error %v", err)
	}
}
