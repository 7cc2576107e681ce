package gputest

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/vouchml/vouch/bench"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// profileModel opens p's GPU program on the suite's device and profiles
// one run per batch of s.cfg.BenchBatches (engine.Profile: each layer's
// GPU time, launches queued ahead): every layer to the log ("layer"
// lines) and the sums per (op, kernel) ("profile" lines, largest first).
// The profiled run's outputs are checked against the same plan's graph
// run (ref, per batch: nil to skip).
func (s *fastSuite) profileModel(ctx context.Context, label string, p *plan.Plan, ref map[int]map[string]*tensor.Tensor) {
	pr, err := engine.Open(s.drv, s.cfg.Device, p, hostLayer)
	if err != nil {
		fmt.Fprintf(s.w, "profile %s: not opened: %v\n", label, err)
		return
	}
	defer pr.Close()
	for _, b := range s.cfg.BenchBatches {
		in, err := bench.Inputs(p.Graph, bench.Shape{Batch: b}, 1)
		if err != nil {
			fmt.Fprintf(s.w, "profile %s batch %d: no inputs: %v\n", label, b, err)
			continue
		}
		args := make([]*tensor.Tensor, len(p.Graph.Inputs))
		for i, v := range p.Graph.Inputs {
			args[i] = in[v.Name]
		}
		lt, outs, err := pr.Profile(ctx, args)
		if err != nil {
			fmt.Fprintf(s.w, "profile %s batch %d: %v\n", label, b, err)
			continue
		}
		if r := ref[b]; r != nil {
			for i, o := range p.Graph.Outputs {
				if f, ok := r[o.Name].Data.([]float32); ok {
					s.same(fmt.Sprintf("profile %s batch %d: output %s of the direct run == the graph run", label, b, o.Name), outs[i].Data.([]float32), f)
				}
			}
		}
		type sum struct {
			key string
			n   int
			ms  float64
		}
		sums := map[string]*sum{}
		total := 0.0
		for _, l := range lt {
			fmt.Fprintf(s.w, "layer %s batch %d: %-44s %-20s %-60s %8.4f ms\n", label, b, l.Layer, l.Op, l.Kernel, l.Ms)
			k := l.Op + " " + l.Kernel
			if sums[k] == nil {
				sums[k] = &sum{key: k}
			}
			sums[k].n++
			sums[k].ms += l.Ms
			total += l.Ms
		}
		var list []*sum
		for _, v := range sums {
			list = append(list, v)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ms > list[j].ms })
		fmt.Fprintf(s.w, "profile %s batch %d: %d layers, %.3f ms in all (direct run, launches queued ahead)\n", label, b, len(lt), total)
		for _, v := range list {
			if v.ms < 0.0005 {
				continue
			}
			fmt.Fprintf(s.w, "profile %s batch %d: %7.3f ms %5.1f%% %3d x %s\n", label, b, v.ms, 100*v.ms/math.Max(total, 1e-9), v.n, strings.TrimSpace(v.key))
		}
	}
}

// hostLayer runs a layer the program runs on the host (the shape layers
// host(shape) places) with the CPU's kernel, as exec's engine does.
func hostLayer(_ context.Context, n *ir.Node, in []*tensor.Tensor, _ map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	k, err := builtin.Registry().Lookup(n)
	if err != nil {
		return nil, err
	}
	return k.Run(&kernel.Ctx{}, n, in)
}
