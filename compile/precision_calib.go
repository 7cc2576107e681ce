package compile

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/quant"
	"github.com/vouchml/vouch/tensor"
)

// maxKeptBytes bounds the activations kept between the two calibration
// passes; beyond it the second pass runs the model again.
const maxKeptBytes = 512 << 20

// runner runs a graph over batches of the model's single data input.
type runner struct {
	s     *state
	input *ir.Value
	chunk int
}

func newRunner(s *state, g *ir.Graph) (*runner, error) {
	var ins []*ir.Value
	for _, v := range g.Inputs {
		if _, isInit := g.Initializers[v.Name]; !isInit {
			ins = append(ins, v)
		}
	}
	if len(ins) != 1 {
		return nil, fmt.Errorf("calibration and evaluation data feed one input; the model has %d", len(ins))
	}
	r := &runner{s: s, input: ins[0], chunk: 64}
	if t := ins[0].Type; t.RankKnown && len(t.Shape) > 0 && t.Shape[0].Known() {
		r.chunk = max(1, int(t.Shape[0].Value))
	}
	return r, nil
}

// run runs g on every chunk of data and calls visit with the values of
// names (graph input, initializer or any produced value) for that chunk.
func (r *runner) run(g *ir.Graph, data []*tensor.Tensor, names []string, visit func(vals map[string][]float32) error) error {
	gc := *g
	gc.Outputs = append([]*ir.Value{}, g.Outputs...)
	have := map[string]bool{}
	for _, o := range g.Outputs {
		have[o.Name] = true
	}
	for _, n := range names {
		if !have[n] && n != r.input.Name {
			if _, isInit := g.Initializers[n]; !isInit {
				gc.Outputs = append(gc.Outputs, &ir.Value{Name: n})
				have[n] = true
			}
		}
	}
	e, err := exec.New(&gc, r.s.reg)
	if err != nil {
		return err
	}
	for _, b := range data {
		b, err := asDType(b, r.input.Type.DType)
		if err != nil {
			return err
		}
		for _, c := range quant.Rows(b, r.chunk) {
			if c.Shape[0] != r.chunk && r.input.Type.RankKnown && r.input.Type.Shape[0].Known() {
				return fmt.Errorf("data batch of %d rows does not split into the input's fixed batch %d", b.Shape[0], r.chunk)
			}
			outs, err := e.Run(map[string]*tensor.Tensor{r.input.Name: c})
			if err != nil {
				return fmt.Errorf("running the model on calibration/evaluation data: %w", err)
			}
			vals := map[string][]float32{}
			for _, n := range names {
				t := outs[n]
				if n == r.input.Name {
					t = c
				} else if t == nil {
					t = g.Initializers[n]
				}
				if t == nil || t.DType != tensor.Float32 {
					return fmt.Errorf("tensor %q is not a float32 value", n)
				}
				vals[n] = t.Data.([]float32)
			}
			if err := visit(vals); err != nil {
				return err
			}
		}
	}
	return nil
}

func asDType(t *tensor.Tensor, dt tensor.DType) (*tensor.Tensor, error) {
	if t.DType == dt || dt == tensor.Undefined {
		return t, nil
	}
	if !t.DType.IsFloat() || !dt.IsFloat() {
		return nil, fmt.Errorf("data is %v, the model input is %v", t.DType, dt)
	}
	v, err := t.Float64s()
	if err != nil {
		return nil, err
	}
	return tensor.FromFloat64s(dt, t.Shape, v), nil
}

func samples(data []*tensor.Tensor) int {
	n := 0
	for _, b := range data {
		n += b.Shape[0]
	}
	return n
}

// calibrate returns the activation scale of every int8 layer's input:
// from the calibration cache where it has the tensor, else from the
// calibration data with the chosen calibrator.
func calibrate(s *state, ref *ir.Graph, layers []*weighted, want map[string]string, res *precisionResult) (map[string]float32, error) {
	q := s.opts.Quant
	users := map[string][]string{}
	for _, l := range layers {
		if want[l.n.Name] == "int8" {
			users[l.x] = append(users[l.x], l.n.Name)
		}
	}
	need := quant.SortedNames(users)
	scales := map[string]float32{}
	out := &quant.Cache{Calibrator: q.calibrator(), Scales: scales, Notes: map[string]string{}}
	if out.Calibrator == quant.Percentile {
		out.Param = fmt.Sprint(q.percentile())
	}
	rep := res.report
	rep.Calibrator = out.Calibrator
	var missing []string
	for _, t := range need {
		if s.qdq != nil && s.qdq.act[t] > 0 {
			sc := s.qdq.act[t]
			scales[t] = sc
			s.log.Info("precision", "scale-from-model", map[string]any{"tensor": t, "scale": sc})
			rep.Tensors = append(rep.Tensors, buildlog.TensorRange{Tensor: t, Scale: sc, Threshold: float64(sc) * 127, FromModel: true})
			continue
		}
		if q.Cache != nil {
			if sc, ok := q.Cache.Scales[t]; ok {
				scales[t] = sc
				s.log.Info("precision", "scale-from-cache", map[string]any{"tensor": t, "scale": sc, "cache_calibrator": q.Cache.Calibrator})
				rep.Tensors = append(rep.Tensors, buildlog.TensorRange{Tensor: t, Scale: sc, Threshold: float64(sc) * 127, FromCache: true})
				continue
			}
		}
		missing = append(missing, t)
	}
	if q.Cache != nil && len(missing) == 0 {
		out.Calibrator, out.Param = q.Cache.Calibrator, q.Cache.Param
		rep.Calibrator = q.Cache.Calibrator + " (cache)"
	}
	if len(missing) > 0 {
		if len(q.Calib) == 0 {
			return nil, fmt.Errorf("int8 needs calibration: tensors %s have no scale (give --calib FILE|DIR, or a --calib-cache that holds them)", strings.Join(missing, ", "))
		}
		r, err := newRunner(s, ref)
		if err != nil {
			return nil, err
		}
		rep.CalibrationSamples = samples(q.Calib)
		cols := map[string]*quant.Collector{}
		for _, t := range missing {
			cols[t] = &quant.Collector{}
		}
		var kept []map[string][]float32
		keptBytes := 0
		err = r.run(ref, q.Calib, missing, func(v map[string][]float32) error {
			for _, t := range missing {
				cols[t].Range(v[t])
				keptBytes += 4 * len(v[t])
			}
			if keptBytes <= maxKeptBytes {
				kept = append(kept, v)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		hist := func(v map[string][]float32) error {
			for _, t := range missing {
				cols[t].Histogram(v[t])
			}
			return nil
		}
		if keptBytes <= maxKeptBytes {
			for _, v := range kept {
				hist(v)
			}
		} else if err := r.run(ref, q.Calib, missing, hist); err != nil {
			return nil, err
		}
		kept = nil
		for _, t := range missing {
			c := cols[t]
			cr, err := c.Calibrate(out.Calibrator, q.percentile())
			if err != nil {
				return nil, err
			}
			scales[t] = cr.Scale
			out.Notes[t] = fmt.Sprintf("amax=%.6g threshold=%.6g clipped=%.4f%%", cr.Amax, cr.Threshold, 100*cr.Clipped)
			s.log.Info("precision", "calibrated", map[string]any{"tensor": t, "layers": users[t], "calibrator": out.Calibrator,
				"amax": cr.Amax, "threshold": cr.Threshold, "scale": cr.Scale, "clipped_fraction": cr.Clipped, "values": c.Total})
			rep.Tensors = append(rep.Tensors, buildlog.TensorRange{Tensor: t, Amax: cr.Amax, Threshold: cr.Threshold, Scale: cr.Scale, Clipped: cr.Clipped})
			if cr.Clipped >= clipWarn {
				for _, l := range users[t] {
					msg := fmt.Sprintf("layer %s: %.1f%% of activations clipped", l, 100*cr.Clipped)
					s.log.Warn("precision", "clipped", map[string]any{"layer": l, "tensor": t, "clipped_fraction": cr.Clipped, "message": msg})
				}
			}
		}
	}
	sort.Slice(rep.Tensors, func(i, j int) bool { return rep.Tensors[i].Tensor < rep.Tensors[j].Tensor })
	res.cache = out
	return scales, nil
}

// outputsOf runs g on data and returns the concatenated float32 values of
// names.
func outputsOf(r *runner, g *ir.Graph, data []*tensor.Tensor, names []string) (map[string][]float32, error) {
	acc := map[string][]float32{}
	err := r.run(g, data, names, func(v map[string][]float32) error {
		for _, n := range names {
			acc[n] = append(acc[n], v[n]...)
		}
		return nil
	})
	return acc, err
}

// evaluate measures the reduced graph against the fp32 one: each
// converted layer's output SQNR, the accuracy comparison and, under
// precision best, the fallback of the most sensitive layers to fp32 until
// the accuracy drop (or, without labels, the top-1 disagreement, which
// bounds it) is within Quant.MaxAccuracyDrop.
func evaluate(s *state, ref *ir.Graph, conv *converter, layers []*weighted, want map[string]string, current **ir.Graph, res *precisionResult) error {
	q := s.opts.Quant
	rep := res.report
	data, labels, src := q.EvalData, q.EvalLabels, "evaluation data"
	if labels == nil {
		src = "evaluation data (no labels: top-1 agreement and KL only)"
	}
	if data == nil {
		data, labels, src = q.Calib, nil, "calibration data (no labels: top-1 agreement and KL only)"
	}
	for _, l := range layers {
		if want[l.n.Name] != "fp32" {
			rep.Layers = append(rep.Layers, buildlog.LayerPrecision{Layer: l.n.Name, Precision: want[l.n.Name], Input: l.x})
		}
	}
	if data == nil {
		if s.opts.Precision == "best" {
			return fmt.Errorf("precision best needs evaluation or calibration data to measure accuracy")
		}
		s.log.Info("precision", "not-evaluated", map[string]any{"reason": "no evaluation or calibration data"})
		return nil
	}
	r, err := newRunner(s, ref)
	if err != nil {
		return err
	}
	rep.EvalData = src
	final := ref.Outputs[0].Name
	names := []string{final}
	for _, l := range layers {
		if o := l.n.Outputs[0]; want[l.n.Name] != "fp32" && o != final {
			names = append(names, o)
		}
	}
	var lab []int64
	if labels != nil {
		if lab, err = labels.Int64s(); err != nil {
			return fmt.Errorf("evaluation labels: %w", err)
		}
	}
	refOut, err := outputsOf(r, ref, data, names)
	if err != nil {
		return err
	}
	classes := len(refOut[final]) / max(samples(data), 1)
	score := func(g *ir.Graph, names []string) (quant.Accuracy, map[string][]float32, error) {
		out, err := outputsOf(r, g, data, names)
		if err != nil {
			return quant.Accuracy{}, nil, err
		}
		acc, err := quant.Compare(refOut[final], out[final], classes, lab)
		return acc, out, err
	}
	acc, out, err := score(*current, names)
	if err != nil {
		return err
	}
	for i := range rep.Layers {
		lp := &rep.Layers[i]
		var l *weighted
		for _, x := range layers {
			if x.n.Name == lp.Layer {
				l = x
			}
		}
		if l == nil || lp.Precision == "fp32" {
			continue
		}
		o := l.n.Outputs[0]
		sq := quant.SQNR(refOut[o], out[o])
		lp.SQNR = finite(sq)
		s.log.Info("precision", "sqnr", map[string]any{"layer": lp.Layer, "precision": lp.Precision, "output": o, "sqnr_db": finite(sq)})
		if sq < 20 {
			s.log.Warn("precision", "low-sqnr", map[string]any{"layer": lp.Layer, "sqnr_db": finite(sq), "message": fmt.Sprintf("layer %s: output SQNR %.1f dB against fp32", lp.Layer, sq)})
		}
	}
	metric := func(a quant.Accuracy) (float64, string) {
		if lab != nil {
			return a.Drop, "accuracy drop"
		}
		return 100 - a.Agreement, "top-1 disagreement"
	}
	logAcc := func(a quant.Accuracy, event string) {
		s.log.Info("precision", event, map[string]any{"data": src, "samples": a.Samples, "fp32_accuracy": a.FP32, "reduced_accuracy": a.Reduced,
			"drop_pp": a.Drop, "top1_agreement": a.Agreement, "mean_kl": a.MeanKL, "labelled": lab != nil})
	}
	logAcc(acc, "accuracy")
	if s.opts.Precision == "best" {
		bound := q.maxDrop()
		var sens map[string]float64
		for {
			m, what := metric(acc)
			if m <= bound {
				s.log.Info("precision", "within-bound", map[string]any{"measure": what, "value_pp": m, "bound_pp": bound})
				break
			}
			var int8s []string
			for _, l := range layers {
				if want[l.n.Name] == "int8" {
					int8s = append(int8s, l.n.Name)
				}
			}
			if len(int8s) == 0 {
				s.log.Warn("precision", "bound-unmet", map[string]any{"measure": what, "value_pp": m, "bound_pp": bound, "reason": "no int8 layer left"})
				break
			}
			if sens == nil {
				sens = map[string]float64{}
				for _, name := range int8s {
					only := map[string]string{}
					for k, v := range want {
						if v == "int8" && k != name {
							v = "fp32"
						}
						only[k] = v
					}
					o, err := outputsOf(r, conv.apply(only), data, []string{final})
					if err != nil {
						return err
					}
					sens[name] = quant.SQNR(refOut[final], o[final])
					s.log.Info("precision", "sensitivity", map[string]any{"layer": name, "isolated_output_sqnr_db": finite(sens[name])})
				}
			}
			sort.Slice(int8s, func(i, j int) bool {
				if sens[int8s[i]] != sens[int8s[j]] {
					return sens[int8s[i]] < sens[int8s[j]]
				}
				return int8s[i] < int8s[j]
			})
			victim := int8s[0]
			why := fmt.Sprintf("%s %.2f pp exceeds %.2f pp; %s is the most sensitive int8 layer left (model-output SQNR %.1f dB with it alone in int8)", what, m, bound, victim, sens[victim])
			s.log.Warn("precision", "fallback", map[string]any{"layer": victim, "to": "fp32", "reason": why})
			rep.Fallbacks = append(rep.Fallbacks, buildlog.Fallback{Layer: victim, Reason: why, SQNR: finite(sens[victim]), Drop: m})
			want[victim] = "fp32"
			for i := range rep.Layers {
				if rep.Layers[i].Layer == victim {
					rep.Layers[i].Precision, rep.Layers[i].Reason, rep.Layers[i].SQNR = "fp32", "fallback: "+what, 0
				}
			}
			*current = conv.apply(want)
			if acc, _, err = score(*current, []string{final}); err != nil {
				return err
			}
			logAcc(acc, "accuracy-after-fallback")
		}
	}
	acc.MeanKL = finiteKL(acc.MeanKL)
	rep.Accuracy = &acc
	return nil
}

func finiteKL(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 999
	}
	return v
}
