package bench

import (
	"context"
	"sort"
	"time"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/nn"
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
	// Part marks a part of the layer before it (a ConvChain's convolution,
	// timed inside it where it runs blocked); parts are not in the sums.
	Part bool `json:"part,omitempty"`
}

// PeerLayer is one node of a peer's own per-node profile (ONNX Runtime's:
// the nodes of its optimised graph, with its op type as Kind).
type PeerLayer struct {
	Name   string        `json:"name"`
	Kind   string        `json:"kind"`
	Median time.Duration `json:"median_ns"`
}

// GFLOPs returns the layer's throughput at its median time (0 when the plan
// records no FLOPs for it).
func (l Layer) GFLOPs() float64 {
	if l.FLOPs == 0 || l.Median == 0 {
		return 0
	}
	return float64(l.FLOPs) / l.Median.Seconds() / 1e9
}

// Profile times every layer of p on feeds as the server runs it: the plan
// is bound to the feeds' shapes (one arena, allocation-free kernels) and
// executed o.Warmup untimed and o.Runs timed times, with exec's per-layer
// trace. Layers come back in plan order; a layer that binding folded away
// (shape arithmetic decided by the input shapes) shows zero time.
// Subgraphs (If, Loop, Scan, chain layers) count in their parent layer.
// The sum of the medians is close to, not equal to, an end-to-end run (the
// timer's own cost per layer).
func Profile(ctx context.Context, p *plan.Plan, feeds map[string]*tensor.Tensor, o Options) ([]Layer, error) {
	if o.Runs <= 0 {
		o.Runs = 10
	}
	g := p.Graph
	if err := exec.CheckInputs(g, feeds); err != nil {
		return nil, err
	}
	eng, err := exec.NewEngine(g, builtin.Registry(), exec.Options{CPU: exec.CPU{Threads: o.Threads}})
	if err != nil {
		return nil, err
	}
	inputs := make([]*tensor.Tensor, len(g.Inputs))
	shapes := make([][]int, len(g.Inputs))
	for i, v := range g.Inputs {
		inputs[i], shapes[i] = feeds[v.Name], feeds[v.Name].Shape
	}
	b, err := eng.Bind(shapes)
	if err != nil {
		return nil, err
	}
	times := map[*ir.Node][]time.Duration{}
	timed := false
	b.Trace = func(n *ir.Node, d time.Duration) {
		if timed {
			times[n] = append(times[n], d)
		}
	}
	for r := 0; r < o.Warmup+o.Runs; r++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		timed = r >= o.Warmup
		if _, err := b.Execute(inputs); err != nil {
			return nil, err
		}
	}
	info := map[string]plan.Layer{}
	for _, l := range p.Header.Graph.Layers {
		info[l.Name] = l
	}
	kindOf := func(n *ir.Node) string {
		if n.Domain != "" {
			return n.Domain + "." + n.OpType
		}
		return n.OpType
	}
	var out []Layer
	var total time.Duration
	blocked := nn.Blocked(nil)
	for _, n := range g.Nodes {
		l := info[n.Name]
		layer := Layer{Name: n.Name, Kind: kindOf(n), Tactic: l.Tactic, FLOPs: l.FLOPs}
		if ts := times[n]; len(ts) > 0 {
			layer.Median = Summarize(ts).Median
		}
		total += layer.Median
		out = append(out, layer)
		// A chain layer that timed its parts (a ConvChain: blocked on
		// AVX-512, where the body's tactics are not used; node by node
		// with them elsewhere).
		if a, ok := n.Attrs["body"]; ok && a.G != nil {
			for _, p := range a.G.Nodes {
				if ts := times[p]; len(ts) > 0 {
					t := "blocked"
					if !blocked {
						t = p.String(kernel.TacticAttr, "default")
					}
					out = append(out, Layer{Name: p.Name, Kind: kindOf(p), Tactic: t, Median: Summarize(ts).Median, Part: true})
				}
			}
		}
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
		if l.Part {
			continue
		}
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
