package explain_test

import (
	"context"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/explain"
	"github.com/vouchml/vouch/internal/demo/credit"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/tensor"
)

const models = "../../shared/models/"

func load(t *testing.T, name string) (*ir.Graph, *tensor.Tensor, *tensor.Tensor) {
	t.Helper()
	m, err := onnx.DecodeFile(models + name + "/model.onnx")
	if err != nil {
		t.Skipf("shared model %s: %v", name, err)
	}
	x, _, err := onnx.DecodeTensorFile(models + name + "/test_data_set_0/input_0.pb")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := exec.New(m.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	outs, err := ex.Run(map[string]*tensor.Tensor{m.Graph.Inputs[0].Name: x})
	if err != nil {
		t.Fatal(err)
	}
	return m.Graph, x, outs["probabilities"]
}

func logistic(m float64) float64 { return 1 / (1 + math.Exp(-m)) }

// checkMargins: each row's contributions sum to a margin whose logistic is
// the model's probability of class 1 (the target of a binary margin).
func checkMargins(t *testing.T, res *explain.Result, prob *tensor.Tensor) {
	t.Helper()
	p := prob.Data.([]float32)
	for i := range res.Targets {
		s := 0.0
		for _, v := range res.Row(i) {
			s += v
		}
		if got, want := logistic(s), float64(p[2*i+1]); math.Abs(got-want) > 1e-5 {
			t.Fatalf("row %d: logistic(sum of contributions) = %v, model says %v", i, got, want)
		}
	}
}

// rowAlone explains every row alone and requires the bits of the batch.
func rowAlone(t *testing.T, e *explain.Explainer, x []float32, nfeat int, batch *explain.Result, rows int) {
	t.Helper()
	for _, i := range []int{0, 1, rows / 2, rows - 1} {
		one, err := e.Explain(context.Background(), x[i*nfeat:(i+1)*nfeat], 1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(bits(one.Row(0)), bits(batch.Row(i))) || one.Targets[0] != batch.Targets[i] {
			t.Fatalf("row %d alone differs from row %d in a batch of %d", i, i, rows)
		}
	}
}

func bits(v []float64) []uint64 {
	out := make([]uint64, len(v))
	for i, f := range v {
		out[i] = math.Float64bits(f)
	}
	return out
}

func TestTreeSHAPCreditXGB(t *testing.T) {
	g, x, prob := load(t, "credit_xgb")
	xs := x.Data.([]float32)
	rows, nfeat := x.Shape[0], x.Shape[1]
	feats := []string{"income", "debt_ratio", "age", "late_payments", "credit_utilization", "years_employed", "recent_inquiries", "loan_amount"}
	e, err := explain.New(g, explain.Options{Features: feats, Background: xs})
	if err != nil {
		t.Fatal(err)
	}
	if e.Method() != explain.TreeSHAP {
		t.Fatalf("method %s", e.Method())
	}
	res, err := e.Explain(context.Background(), xs, rows)
	if err != nil {
		t.Fatal(err)
	}
	checkMargins(t, res, prob)
	rowAlone(t, e, xs, nfeat, res, rows)
	sum, err := e.Summary(res)
	if err != nil || sum.Covers != "background" || sum.Estimate || sum.Background == "" || sum.Score != "margin" {
		t.Fatalf("summary %+v %v", sum, err)
	}
	r := e.Reasons(res, xs, 0)
	if len(r) != 5 {
		t.Fatalf("%d reasons", len(r))
	}
	for k := 1; k < len(r); k++ {
		if math.Abs(r[k].Contribution) > math.Abs(r[k-1].Contribution) {
			t.Fatalf("reasons not by size: %+v", r)
		}
	}
	j := slices.Index(feats, r[0].Feature)
	if r[0].Value != float64(xs[j]) || r[0].Contribution != res.Row(0)[j] {
		t.Fatalf("reason %+v does not match feature %d", r[0], j)
	}
}

func TestLinearCancer(t *testing.T) {
	g, x, prob := load(t, "cancer_logreg")
	xs := x.Data.([]float32)
	rows, nfeat := x.Shape[0], x.Shape[1]
	e, err := explain.New(g, explain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Method() != explain.Linear || e.Features()[3] != "f3" {
		t.Fatalf("method %s, features %v", e.Method(), e.Features())
	}
	res, err := e.Explain(context.Background(), xs, rows)
	if err != nil {
		t.Fatal(err)
	}
	checkMargins(t, res, prob)
	rowAlone(t, e, xs, nfeat, res, rows)
}

// The demo's credit MLP has no structure to exploit: KernelSHAP over every
// coalition of its 8 features, against 32 background applicants.
func demoExplainer(t *testing.T, o explain.Options) (*explain.Explainer, *exec.Executor, []float32) {
	t.Helper()
	m, err := onnx.Decode(credit.Model(), "")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := exec.New(m.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, in map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
		return ex.Run(in)
	}
	bg, _ := credit.Applicants(99, 32)
	o.Background, o.Features = bg, credit.Features
	o.Run = explain.RunNamed(run, m.Graph.Inputs[0].Name, m.Graph.Outputs[0].Name, 8, 0)
	o.Output = m.Graph.Outputs[0].Name
	e, err := explain.New(m.Graph, o)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := credit.Applicants(5, 6)
	return e, ex, x
}

func TestKernelSHAPDemo(t *testing.T) {
	e, ex, x := demoExplainer(t, explain.Options{})
	if e.Method() != explain.KernelSHAP {
		t.Fatalf("method %s", e.Method())
	}
	ctx := context.Background()
	res, err := e.Explain(ctx, x, 6)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := ex.Run(map[string]*tensor.Tensor{"features": tensor.From(x, 6, 8)})
	if err != nil {
		for k := range outs {
			t.Log(k)
		}
		t.Fatal(err)
	}
	var p []float32
	for _, v := range outs {
		p = v.Data.([]float32)
	}
	for i := range 6 {
		s := 0.0
		for _, v := range res.Row(i) {
			s += v
		}
		// Efficiency: the contributions and the base sum to the explained score.
		if want := float64(p[2*i+res.Targets[i]]); math.Abs(s-want) > 1e-9 {
			t.Fatalf("row %d: contributions sum to %v, score %v", i, s, want)
		}
	}
	rowAlone(t, e, x, 8, res, 6)
	sum, _ := e.Summary(res)
	if !sum.Estimate || sum.Method != explain.KernelSHAP {
		t.Fatalf("summary %+v", sum)
	}
}

// KernelSHAP's bits do not depend on the thread count, and its sampled
// form (forced here with a seed) on nothing but the seed.
func TestKernelSHAPDeterminism(t *testing.T) {
	ctx := context.Background()
	digest := func(procs int, o explain.Options) string {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		e, _, x := demoExplainer(t, o)
		res, err := e.Explain(ctx, x, 6)
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.Summary(res)
		if err != nil {
			t.Fatal(err)
		}
		return s.Digest
	}
	if a, b := digest(1, explain.Options{}), digest(4, explain.Options{}); a != b {
		t.Fatalf("GOMAXPROCS 1: %s, 4: %s", a, b)
	}
	sampled := explain.Options{Exact: 4, Seed: 7, Samples: 300}
	a, b := digest(1, sampled), digest(4, sampled)
	if a != b {
		t.Fatalf("sampled: GOMAXPROCS 1: %s, 4: %s", a, b)
	}
	if a == digest(1, explain.Options{}) {
		t.Fatal("the sampled estimate equals the exact enumeration bit for bit")
	}
	if c := digest(1, explain.Options{Exact: 4, Seed: 8, Samples: 300}); c == a {
		t.Fatal("another seed gives the same sample")
	}
}
