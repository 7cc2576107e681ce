package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/quant"
	"github.com/vouchml/vouch/replay"
	"github.com/vouchml/vouch/tensor"
)

// evidence runs plans on the evaluation (or calibration) data and
// compares them with the exact plan's outputs on the same rows, with
// replay's statistics (replay.Compare: absolute and relative error, KL of
// the softmaxed rows, top-1 agreement) and, given labels, quant's
// accuracy (quant.Compare).
type evidence struct {
	dev     exec.Device
	input   string
	chunks  []*tensor.Tensor
	outputs []string // the plan's outputs, in order
	ref     map[string]*tensor.Tensor
	labels  []int64
	data    string
	samples int
}

// maxEvidenceChunk bounds the rows run at once when the input's batch is
// dynamic (at most the profile's maximum).
const maxEvidenceChunk = 64

// newEvidence runs the exact plan (its CPU layers, on the CPU: the exact
// plan's bits on any machine) on the evaluation data, or on the
// calibration data when none was given.
func newEvidence(exactPlan []byte, d exec.Device, q compile.QuantOptions) (*evidence, error) {
	p, err := plan.Decode(exactPlan)
	if err != nil {
		return nil, err
	}
	e := &evidence{dev: d, data: "evaluation data"}
	data, labels := q.EvalData, q.EvalLabels
	if data == nil {
		data, labels, e.data = q.Calib, nil, "calibration data"
	}
	if labels != nil {
		if e.labels, err = labels.Int64s(); err != nil {
			return nil, fmt.Errorf("evaluation labels: %w", err)
		}
	}
	var in []string
	for _, v := range p.Graph.Inputs {
		if _, isInit := p.Graph.Initializers[v.Name]; !isInit {
			in = append(in, v.Name)
		}
	}
	if len(in) != 1 {
		return nil, fmt.Errorf("the accuracy evidence feeds one input (from --eval-data or --calib); the model has %d", len(in))
	}
	e.input = in[0]
	chunk, fixed := evidenceChunk(p, e.input)
	for _, v := range p.Graph.Outputs {
		e.outputs = append(e.outputs, v.Name)
	}
	for _, b := range data {
		if fixed && b.Shape[0]%chunk != 0 {
			return nil, fmt.Errorf("a data batch of %d rows does not split into the input's fixed batch %d", b.Shape[0], chunk)
		}
		e.chunks = append(e.chunks, quant.Rows(b, chunk)...)
		e.samples += b.Shape[0]
	}
	if e.ref, _, err = e.run(p, exec.Options{}); err != nil {
		return nil, fmt.Errorf("running the exact plan on the %s: %w", e.data, err)
	}
	return e, nil
}

// evidenceChunk is the rows a run takes: the input's fixed batch, else
// the first profile's maximum, at most maxEvidenceChunk.
func evidenceChunk(p *plan.Plan, input string) (rows int, fixed bool) {
	for _, v := range p.Graph.Inputs {
		if v.Name == input && v.Type.RankKnown && len(v.Type.Shape) > 0 && v.Type.Shape[0].Known() {
			return max(1, int(v.Type.Shape[0].Value)), true
		}
	}
	rows = maxEvidenceChunk
	if len(p.Header.Profiles) > 0 {
		if r, ok := p.Header.Profiles[0].Inputs[input]; ok && len(r.Max) > 0 && r.Max[0] > 0 {
			rows = min(rows, r.Max[0])
		}
	}
	return rows, false
}

// run runs p under eo on every chunk and returns each output, the chunks'
// rows concatenated, and the device it ran on.
func (e *evidence) run(p *plan.Plan, eo exec.Options) (map[string]*tensor.Tensor, string, error) {
	eng, err := exec.NewPlanEngine(p, builtin.Registry(), eo)
	if err != nil {
		return nil, "", err
	}
	defer eng.Close()
	raw := map[string][]byte{}
	out := map[string]*tensor.Tensor{}
	for _, c := range e.chunks {
		res, err := eng.Run(context.Background(), map[string]*tensor.Tensor{e.input: c})
		if err != nil {
			return nil, "", err
		}
		for _, name := range e.outputs {
			t := res[name]
			if t == nil || len(t.Shape) == 0 {
				return nil, "", fmt.Errorf("output %q has no batch dimension to gather the rows by", name)
			}
			if prev := out[name]; prev == nil {
				out[name] = &tensor.Tensor{DType: t.DType, Shape: slices.Clone(t.Shape)}
			} else if prev.DType != t.DType || !slices.Equal(prev.Shape[1:], t.Shape[1:]) {
				return nil, "", fmt.Errorf("output %q changes its type between batches (%v, then %v)", name, prev, t)
			} else {
				prev.Shape[0] += t.Shape[0]
			}
			raw[name] = append(raw[name], tensor.RawBytes(t)...)
		}
	}
	for name, t := range out {
		if out[name], err = tensor.FromRaw(t.DType, t.Shape, raw[name]); err != nil {
			return nil, "", err
		}
	}
	return out, eng.DeviceName(), nil
}

// measure runs the plan b on the evidence's device (a GPU, or the
// emulation of one) and compares it with the exact outputs; the
// statistics come in the plan's output order.
func (e *evidence) measure(b []byte) (*buildlog.FastAccuracy, []replay.Stats, error) {
	p, err := plan.Decode(b)
	if err != nil {
		return nil, nil, err
	}
	eo := exec.Options{Device: e.dev.String()}
	if p.Pinned() == "" {
		// A plan best returned wholly to exact kernels has the CPU's bits
		// by the exact mode's contract: the CPU computes them.
		eo = exec.Options{}
	}
	got, dev, err := e.run(p, eo)
	if err != nil {
		return nil, nil, err
	}
	acc := &buildlog.FastAccuracy{Data: e.data, Samples: e.samples, Device: dev, Reference: "the exact plan (its CPU layers: the exact plan's bits) on the CPU"}
	var stats []replay.Stats
	for _, name := range e.outputs {
		s, err := replay.Compare(name, e.ref[name], got[name], replay.DefaultCriteria())
		if err != nil {
			return nil, nil, err
		}
		stats = append(stats, s)
		acc.Outputs = append(acc.Outputs, outputError(s))
	}
	if first := e.outputs[0]; e.labels != nil && e.ref[first].DType == tensor.Float32 {
		ref, fast := e.ref[first].Data.([]float32), got[first].Data.([]float32)
		a, err := quant.Compare(ref, fast, len(ref)/max(e.samples, 1), e.labels)
		if err != nil {
			return nil, nil, fmt.Errorf("labelled accuracy: %w", err)
		}
		acc.Labelled = &buildlog.LabelledAccuracy{Exact: a.FP32, Fast: a.Reduced, Drop: a.Drop}
	}
	return acc, stats, nil
}

func outputError(s replay.Stats) buildlog.OutputError {
	return buildlog.OutputError{Name: s.Name, AbsMax: s.AbsMax, AbsMean: s.AbsMean, RelMax: s.RelMax, RelMean: s.RelMean,
		KL: s.KL, Top1: s.Top1, BitExact: s.Exact}
}

func logAccuracy(log *buildlog.Log, a *buildlog.FastAccuracy) {
	for _, o := range a.Outputs {
		log.Info("gpu-fast", "accuracy", map[string]any{"data": a.Data, "samples": a.Samples, "device": a.Device, "output": o.Name,
			"abs_max": o.AbsMax, "abs_mean": o.AbsMean, "rel_max": o.RelMax, "rel_mean": o.RelMean, "kl_divergence": o.KL,
			"top1_agreement": o.Top1, "bit_exact": o.BitExact})
	}
	if l := a.Labelled; l != nil {
		log.Info("gpu-fast", "labelled-accuracy", map[string]any{"exact_accuracy": l.Exact, "fast_accuracy": l.Fast, "drop_pp": l.Drop})
	}
}

// bound is best's measure of a fast plan against the exact one: the mean
// KL divergence of the first output's softmaxed rows, or, for an output
// of one value a row (whose softmax is always 1), its mean relative
// error; with its limit.
func (f *FastBuild) bound(stats []replay.Stats) (v, limit float64, what string) {
	s := stats[0]
	if len(s.Shape) > 0 && s.Shape[len(s.Shape)-1] > 1 {
		return s.KL, f.MaxKL, "mean KL divergence of " + s.Name
	}
	return s.RelMean, f.MaxRelError, "mean relative error of " + s.Name
}

// fallback is precision best's measured fallback: layers whose fast
// kernel alone puts the plan over the bound go back to exact, then, while
// the plan is over it, the most sensitive fast layer left.
type fallback struct {
	ev        *evidence
	cpuPlan   []byte
	exact     []plan.Placement // engine.Place: every layer's exact placement
	bound     func([]replay.Stats) (float64, float64, string)
	log       *buildlog.Log
	fallbacks []buildlog.LayerNote
}

// variant is the fast plan p with the placement layers (same kernels'
// image): a layer not fast in it runs its exact kernel.
func (fb *fallback) variant(p *plan.Plan, layers []plan.Placement) ([]byte, error) {
	g := *p.Header.GPU
	g.Layers, g.Mode, g.Contract, g.Image = slices.Clone(layers), plan.ModeExact, "", nil
	for _, l := range layers {
		if l.Fast() {
			g.Mode = plan.ModeFast
		}
	}
	return plan.AddGPU(fb.cpuPlan, g, p.Header.GPU.Image)
}

func (fb *fallback) back(cur []plan.Placement, i int, why string) {
	fb.log.Warn("gpu-fast", "fallback", map[string]any{"layer": cur[i].Layer, "from": cur[i].Kernel, "to": fb.exact[i].Kernel, "reason": why})
	fb.fallbacks = append(fb.fallbacks, buildlog.LayerNote{Layer: cur[i].Layer, Reason: why})
	cur[i] = fb.exact[i]
}

func (fb *fallback) run(p *plan.Plan, acc *buildlog.FastAccuracy, stats []replay.Stats) ([]byte, *buildlog.FastAccuracy, error) {
	b, err := fb.variant(p, p.Header.GPU.Layers)
	if err != nil {
		return nil, nil, err
	}
	v, limit, what := fb.bound(stats)
	if v <= limit {
		fb.log.Info("gpu-fast", "within-bound", map[string]any{"measure": what, "value": v, "bound": limit})
		return b, acc, nil
	}
	cur := slices.Clone(p.Header.GPU.Layers)
	sens := map[int]float64{}
	for i, l := range cur {
		if !l.Fast() {
			continue
		}
		only := slices.Clone(fb.exact)
		only[i] = l
		vb, err := fb.variant(p, only)
		if err != nil {
			return nil, nil, err
		}
		_, st, err := fb.ev.measure(vb)
		if err != nil {
			return nil, nil, err
		}
		sens[i], _, _ = fb.bound(st)
		fb.log.Info("gpu-fast", "sensitivity", map[string]any{"layer": l.Layer, "kernel": l.Kernel, "measure": what, "alone_fast": sens[i]})
	}
	for _, i := range sortedBySensitivity(sens, cur) {
		if sens[i] > limit {
			fb.back(cur, i, fmt.Sprintf("with only this layer fast, the %s is %.3g, over the bound %.3g", what, sens[i], limit))
		}
	}
	for {
		if b, err = fb.variant(p, cur); err != nil {
			return nil, nil, err
		}
		if acc, stats, err = fb.ev.measure(b); err != nil {
			return nil, nil, err
		}
		if v, _, _ = fb.bound(stats); v <= limit {
			fb.log.Info("gpu-fast", "within-bound", map[string]any{"measure": what, "value": v, "bound": limit, "fallbacks": len(fb.fallbacks)})
			return b, acc, nil
		}
		left := sortedBySensitivity(sens, cur)
		if len(left) == 0 {
			fb.log.Warn("gpu-fast", "bound-unmet", map[string]any{"measure": what, "value": v, "bound": limit, "reason": "no fast layer left"})
			return b, acc, nil
		}
		i := left[0]
		fb.back(cur, i, fmt.Sprintf("the plan's %s %.3g exceeds the bound %.3g; this is the most sensitive fast layer left (%.3g with it alone fast)", what, v, limit, sens[i]))
	}
}

// sortedBySensitivity lists the layers of cur still fast, most sensitive
// first (ties by name).
func sortedBySensitivity(sens map[int]float64, cur []plan.Placement) []int {
	var out []int
	for i, l := range cur {
		if l.Fast() {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(a, b int) int {
		switch {
		case sens[a] > sens[b]:
			return -1
		case sens[a] < sens[b]:
			return 1
		}
		return cmp.Compare(cur[a].Layer, cur[b].Layer)
	})
	return out
}
