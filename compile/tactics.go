package compile

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
	"github.com/vouchml/vouch/tune"
)

// chooseTactics fixes every layer's tactic: for layers whose kernel offers
// several, the tuner times them at the opt-profile types (or, under the
// heuristic policy, the kernel's first choice is taken); the choice is
// written into the node (kernel.TacticAttr) and returned per layer.
func chooseTactics(g *ir.Graph, reg *kernel.Registry, types map[string]ir.Type, opts Options, machine string, log *buildlog.Log) (map[string]string, error) {
	chosen := map[string]string{}
	type job struct {
		n     *ir.Node
		op    *kernel.Op
		cands []string
		in    []ir.Type
	}
	var jobs []job
	for _, n := range g.Nodes {
		op, err := reg.Lookup(n)
		if err != nil {
			return nil, err
		}
		in := make([]ir.Type, len(n.Inputs))
		for i, name := range n.Inputs {
			if name != "" {
				in[i] = types[name]
			}
		}
		cands := tacticCands(g, reg, op, n, in)
		if len(cands) == 0 {
			chosen[n.Name] = "default"
			log.Info("tactics", "chosen", map[string]any{"layer": n.Name, "tactic": "default", "policy": opts.Tactics, "reason": "the kernel has a single implementation"})
			continue
		}
		jobs = append(jobs, job{n, op, cands, in})
	}
	cache := opts.TimingCache
	if cache == nil {
		cache = tune.NewCache()
	}
	tuner := &tune.Tuner{Cache: cache, Reps: max(opts.TuneReps, 1), Log: log}
	// The process-wide pool unless TuneThreads says otherwise (a Ctx
	// without a pool runs its kernels on the caller alone).
	ctx := &kernel.Ctx{Pool: parallel.Default()}
	if opts.TuneThreads > 0 {
		ctx.Pool = parallel.New(opts.TuneThreads)
		defer ctx.Pool.Close()
		machine += fmt.Sprintf(" threads=%d", opts.TuneThreads)
	}
	for i, j := range jobs {
		pick := j.cands[0]
		reason := "heuristic: the kernel's preferred tactic"
		if len(j.cands) > 1 && opts.Tactics == "timed" {
			cands, err := candidates(ctx, g, j.n, j.op, j.cands, j.in)
			if err != nil {
				log.Warn("tactics", "untimed", map[string]any{"layer": j.n.Name, "reason": err.Error()})
			} else {
				if pick, err = tuner.Choose(j.n.Name, layerKey(j.n, j.in, machine), cands); err != nil {
					return nil, err
				}
				reason = "fastest"
			}
		} else if len(j.cands) == 1 {
			reason = "only candidate"
		}
		j.n.Attrs[kernel.TacticAttr] = &ir.Attr{Name: kernel.TacticAttr, Kind: ir.AttrString, S: pick}
		chosen[j.n.Name] = pick
		log.Info("tactics", "chosen", map[string]any{"layer": j.n.Name, "tactic": pick, "candidates": j.cands, "policy": opts.Tactics, "reason": reason})
		if opts.Progress != nil {
			opts.Progress(i+1, len(jobs))
		}
	}
	return chosen, nil
}

// layerKey identifies a layer's timing problem: op, attributes, input
// types and the machine.
func layerKey(n *ir.Node, in []ir.Type, machine string) string {
	var attrs []string
	for k, a := range n.Attrs {
		if k == kernel.TacticAttr || a.G != nil || len(a.Graphs) > 0 {
			continue
		}
		v := fmt.Sprint(a.I, a.F, a.S, a.Ints, a.Floats, a.Strings)
		if a.T != nil {
			v = a.T.String()
		}
		attrs = append(attrs, k+"="+v)
	}
	sort.Strings(attrs)
	var ins []string
	for _, t := range in {
		ins = append(ins, t.String())
	}
	return strings.ReplaceAll(fmt.Sprintf("%s.%s|%s|%s|%s", n.Domain, n.OpType, strings.Join(attrs, ","), strings.Join(ins, ";"), machine), "\t", " ")
}

// candidates makes a runnable closure per tactic over seeded random inputs
// of the opt-profile shapes (constant inputs use their real values).
func candidates(ctx *kernel.Ctx, g *ir.Graph, n *ir.Node, op *kernel.Op, tactics []string, in []ir.Type) ([]tune.Candidate, error) {
	r := rand.New(rand.NewPCG(1, 2))
	args := make([]*tensor.Tensor, len(n.Inputs))
	for i, name := range n.Inputs {
		if name == "" {
			continue
		}
		if c, ok := g.Initializers[name]; ok {
			args[i] = c
			continue
		}
		shape, ok := in[i].Static()
		if !ok {
			return nil, fmt.Errorf("input %q has no static shape at the opt profile", name)
		}
		if in[i].DType != tensor.Float32 {
			return nil, fmt.Errorf("input %q is %v; only float32 layers are timed", name, in[i].DType)
		}
		t := tensor.New(tensor.Float32, shape...)
		for k, d := 0, t.Data.([]float32); k < len(d); k++ {
			d[k] = float32(r.NormFloat64())
		}
		args[i] = t
	}
	// Time the layer as bound execution runs it: Into, into outputs
	// allocated once (a fused layer then hands its epilogue to the base
	// kernel), where the kernel has Into and the outputs' shapes are
	// known; Run otherwise.
	outs := intoOutputs(g, n, op, args)
	var out []tune.Candidate
	for _, tac := range tactics {
		m := *n
		m.Attrs = make(map[string]*ir.Attr, len(n.Attrs)+1)
		for k, v := range n.Attrs {
			m.Attrs[k] = v
		}
		m.Attrs[kernel.TacticAttr] = &ir.Attr{Name: kernel.TacticAttr, Kind: ir.AttrString, S: tac}
		node := &m
		// Each candidate keeps its prepared state (packed weights) across
		// its timed calls, as a bound plan's step does.
		cc := *ctx
		cc.State = new(kernel.State)
		out = append(out, tune.Candidate{Tactic: tac, Run: func() error {
			if outs != nil {
				return op.Into(&cc, node, args, outs)
			}
			_, err := op.Run(&cc, node, args)
			return err
		}})
	}
	return out, nil
}

// intoOutputs allocates n's outputs for timing through op.Into, or
// returns nil where that is not possible (no Into, or an output type that
// is not static at these inputs).
func intoOutputs(g *ir.Graph, n *ir.Node, op *kernel.Op, args []*tensor.Tensor) []*tensor.Tensor {
	if op.Into == nil || op.Infer == nil {
		return nil
	}
	in := make([]ir.InferInput, len(args))
	for i, a := range args {
		if a == nil {
			continue
		}
		in[i] = ir.InferInput{Present: true, Type: ir.TensorType(a)}
		if c, ok := g.Initializers[n.Inputs[i]]; ok {
			in[i].Const = c
		}
	}
	types, err := op.Infer(n, in)
	if err != nil || len(types) != len(n.Outputs) {
		return nil
	}
	outs := make([]*tensor.Tensor, len(types))
	for i, t := range types {
		shape, ok := t.Static()
		if !ok || t.DType == tensor.Undefined {
			return nil
		}
		outs[i] = tensor.New(t.DType, shape...)
	}
	return outs
}

// fusedTactics are a fused layer's base op's tactics (the base reads the
// tactic attribute the fused node carries).
func fusedTactics(n *ir.Node, in []ir.Type, reg *kernel.Registry) []string {
	l, ok := fused.LayerOf(n)
	if !ok || l.BaseInputs < 1 || l.BaseInputs > len(in) {
		return nil
	}
	base := &ir.Node{Name: n.Name, OpType: l.Base, Version: l.BaseVersion, Attrs: n.Attrs}
	op, err := reg.Lookup(base)
	if err != nil || op.Tactics == nil {
		return nil
	}
	return op.Tactics(base, in[:l.BaseInputs])
}

// constCands drops the candidates that need constant inputs n does not
// have (kernel.RegisterConstInputs).
func constCands(g *ir.Graph, n *ir.Node, cands []string) []string {
	out := cands[:0:0]
	for _, c := range cands {
		ok := true
		for _, i := range kernel.TacticConstInputs(c) {
			if _, init := g.Initializers[n.Input(i)]; !init {
				ok = false
			}
		}
		if ok {
			out = append(out, c)
		}
	}
	return out
}

// tacticCands lists n's tactics (op is n's kernel, in its input types),
// preferred first, less those needing constant inputs n lacks.
func tacticCands(g *ir.Graph, reg *kernel.Registry, op *kernel.Op, n *ir.Node, in []ir.Type) []string {
	var cands []string
	if op.Tactics != nil {
		cands = op.Tactics(n, in)
	} else if n.Domain == fusedDomain && n.OpType == fused.OpFused {
		cands = fusedTactics(n, in, reg)
	}
	return constCands(g, n, cands)
}
