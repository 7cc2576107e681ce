package explain

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/ml"
	"github.com/vouchml/vouch/kernel/tree"
)

// Methods, as recorded in audit.Explanation.Method.
const (
	TreeSHAP   = "tree_shap"
	Linear     = "linear"
	KernelSHAP = "kernel_shap"
)

// Bounds on what a bundle or a request can make the explainer do.
const (
	MaxFeatures   = 4096    // features of an explained model
	MaxBackground = 1024    // background rows kept
	maxExactFeats = 12      // KernelSHAP enumerates every coalition up to this
	maxEvalRows   = 1 << 16 // model rows per KernelSHAP evaluation batch
)

// ErrUnsupported is returned by New for a model it cannot explain (no
// recognised structure and no way to run it).
var ErrUnsupported = errors.New("explain: model not supported")

// A RunFunc runs the model on rows rows of features (row-major) and returns
// the explained output, rows × classes, row-major, and classes. It MUST be
// a pure, batch-invariant function of its rows (a plan's contract), so
// that KernelSHAP gives the same bits however its evaluations are batched.
type RunFunc func(ctx context.Context, x []float32, rows int) (out []float32, classes int, err error)

// Options configure an Explainer.
type Options struct {
	// Features names the input's columns; default f0, f1, …
	Features []string
	// Background is a set of rows (row-major, len a multiple of the number
	// of features): the tree covers are counted from it, and KernelSHAP
	// takes its baseline from it.
	Background []float32
	// Top is the number of reasons kept per row (default 5, at most
	// audit.MaxReasons).
	Top int
	// Seed seeds KernelSHAP's coalition sample (more than 12 features);
	// Samples is its size (default 2048).
	Seed    uint64
	Samples int
	// Exact is the largest number of features for which KernelSHAP
	// enumerates every coalition rather than sampling (default 12).
	Exact int
	// Run runs the model, for KernelSHAP; Output names what it returns.
	Run    RunFunc
	Output string
}

// An Explainer computes attributions for one model. It is safe for
// concurrent use.
type Explainer struct {
	method   string
	input    string
	nfeat    int
	features []string
	top      int
	bgDigest string
	score    string
	covers   string

	ens    *tree.Ensemble
	linear *ir.Node
	scale  []float32 // Scaler folded into the linear model (nil: none)
	offset []float32

	bg      []float32 // KernelSHAP baseline rows
	bgRows  int
	run     RunFunc
	samples int
	seed    uint64
	exactF  int
	base    baseline
}

// New returns an explainer for g, whose only input must be a float matrix
// [N, F] with F known.
func New(g *ir.Graph, o Options) (*Explainer, error) {
	if len(g.Inputs) != 1 {
		return nil, fmt.Errorf("%w: %d inputs (want one feature matrix)", ErrUnsupported, len(g.Inputs))
	}
	in := g.Inputs[0]
	t := in.Type
	if !t.RankKnown || len(t.Shape) != 2 || !t.Shape[1].Known() || t.Shape[1].Value < 1 {
		return nil, fmt.Errorf("%w: input %q is not a matrix [N, F] with F known", ErrUnsupported, in.Name)
	}
	nfeat := int(t.Shape[1].Value)
	if nfeat > MaxFeatures {
		return nil, fmt.Errorf("explain: input %q has %d features (at most %d)", in.Name, nfeat, MaxFeatures)
	}
	e := &Explainer{input: in.Name, nfeat: nfeat, top: o.Top, seed: o.Seed, samples: o.Samples, exactF: o.Exact}
	if e.exactF <= 0 {
		e.exactF = maxExactFeats
	}
	e.exactF = min(e.exactF, maxExactFeats)
	if e.top <= 0 {
		e.top = 5
	}
	e.top = min(e.top, audit.MaxReasons, nfeat)
	if e.samples <= 0 {
		e.samples = 2048
	}
	e.samples = min(e.samples, 1<<16)
	switch {
	case o.Features == nil:
		for j := range nfeat {
			e.features = append(e.features, fmt.Sprintf("f%d", j))
		}
	case len(o.Features) != nfeat:
		return nil, fmt.Errorf("explain: %d feature names for %d features of input %q", len(o.Features), nfeat, in.Name)
	default:
		e.features = slices.Clone(o.Features)
	}
	if len(o.Background)%nfeat != 0 || len(o.Background)/nfeat > MaxBackground {
		return nil, fmt.Errorf("explain: background of %d values is not at most %d rows of %d features", len(o.Background), MaxBackground, nfeat)
	}
	bgRows := len(o.Background) / nfeat
	if bgRows > 0 {
		e.bgDigest = BackgroundDigest(o.Background, nfeat)
	}
	if n := find(g, in.Name, "TreeEnsembleClassifier", "TreeEnsembleRegressor", "TreeEnsemble"); n != nil {
		ens, err := tree.FromNode(n)
		if err == nil && ens.NumFeatures() <= nfeat {
			e.method, e.ens, e.score, e.covers = TreeSHAP, ens, "margin", "model"
			if bgRows > 0 {
				if err := ens.CoversFromData(o.Background, bgRows); err != nil {
					return nil, fmt.Errorf("explain: tree covers from the background: %w", err)
				}
				e.covers = "background"
			}
			if err := e.probe(); err == nil {
				return e, nil
			}
		}
	}
	if n, scale, offset := findLinear(g, in.Name, nfeat); n != nil {
		e.method, e.linear, e.scale, e.offset, e.score, e.covers = Linear, n, scale, offset, "margin", ""
		if err := e.probe(); err == nil {
			return e, nil
		}
	}
	if o.Run == nil {
		return nil, fmt.Errorf("%w: no tree ensemble or linear model reads input %q, and no way to run the model", ErrUnsupported, in.Name)
	}
	if bgRows == 0 {
		return nil, fmt.Errorf("%w: KernelSHAP needs a background set (vouch build --background)", ErrUnsupported)
	}
	e.method, e.score, e.covers = KernelSHAP, o.Output, ""
	e.ens, e.linear = nil, nil
	bgRows = min(bgRows, maxKernelBackground)
	e.run, e.bg, e.bgRows = o.Run, o.Background[:bgRows*nfeat], bgRows
	return e, nil
}

// probe explains a row of zeros, so that a model whose parts the kernels
// refuse is caught at load time rather than on a request.
func (e *Explainer) probe() error {
	x := make([]float32, e.nfeat)
	_, _, err := e.exact(x, 1)
	return err
}

// find returns the only node of one of the op types that reads input.
func find(g *ir.Graph, input string, ops ...string) *ir.Node {
	var found *ir.Node
	for _, n := range g.Nodes {
		if slices.Contains(ops, n.OpType) && len(n.Inputs) > 0 && n.Inputs[0] == input {
			if found != nil {
				return nil
			}
			found = n
		}
	}
	return found
}

// findLinear finds a linear model reading the input, directly or through
// one Scaler whose output only it reads.
func findLinear(g *ir.Graph, input string, nfeat int) (*ir.Node, []float32, []float32) {
	if n := find(g, input, "LinearClassifier", "LinearRegressor"); n != nil {
		return n, nil, nil
	}
	s := find(g, input, "Scaler")
	if s == nil || len(s.Outputs) != 1 {
		return nil, nil, nil
	}
	n := find(g, s.Outputs[0], "LinearClassifier", "LinearRegressor")
	if n == nil {
		return nil, nil, nil
	}
	readers := 0
	for _, m := range g.Nodes {
		if slices.Contains(m.Inputs, s.Outputs[0]) {
			readers++
		}
	}
	if readers != 1 {
		return nil, nil, nil
	}
	scale, offset, err := ml.ScalerAffine(s, nfeat)
	if err != nil {
		return nil, nil, nil
	}
	return n, scale, offset
}

// Method returns the attribution method: TreeSHAP, Linear or KernelSHAP.
func (e *Explainer) Method() string { return e.method }

// Features returns the feature names.
func (e *Explainer) Features() []string { return e.features }

// Input returns the name of the explained input.
func (e *Explainer) Input() string { return e.input }

// A Result holds a batch's attributions: for each row, the target whose
// score is explained and the NumFeatures+1 contributions to it (one a
// feature, then the bias: the expected score).
type Result struct {
	NumFeatures   int
	Targets       []int
	Contributions []float64
}

// Row returns row i's contributions, the bias last.
func (r *Result) Row(i int) []float64 {
	w := r.NumFeatures + 1
	return r.Contributions[i*w : (i+1)*w]
}

// Explain computes the attributions of rows rows of x (row-major).
func (e *Explainer) Explain(ctx context.Context, x []float32, rows int) (*Result, error) {
	if rows < 0 || len(x) != rows*e.nfeat {
		return nil, fmt.Errorf("explain: %d values for %d rows of %d features", len(x), rows, e.nfeat)
	}
	var targets []int
	var contrib []float64
	var err error
	if e.method == KernelSHAP {
		targets, contrib, err = e.kernelSHAP(ctx, x, rows)
	} else {
		targets, contrib, err = e.exact(x, rows)
	}
	if err != nil {
		return nil, err
	}
	return &Result{NumFeatures: e.nfeat, Targets: targets, Contributions: contrib}, nil
}

// exact computes TreeSHAP or linear contributions, row by row.
func (e *Explainer) exact(x []float32, rows int) ([]int, []float64, error) {
	f := e.nfeat
	w := f + 1
	var nt int
	if e.ens != nil {
		nt = e.ens.NumTargets()
	} else {
		nt = linearTargets(e.linear, f)
	}
	if nt < 1 || nt > 1<<12 {
		return nil, nil, fmt.Errorf("explain: model has %d targets", nt)
	}
	all := make([]float64, nt*w)
	targets := make([]int, rows)
	contrib := make([]float64, rows*w)
	for i := range rows {
		row := x[i*f : (i+1)*f]
		clear(all)
		var err error
		if e.ens != nil {
			err = e.ens.SHAP(row, f, all)
		} else {
			err = e.linearRow(row, all)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("explain: row %d: %w", i, err)
		}
		t := 0
		if nt > 1 { // the row's decided class: its largest margin
			best := math.Inf(-1)
			for k := range nt {
				if m := sum(all[k*w : (k+1)*w]); m > best {
					best, t = m, k
				}
			}
		}
		targets[i] = t
		copy(contrib[i*w:(i+1)*w], all[t*w:(t+1)*w])
	}
	return targets, contrib, nil
}

// linearRow computes a linear model's contributions. With a Scaler in
// front, y = (x - offset)·scale (in float32, as the kernel computes it) and
// feature j's contribution coef·y[j] = coef·scale[j]·(x[j] - offset[j]) is
// raw feature j's part relative to the Scaler's offset (the training mean
// of a StandardScaler): exact linear SHAP with that baseline, in terms of
// the raw inputs the request sent. The bias is the intercept.
func (e *Explainer) linearRow(x []float32, out []float64) error {
	if e.scale == nil {
		return ml.LinearContributions(e.linear, x, out)
	}
	y := make([]float32, e.nfeat)
	for j := range y {
		y[j] = (x[j] - e.offset[j]) * e.scale[j]
	}
	return ml.LinearContributions(e.linear, y, out)
}

// linearTargets is the number of coefficient rows (LinearContributions
// writes one vector each).
func linearTargets(n *ir.Node, nfeat int) int {
	c := len(n.Floats("coefficients", nil))
	if c == 0 || c%nfeat != 0 {
		return 0
	}
	return c / nfeat
}

func sum(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

// Summary describes how the result was computed, as the audit record keeps
// it, with the digest of every row's full contribution vector.
func (e *Explainer) Summary(r *Result) (*audit.Explanation, error) {
	d, err := audit.ContributionsDigest(r.NumFeatures, r.Targets, r.Contributions)
	if err != nil {
		return nil, err
	}
	return &audit.Explanation{Method: e.method, Estimate: e.method == KernelSHAP, Covers: e.covers,
		Background: e.bgDigest, Score: e.score, Features: e.nfeat, Digest: d}, nil
}

// Reasons returns row i's principal reasons: the Top features of largest
// absolute contribution (ties: the lower column first), each with the
// value x gave it. Non-finite contributions are not reasons.
func (e *Explainer) Reasons(r *Result, x []float32, i int) []audit.Reason {
	c := r.Row(i)[:r.NumFeatures]
	idx := make([]int, 0, len(c))
	for j, v := range c {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			idx = append(idx, j)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		av, bv := math.Abs(c[a]), math.Abs(c[b])
		switch {
		case av > bv:
			return -1
		case av < bv:
			return 1
		}
		return a - b
	})
	out := make([]audit.Reason, 0, e.top)
	for _, j := range idx[:min(e.top, len(idx))] {
		name := e.features[j]
		if len(name) > audit.MaxFeatureName {
			name = name[:audit.MaxFeatureName]
		}
		out = append(out, audit.Reason{Feature: name, Value: float64(x[i*e.nfeat+j]), Contribution: c[j]})
	}
	return out
}

// BackgroundDigest is the digest of a background set:
// SHA-256("vouch-background-v1\n" | u32 nfeat | u64 rows | the float32s
// little-endian), written "sha256:" + hex.
func BackgroundDigest(bg []float32, nfeat int) string {
	h := sha256.New()
	h.Write([]byte("vouch-background-v1\n"))
	b := binary.LittleEndian.AppendUint32(nil, uint32(nfeat))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(bg)/max(nfeat, 1)))
	for _, v := range bg {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	h.Write(b)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
