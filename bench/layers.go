package bench

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"time"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// Layer is one layer's share of a plan's run time.
type Layer struct {
	Name   string        `json:"name"`
	Kind   string        `json:"kind"`
	Tactic string        `json:"tactic,omitempty"`
	Median time.Duration `json:"median_ns"`
	Share  float64       `json:"share"` // of the sum of the layers' medians
	FLOPs  int64         `json:"flops,omitempty"`
}

// GFLOPs returns the layer's throughput at its median time (0 when the plan
// records no FLOPs for it).
func (l Layer) GFLOPs() float64 {
	if l.FLOPs == 0 || l.Median == 0 {
		return 0
	}
	return float64(l.FLOPs) / l.Median.Seconds() / 1e9
}

// Profile times every layer of p on feeds: it runs the plan's layers in
// order, as exec does, timing each kernel call, o.Warmup untimed and o.Runs
// timed times. Layers come back in plan order. Subgraphs (If, Loop, Scan)
// count in their parent layer's time.
//
// The profile runs each layer through its kernel's Run, like exec; the sum of
// the medians is close to, not equal to, an end-to-end run (no overlap, and
// the timer's own cost per layer).
func Profile(ctx context.Context, p *plan.Plan, feeds map[string]*tensor.Tensor, o Options) ([]Layer, error) {
	if o.Runs <= 0 {
		o.Runs = 10
	}
	g := p.Graph
	if err := exec.CheckInputs(g, feeds); err != nil {
		return nil, err
	}
	reg := builtin.Registry()
	ops := make([]*kernel.Op, len(g.Nodes))
	for i, n := range g.Nodes {
		op, err := reg.Lookup(n)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", n.Label(), err)
		}
		ops[i] = op
	}
	times := make([][]time.Duration, len(g.Nodes))
	for r := 0; r < o.Warmup+o.Runs; r++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, err := runTimed(reg, g, ops, feeds)
		if err != nil {
			return nil, err
		}
		if r >= o.Warmup {
			for i := range d {
				times[i] = append(times[i], d[i])
			}
		}
	}
	info := map[string]plan.Layer{}
	for _, l := range p.Header.Graph.Layers {
		info[l.Name] = l
	}
	out := make([]Layer, len(g.Nodes))
	var total time.Duration
	for i, n := range g.Nodes {
		l := info[n.Name]
		kind := n.OpType
		if n.Domain != "" {
			kind = n.Domain + "." + n.OpType
		}
		out[i] = Layer{Name: n.Name, Kind: kind, Tactic: l.Tactic, FLOPs: l.FLOPs, Median: Summarize(times[i]).Median}
		total += out[i].Median
	}
	for i := range out {
		if total > 0 {
			out[i].Share = float64(out[i].Median) / float64(total)
		}
	}
	return out, nil
}

// KindTotal is the time of all layers of one kind.
type KindTotal struct {
	Kind   string        `json:"kind"`
	Layers int           `json:"layers"`
	Time   time.Duration `json:"median_sum_ns"`
	Share  float64       `json:"share"`
}

// ByKind sums a profile per layer kind, largest first.
func ByKind(layers []Layer) []KindTotal {
	idx := map[string]int{}
	var out []KindTotal
	for _, l := range layers {
		i, ok := idx[l.Kind]
		if !ok {
			i = len(out)
			idx[l.Kind] = i
			out = append(out, KindTotal{Kind: l.Kind})
		}
		out[i].Layers++
		out[i].Time += l.Median
		out[i].Share += l.Share
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time > out[j].Time })
	return out
}

func runTimed(reg *kernel.Registry, g *ir.Graph, ops []*kernel.Op, feeds map[string]*tensor.Tensor) ([]time.Duration, error) {
	vals := make(map[string]*tensor.Tensor, len(g.Initializers)+len(feeds))
	for k, v := range g.Initializers {
		vals[k] = v
	}
	for k, v := range feeds {
		vals[k] = v
	}
	d := make([]time.Duration, len(g.Nodes))
	sub := &subRunner{reg: reg}
	for i, n := range g.Nodes {
		in, err := gather(n, vals, nil)
		if err != nil {
			return nil, err
		}
		sub.scope = vals
		start := time.Now()
		outs, err := callKernel(ops[i], sub, n, in)
		d[i] = time.Since(start)
		if err != nil {
			return nil, err
		}
		if err := bind(n, outs, vals); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func gather(n *ir.Node, vals, outer map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
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
			return nil, fmt.Errorf("bench: %s: input %q has no value", n.Label(), name)
		}
		in[j] = t
	}
	return in, nil
}

func bind(n *ir.Node, outs []*tensor.Tensor, vals map[string]*tensor.Tensor) error {
	for j, name := range n.Outputs {
		if name == "" {
			continue
		}
		if j >= len(outs) || outs[j] == nil {
			return fmt.Errorf("bench: %s: kernel produced no value for output %q", n.Label(), name)
		}
		vals[name] = outs[j]
	}
	return nil
}

func callKernel(op *kernel.Op, sub kernel.SubgraphRunner, n *ir.Node, in []*tensor.Tensor) (outs []*tensor.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bench: %s: kernel panicked: %v\n%s", n.Label(), r, debug.Stack())
		}
	}()
	outs, err = op.Run(&kernel.Ctx{Sub: sub}, n, in)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", n.Label(), err)
	}
	return outs, nil
}

// subRunner runs subgraphs untimed, in the scope of the calling layer.
type subRunner struct {
	reg   *kernel.Registry
	scope map[string]*tensor.Tensor
}

func (s *subRunner) RunSubgraph(g *ir.Graph, inputs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if len(inputs) != len(g.Inputs) {
		return nil, fmt.Errorf("bench: subgraph %q takes %d inputs, got %d", g.Name, len(g.Inputs), len(inputs))
	}
	vals := make(map[string]*tensor.Tensor, len(g.Initializers)+len(inputs))
	for k, v := range g.Initializers {
		vals[k] = v
	}
	for i, v := range g.Inputs {
		vals[v.Name] = inputs[i]
	}
	scope := make(map[string]*tensor.Tensor, len(s.scope)+len(vals))
	for _, n := range g.Nodes {
		op, err := s.reg.Lookup(n)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", n.Label(), err)
		}
		in, err := gather(n, vals, s.scope)
		if err != nil {
			return nil, err
		}
		clear(scope)
		for k, v := range s.scope {
			scope[k] = v
		}
		for k, v := range vals {
			scope[k] = v
		}
		outs, err := callKernel(op, &subRunner{reg: s.reg, scope: scope}, n, in)
		if err != nil {
			return nil, err
		}
		if err := bind(n, outs, vals); err != nil {
			return nil, err
		}
	}
	out := make([]*tensor.Tensor, len(g.Outputs))
	for i, o := range g.Outputs {
		t, ok := vals[o.Name]
		if !ok {
			t, ok = s.scope[o.Name]
		}
		if !ok {
			return nil, fmt.Errorf("bench: subgraph %q: output %q was not produced", g.Name, o.Name)
		}
		out[i] = t
	}
	return out, nil
}
