package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/conformance"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// A zoo is a directory of models laid out like ../shared/models and the ONNX
// backend test suite (scripts/make-zoo.py writes one):
//
//	DIR/<name>/model.onnx
//	DIR/<name>/test_data_set_0/input_<i>.pb, output_<i>.pb
//
// Zoo builds each model in memory, checks that the plan reproduces the
// reference outputs, then times vouch and ONNX Runtime on the reference
// inputs, alternating.

// Zoo tolerances: the model tolerances of the conformance suite.
const ZooRTol, ZooATol = 1e-4, 1e-5

// ZooOptions are the settings of a zoo run.
type ZooOptions struct {
	// Batch tiles each reference input Batch times along its first
	// dimension (a model exported at batch 1 is relaxed to a dynamic
	// batch); every batch row's outputs are checked against the reference.
	Batch int
	// Runs is the most timed runs per engine and model, MinRuns the least;
	// between the two, as many as fit in Budget per engine.
	Runs, MinRuns int
	Warmup        int
	Budget        time.Duration
	// Peer is the peer to compare with ("ort"); "" times vouch alone.
	Peer   string
	Config PeerConfig
	// Only, when not empty, restricts the run to these model names.
	Only []string
	// Compile are the build options (compile.DefaultOptions when zero).
	Compile *compile.Options
	// Progress, when set, is called with each row as it is done.
	Progress func(ZooRow)
}

// ZooStatus says how a zoo model fared.
type ZooStatus string

const (
	// ZooOK: vouch matched the reference; timed against the peer if it ran.
	ZooOK ZooStatus = "ok"
	// ZooMismatch: vouch ran but its outputs differ from the reference
	// (still timed; left out of the summary).
	ZooMismatch ZooStatus = "mismatch"
	// ZooFailed: vouch could not build or run the model.
	ZooFailed ZooStatus = "failed"
)

// ZooRow is one model's line of the zoo table.
type ZooRow struct {
	Model  string    `json:"model"`
	Status ZooStatus `json:"status"`
	// Reason explains a mismatch or a failure, or why the peer did not run.
	Reason string `json:"reason,omitempty"`
	Nodes  int    `json:"onnx_nodes"`
	Layers int    `json:"layers,omitempty"`
	// ThreadInvariant: the plan gave the same bits at 1 and at 2 threads
	// as at the run's own thread count (a difference is a mismatch).
	ThreadInvariant bool `json:"thread_invariant"`
	// MaxAbsErr is the largest |vouch - reference| over float outputs.
	MaxAbsErr float64 `json:"max_abs_err"`
	// PeerMaxAbsErr is the same for the peer's outputs (0 when it did not
	// run): where both engines are off alike, it is float32 rounding.
	PeerMaxAbsErr float64       `json:"peer_max_abs_err,omitempty"`
	Runs          int           `json:"runs,omitempty"`
	Vouch         time.Duration `json:"vouch_median_ns,omitempty"`
	Peer          time.Duration `json:"peer_median_ns,omitempty"`
	// Ratio is Vouch/Peer (0 when the peer did not run).
	Ratio float64 `json:"ratio,omitempty"`
}

// ZooSummary is the geometric mean of the ratios over every row that ran
// on both engines, and the worst of them. A row that ran but missed the
// reference's tolerance counts in the speed figures too (its mismatch is
// counted and shown on its own): leaving it out would flatter the geomean
// and hide a slow model behind an accuracy miss.
type ZooSummary struct {
	Models, Compared, Mismatched, Failed int
	// ThreadInvariant counts the models whose plan gave the same bits at
	// 1 and 2 threads.
	ThreadInvariant int
	Geomean         float64
	Worst           ZooRow
}

// ZooModels lists the model names of a zoo directory (subdirectories, or
// links to directories, holding model.onnx), sorted.
func ZooModels(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("bench: zoo: %w", err)
	}
	var names []string
	for _, e := range ents {
		// os.Stat follows links: a zoo may link models from others.
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "model.onnx")); err == nil {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("bench: zoo: no DIR/<name>/model.onnx under %s (scripts/make-zoo.py writes a zoo)", dir)
	}
	sort.Strings(names)
	return names, nil
}

// Zoo runs every model of dir (see ZooModels) and returns one row per
// model, in name order. A model that vouch cannot build, or whose outputs
// mismatch, is a row with the reason, never an error: the error is for the
// zoo itself (no such directory, an unknown name in Only, ctx done).
func Zoo(ctx context.Context, dir string, o ZooOptions) ([]ZooRow, error) {
	names, err := ZooModels(dir)
	if err != nil {
		return nil, err
	}
	if len(o.Only) > 0 {
		for _, n := range o.Only {
			found := false
			for _, m := range names {
				found = found || m == n
			}
			if !found {
				return nil, fmt.Errorf("bench: zoo: no model %q under %s", n, dir)
			}
		}
		names = o.Only
	}
	o = o.withDefaults()
	var rows []ZooRow
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		row := zooModel(ctx, filepath.Join(dir, name), name, o)
		if o.Progress != nil {
			o.Progress(row)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (o ZooOptions) withDefaults() ZooOptions {
	if o.Batch < 1 {
		o.Batch = 1
	}
	if o.Runs < 1 {
		o.Runs = 20
	}
	if o.MinRuns < 1 {
		o.MinRuns = 3
	}
	o.MinRuns = min(o.MinRuns, o.Runs)
	if o.Budget <= 0 {
		o.Budget = 2 * time.Second
	}
	if o.Compile == nil {
		c := compile.DefaultOptions()
		o.Compile = &c
	}
	return o
}

// zooModel measures one model; a panic in vouch's build or run becomes the
// row's reason.
func zooModel(ctx context.Context, dir, name string, o ZooOptions) (row ZooRow) {
	row = ZooRow{Model: name, Status: ZooFailed}
	defer func() {
		if p := recover(); p != nil {
			row.Status, row.Reason = ZooFailed, fmt.Sprintf("panic: %v", p)
		}
	}()
	m, want, err := loadZooModel(dir, name, o, &row)
	if err != nil {
		row.Reason = err.Error()
		return row
	}
	ex, err := exec.New(m.Plan.Graph, builtin.Registry())
	if err != nil {
		row.Reason = "exec: " + err.Error()
		return row
	}
	g := m.Plan.Graph
	inputs := make([]*tensor.Tensor, len(g.Inputs))
	shapes := make([][]int, len(g.Inputs))
	for i, v := range g.Inputs {
		inputs[i] = m.Inputs[v.Name]
		shapes[i] = inputs[i].Shape
	}
	b, err := ex.Bind(shapes)
	if err != nil {
		row.Reason = "bind: " + err.Error()
		return row
	}
	start := time.Now()
	got, err := b.Execute(inputs)
	first := time.Since(start)
	if err != nil {
		row.Reason = "run: " + err.Error()
		return row
	}
	row.Status = ZooOK
	var bad []string
	for i, v := range g.Outputs {
		row.MaxAbsErr = max(row.MaxAbsErr, maxAbsErr(got[i], want[i]))
		if err := conformance.Compare(got[i], want[i], ZooRTol, ZooATol); err != nil {
			bad = append(bad, fmt.Sprintf("output %q: %v", v.Name, err))
		}
	}
	if len(bad) > 0 {
		row.Status, row.Reason = ZooMismatch, strings.Join(bad, "; ")
	}
	// The determinism promise on every zoo model: the plan at 1 and at 2
	// threads gives the bits of the run above.
	row.ThreadInvariant = true
	for _, th := range []int{1, 2} {
		if why := threadBits(g, shapes, inputs, got, th); why != "" {
			row.ThreadInvariant = false
			row.Status, row.Reason = ZooMismatch, joinReason(row.Reason, why)
		}
	}
	vouch := &vouchEngine{b: b, inputs: inputs}
	engines := []Engine{vouch}
	if o.Peer != "" {
		p, err := NewPeer(o.Peer, m, o.Config)
		if err != nil {
			row.Reason = joinReason(row.Reason, err.Error())
		} else {
			defer p.Close()
			engines = append(engines, p)
			if pout, err := peerOutputs(p); err == nil && len(pout) == len(want) {
				for i := range want {
					row.PeerMaxAbsErr = max(row.PeerMaxAbsErr, maxAbsErr(pout[i], want[i]))
				}
			}
		}
	}
	row.Runs = o.Runs
	if first > 0 {
		row.Runs = max(o.MinRuns, min(o.Runs, int(o.Budget/first)))
	}
	res, err := Compare(ctx, engines, Options{Runs: row.Runs, Warmup: o.Warmup})
	if err != nil && len(engines) > 1 {
		// The peer may be the one that failed: time vouch alone.
		peerErr := err
		if res, err = Compare(ctx, engines[:1], Options{Runs: row.Runs, Warmup: o.Warmup}); err == nil {
			row.Reason = joinReason(row.Reason, peerErr.Error())
		}
	}
	if err != nil {
		row.Status, row.Reason = ZooFailed, err.Error()
		return row
	}
	row.Vouch = res[0].Summary.Median
	if len(res) > 1 {
		row.Peer = res[1].Summary.Median
		row.Ratio = Ratio(row.Vouch, row.Peer)
	}
	return row
}

// threadBits runs g on a fresh executor at threads threads and names the
// first output whose bits differ from want ("" when all are the same).
func threadBits(g *ir.Graph, shapes [][]int, inputs, want []*tensor.Tensor, threads int) string {
	ex, err := exec.New(g, builtin.Registry())
	if err == nil {
		err = ex.SetCPU(exec.CPU{Threads: threads})
	}
	var b *exec.Bound
	if err == nil {
		b, err = ex.Bind(shapes)
	}
	var got []*tensor.Tensor
	if err == nil {
		got, err = b.Execute(inputs)
	}
	if err != nil {
		return fmt.Sprintf("at %d threads: %v", threads, err)
	}
	for i, v := range g.Outputs {
		if !sameBits(got[i], want[i]) {
			return fmt.Sprintf("output %q differs at %d threads", v.Name, threads)
		}
	}
	return ""
}

// sameBits reports whether a and b hold the same values bit for bit.
func sameBits(a, b *tensor.Tensor) bool {
	if a.DType != b.DType || !reflect.DeepEqual(a.Shape, b.Shape) {
		return false
	}
	return string(tensor.RawBytes(a)) == string(tensor.RawBytes(b))
}

func joinReason(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// loadZooModel builds the model and reads its reference, tiled to o.Batch.
func loadZooModel(dir, name string, o ZooOptions, row *ZooRow) (*Model, []*tensor.Tensor, error) {
	path := filepath.Join(dir, "model.onnx")
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	om, err := onnx.Decode(src, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("decode: %w", err)
	}
	row.Nodes = len(om.Graph.Nodes)
	m := &Model{Path: path, Name: name, ONNX: src, Inputs: map[string]*tensor.Tensor{}}
	data := filepath.Join(dir, "test_data_set_0")
	for i, v := range om.Graph.Inputs {
		t, err := readRef(filepath.Join(data, fmt.Sprintf("input_%d.pb", i)), o.Batch)
		if err != nil {
			return nil, nil, fmt.Errorf("reference input %q: %w", v.Name, err)
		}
		m.Inputs[v.Name] = t
	}
	var want []*tensor.Tensor
	for i, v := range om.Graph.Outputs {
		t, err := readRef(filepath.Join(data, fmt.Sprintf("output_%d.pb", i)), o.Batch)
		if err != nil {
			return nil, nil, fmt.Errorf("reference output %q: %w", v.Name, err)
		}
		want = append(want, t)
	}
	opts := *o.Compile
	if o.Batch != 1 && fixedBatch(om.Graph.Inputs) {
		RelaxBatch(om.Graph)
		if m.ONNX, err = relaxONNX(src); err != nil {
			return nil, nil, err
		}
	}
	if o.Batch != 1 && len(opts.Profiles) == 0 {
		// One profile at the batch measured: the default one reaches the
		// default maximum batch, whose arena a large model exceeds the
		// plan's memory budget with.
		opts.Profiles = []plan.Profile{batchProfile(om.Graph, o.Batch)}
	}
	res, err := compile.Build(om, src, name, "vouch bench --zoo", opts, builtin.Registry(), buildlog.New(nil))
	if err != nil {
		return nil, nil, fmt.Errorf("build: %w", err)
	}
	if m.Plan, err = plan.Decode(res.Plan); err != nil {
		return nil, nil, fmt.Errorf("decoding the plan: %w", err)
	}
	m.Built = true
	row.Layers = len(m.Plan.Graph.Nodes)
	if err := checkInputs(m.Plan.Graph, m.Inputs); err != nil {
		return nil, nil, err
	}
	if _, err := m.Plan.SelectProfile(m.Inputs); err != nil {
		return nil, nil, fmt.Errorf("batch %d: %w", o.Batch, err)
	}
	return m, want, nil
}

func checkInputs(g *ir.Graph, in map[string]*tensor.Tensor) error {
	for _, v := range g.Inputs {
		if in[v.Name] == nil {
			return fmt.Errorf("the plan's input %q has no reference input", v.Name)
		}
	}
	return nil
}

// readRef reads a reference tensor and repeats it batch times along its
// first dimension.
func readRef(path string, batch int) (*tensor.Tensor, error) {
	t, _, err := onnx.DecodeTensorFile(path)
	if err != nil {
		return nil, err
	}
	if batch == 1 {
		return t, nil
	}
	if len(t.Shape) == 0 {
		return nil, errors.New("a scalar cannot be tiled into a batch")
	}
	shape := append([]int{t.Shape[0] * batch}, t.Shape[1:]...)
	src := reflect.ValueOf(t.Data)
	n := src.Len()
	dst := reflect.MakeSlice(src.Type(), n*batch, n*batch)
	for b := 0; b < batch; b++ {
		reflect.Copy(dst.Slice(b*n, (b+1)*n), src)
	}
	return tensor.From(dst.Interface(), shape...), nil
}

// maxAbsErr is the largest |got - want| over two float tensors of the same
// size (0 otherwise; Compare reports those).
func maxAbsErr(got, want *tensor.Tensor) float64 {
	if got == nil || want == nil || !want.DType.IsFloat() || got.Len() != want.Len() {
		return 0
	}
	g, err1 := got.Float64s()
	w, err2 := want.Float64s()
	if err1 != nil || err2 != nil {
		return 0
	}
	var m float64
	for i := range w {
		if d := math.Abs(g[i] - w[i]); d > m || math.IsNaN(d) {
			m = d
		}
	}
	return m
}

// SummarizeZoo computes the geometric mean of the ratios of the rows that
// matched their reference and ran on both engines, and the worst of them.
func SummarizeZoo(rows []ZooRow) ZooSummary {
	s := ZooSummary{Models: len(rows)}
	var logSum float64
	for _, r := range rows {
		switch r.Status {
		case ZooMismatch:
			s.Mismatched++
		case ZooFailed:
			s.Failed++
		}
		if r.ThreadInvariant {
			s.ThreadInvariant++
		}
		if r.Status == ZooFailed || r.Ratio <= 0 {
			continue
		}
		s.Compared++
		logSum += math.Log(r.Ratio)
		if r.Ratio > s.Worst.Ratio {
			s.Worst = r
		}
	}
	if s.Compared > 0 {
		s.Geomean = math.Exp(logSum / float64(s.Compared))
	}
	return s
}
