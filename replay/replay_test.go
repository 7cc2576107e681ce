package replay

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/explain"
	"github.com/vouchml/vouch/internal/demo/credit"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/registry"
	"github.com/vouchml/vouch/tensor"
)

// fixture is a registry holding a signed credit-model bundle, an audit log,
// and helpers to log served requests.
type fixture struct {
	ctx     context.Context
	reg     *registry.Registry
	log     *audit.Log
	logKeys []string
	bkey    *bundle.PrivateKey
	plans   *RegistryPlans
	engine  *Engine
	dir     string
}

func buildCredit(t *testing.T, perturb bool) []byte {
	src := credit.Model()
	m, err := onnx.Decode(src, "")
	if err != nil {
		t.Fatal(err)
	}
	if perturb { // a different engine: one weight changed
		w := m.Graph.Initializers["w1"].Data.([]float32)
		w[0] += 0.25
	}
	opts := compile.DefaultOptions()
	opts.Tactics = "heuristic"
	res, err := compile.Build(m, src, "credit-risk", "test", opts, builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	return res.Plan
}

func newFixture(t *testing.T) *fixture {
	ctx := context.Background()
	dir := t.TempDir()
	skey, priv, err := bundle.GenerateKey(nil, "ci")
	if err != nil {
		t.Fatal(err)
	}
	_ = skey
	planBytes := buildCredit(t, false)
	b, err := bundle.New(bundle.Metadata{
		Model:       bundle.Model{Name: "credit-risk", Version: "1.0.0"},
		Source:      bundle.Artifact{Name: "credit.onnx", Digest: "sha256:" + plan.Digest(credit.Model())},
		Plan:        bundle.PlanInfo{FormatVersion: "1"},
		Options:     []byte(`{"precision":"fp32"}`),
		Environment: bundle.HostEnvironment("test"),
		StartedOn:   time.Unix(0, 0).UTC(), FinishedOn: time.Unix(1, 0).UTC(),
	}, bundle.Contents{Plan: planBytes, Explain: creditExplainData(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := bundle.Sign(b, priv); err != nil {
		t.Fatal(err)
	}
	bpath := filepath.Join(dir, "credit.vouch")
	if err := b.WriteFile(bpath); err != nil {
		t.Fatal(err)
	}
	trusted := []*bundle.PublicKey{priv.Public()}
	reg, err := registry.Open(registry.Options{Dir: filepath.Join(dir, "registry"), TrustedKeys: trusted})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if _, err := reg.PushFile(ctx, bpath, registry.PushOptions{Principal: "ci"}); err != nil {
		t.Fatal(err)
	}
	lsk, lvk, err := audit.GenerateKey("test.local/audit")
	if err != nil {
		t.Fatal(err)
	}
	lg, err := audit.Open(ctx, filepath.Join(dir, "audit"), audit.Options{SignerKey: lsk, BatchMaxAge: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close(ctx) })
	check := bundle.CheckOptions{PlanFormats: []string{"1"}, AllowTwinFallback: true, AnyVouchVersion: true}
	eng, err := LoadEngine(bpath, trusted, check)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{ctx: ctx, reg: reg, log: lg, logKeys: []string{lvk}, bkey: priv, dir: dir,
		plans: &RegistryPlans{Registry: reg, Principal: "auditor", Check: check}, engine: eng}
}

// serve runs input through served (the engine that answers) and logs a
// record claiming the fixture's engine, as a server would.
func (f *fixture) serve(t *testing.T, trace string, served *plan.Plan, in map[string]*tensor.Tensor) {
	outs, err := run(served, in)
	if err != nil {
		t.Fatal(err)
	}
	conf := 0.875
	ind, ins, _ := audit.InputDigest(in)
	outd, outsd, _ := audit.InputDigest(outs)
	rec := &audit.Record{TraceID: trace, RequestID: "req-" + trace, Time: time.Now(), Principal: "bank-app",
		Model: "credit-risk", ModelVersion: "1.0.0", BundleDigest: f.engine.BundleDigest, PlanDigest: f.engine.PlanDigest,
		InputDigest: ind, Inputs: ins, OutputDigest: outd, Outputs: outsd, Status: audit.StatusOK, Code: 200,
		OutputLabel: "approve", Confidence: &conf}
	if _, _, err := f.log.Append(f.ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := f.log.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
}

// creditExplainData is the bundle's explain.json for the demo model:
// its feature names and 32 background applicants (KernelSHAP).
func creditExplainData(t *testing.T) []byte {
	bg, _ := credit.Applicants(3, 32)
	b, err := (&explain.Data{Features: credit.Features, Background: bg}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serveExplained runs in through the fixture's engine and logs the
// record a server writes, decisions and reasons included, computed as the
// server computes them; tamper, when set, alters them first.
func (f *fixture) serveExplained(t *testing.T, trace string, in map[string]*tensor.Tensor, tamper func(*explain.Outcome)) *audit.Record {
	p := f.engine.Plan
	outs, err := run(p, in)
	if err != nil {
		t.Fatal(err)
	}
	labels, output, err := explain.Labels(p.Graph, p.Header.Source.Meta, f.engine.Explain, nil, "")
	if err != nil || len(labels) != 2 {
		t.Fatalf("labels %v %v", labels, err)
	}
	xp, err := explain.ForModel(explain.Model{Graph: p.Graph, Meta: p.Header.Source.Meta, Data: f.engine.Explain, Output: output,
		MaxBatch: explain.MaxBatch(p), Run: func(_ context.Context, in map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
			return run(p, in)
		}})
	if err != nil || xp == nil {
		t.Fatalf("explainer %v %v", xp, err)
	}
	o, err := xp.Decide(f.ctx, in, outs, output, labels)
	if err != nil {
		t.Fatal(err)
	}
	if tamper != nil {
		tamper(o)
	}
	ind, ins, _ := audit.InputDigest(in)
	outd, outsd, _ := audit.InputDigest(outs)
	rec := &audit.Record{TraceID: trace, RequestID: "req-" + trace, Time: time.Now(), Principal: "bank-app",
		Model: "credit-risk", ModelVersion: "1.0.0", BundleDigest: f.engine.BundleDigest, PlanDigest: f.engine.PlanDigest,
		InputDigest: ind, Inputs: ins, OutputDigest: outd, Outputs: outsd, Status: audit.StatusOK, Code: 200}
	o.Record(rec)
	if _, _, err := f.log.Append(f.ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := f.log.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestReplayReasons: replay recomputes every row's decision and reasons
// and compares them bit for bit: VERIFIED when they are what the server
// computed, MISMATCH naming the difference when a recorded reason, label
// or contribution digest was altered (issue 15).
func TestReplayReasons(t *testing.T) {
	f := newFixture(t)
	x, _ := credit.Applicants(99, 3)
	in := map[string]*tensor.Tensor{"features": tensor.From(x, 3, 8)}
	d, _, _ := audit.InputDigest(in)
	opts := Options{Records: f.log, LogKeys: f.logKeys, Plans: f.plans, Inputs: memInputs{d: in}}
	rec := f.serveExplained(t, "explained", in, nil)
	if rec.Explanation == nil || rec.Explanation.Method != explain.KernelSHAP || len(rec.Decisions) != 3 || len(rec.Decisions[0].Reasons) == 0 {
		t.Fatalf("served record %+v", rec)
	}
	r, err := Replay(f.ctx, "explained", opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Verified || r.Decisions == nil || !r.Decisions.Equal || r.Decisions.Rows != 3 || r.Decisions.Listed != 3 ||
		r.Decisions.LabelsFrom != "model metadata" || r.Decisions.ReplayedExplanation != rec.Explanation.Digest {
		t.Fatalf("verdict %s, decisions %+v", r.Verdict, r.Decisions)
	}
	var sum, page bytes.Buffer
	r.Summary(&sum)
	if err := r.HTML(&page, nil); err != nil {
		t.Fatal(err)
	}
	first := rec.Decisions[0].Reasons[0]
	if !strings.Contains(sum.String(), "recomputed, the same bit for bit") || !strings.Contains(sum.String(), "1. "+ReasonText(first)) {
		t.Fatalf("summary:\n%s", sum.String())
	}
	if !strings.Contains(page.String(), "Principal reasons for this decision") || !strings.Contains(page.String(), first.Feature) ||
		strings.Contains(page.String(), "differs</span>") || strings.Contains(page.String(), "%!") {
		t.Fatalf("page lacks the reasons section")
	}
	for name, tc := range map[string]struct {
		tamper func(*explain.Outcome)
		want   string
	}{
		"contribution": {func(o *explain.Outcome) { o.Decisions[1].Reasons[0].Contribution += 1e-9 }, "row 1 reason 1"},
		"feature":      {func(o *explain.Outcome) { o.Decisions[0].Reasons[1].Feature = "zip_code" }, "row 0 reason 2"},
		"label":        {func(o *explain.Outcome) { o.Decisions[2].Label = "approve"; o.Decisions[2].Confidence = new(float64) }, "decisions digest"},
		"digest":       {func(o *explain.Outcome) { o.Explanation.Digest = "sha256:" + strings.Repeat("0", 64) }, "contributions digest"},
	} {
		t.Run(name, func(t *testing.T) {
			f.serveExplained(t, "tampered-"+name, in, tc.tamper)
			r, err := Replay(f.ctx, "tampered-"+name, opts)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != Mismatch || r.Decisions.Equal || !r.Outputs[0].Equal || !strings.Contains(strings.Join(r.Decisions.Differences, "\n"), tc.want) {
				t.Fatalf("verdict %s, outputs equal %v, differences %q", r.Verdict, r.Outputs[0].Equal, r.Decisions.Differences)
			}
			var page bytes.Buffer
			if err := r.HTML(&page, nil); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(page.String(), "different</b> results") {
				t.Fatal("the page does not say the reasons differ")
			}
		})
	}
}

func applicant(seed uint64) map[string]*tensor.Tensor {
	x, _ := credit.Applicants(seed, 1)
	return map[string]*tensor.Tensor{"features": tensor.From(x, 1, 8)}
}

type memInputs map[string]map[string]*tensor.Tensor

func (m memInputs) Get(d string) (map[string]*tensor.Tensor, error) {
	in, ok := m[d]
	if !ok {
		return nil, errors.New("not captured")
	}
	return in, nil
}

func TestReplay(t *testing.T) {
	f := newFixture(t)
	in := applicant(42)
	f.serve(t, "trace-ok", f.engine.Plan, in)
	swapped, err := plan.Decode(buildCredit(t, true))
	if err != nil {
		t.Fatal(err)
	}
	f.serve(t, "trace-swapped", swapped, in) // served by another engine than it claims
	d, _, _ := audit.InputDigest(in)
	opts := Options{Records: f.log, LogKeys: f.logKeys, Plans: f.plans, Inputs: memInputs{d: in}}

	t.Run("verified", func(t *testing.T) {
		r, err := Replay(f.ctx, "trace-ok", opts)
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict != Verified || !r.Outputs[0].Equal || r.Engine.BundleDigest == "" || len(r.Engine.SignedBy) != 1 {
			t.Fatalf("report %+v", r)
		}
		var sum, page bytes.Buffer
		r.Summary(&sum)
		if err := r.HTML(&page, nil); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(sum.String(), "VERIFIED  trace trace-ok") || !strings.Contains(page.String(), "bit-for-bit identical") || strings.Contains(page.String(), "%!") || !strings.Contains(page.String(), "approve</b> (confidence 0.875)") || !strings.Contains(page.String(), "trusted_log_keys") {
			t.Fatalf("summary %q", sum.String())
		}
		env, err := r.Sign(f.bkey)
		if err != nil {
			t.Fatal(err)
		}
		typ, payload, by, err := bundle.VerifyEnvelope(env, []*bundle.PublicKey{f.bkey.Public()})
		if err != nil || typ != PayloadType || len(by) != 1 || !bytes.Contains(payload, []byte(`"verdict": "VERIFIED"`)) {
			t.Fatalf("signed report: %v %s %v", err, typ, by)
		}
	})
	t.Run("mismatch when the engine that served was swapped", func(t *testing.T) {
		r, err := Replay(f.ctx, "trace-swapped", opts)
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict != Mismatch || r.Outputs[0].Equal {
			t.Fatalf("verdict %s", r.Verdict)
		}
		exact := Criteria{Check: "elemwise"} // atol = rtol = 0: bit for bit
		c, err := Against(f.ctx, "trace-ok", &Engine{Plan: swapped, Source: "swapped"}, exact, opts)
		if err != nil {
			t.Fatal(err)
		}
		if c.Pass || c.Outputs[0].Exact || c.Outputs[0].AbsMax == 0 {
			t.Fatalf("against a different engine: %+v", c)
		}
		c, err = Against(f.ctx, "trace-ok", f.engine, DefaultCriteria(), opts)
		if err != nil || !c.Pass || !c.Outputs[0].Exact || c.Outputs[0].Top1 != 1 {
			t.Fatalf("against the same engine: %+v %v", c, err)
		}
	})
	t.Run("wrong input digest", func(t *testing.T) {
		o := opts
		o.Input = applicant(7)
		_, err := Replay(f.ctx, "trace-ok", o)
		if !errors.Is(err, ErrInputDigest) || !strings.Contains(err.Error(), "the record's input digest is sha256:") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("record missing", func(t *testing.T) {
		_, err := Replay(f.ctx, "no-such-trace", opts)
		if !errors.Is(err, ErrRecord) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("untrusted log key", func(t *testing.T) {
		_, other, _ := audit.GenerateKey("test.local/audit")
		o := opts
		o.LogKeys = []string{other}
		if _, err := Replay(f.ctx, "trace-ok", o); !errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), "inclusion proof") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("input not captured", func(t *testing.T) {
		o := opts
		o.Inputs = memInputs{}
		if _, err := Replay(f.ctx, "trace-ok", o); !errors.Is(err, ErrNoInput) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("tampered log", func(t *testing.T) {
		// Rewrite the stored entry of the record: the inclusion proof no
		// longer holds against the signed checkpoint.
		if err := f.log.Close(f.ctx); err != nil {
			t.Fatal(err)
		}
		var bundles []string
		filepath.WalkDir(filepath.Join(f.dir, "audit", "tile", "entries"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				bundles = append(bundles, p)
			}
			return nil
		})
		if len(bundles) == 0 {
			t.Fatal("no entry bundles")
		}
		b, err := os.ReadFile(bundles[0])
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(b, []byte("trace-ok"))
		if i < 0 {
			t.Fatal("record not found in the entry bundle")
		}
		b[i+6] = 'X' // trace-ok -> trace-Xk
		if err := os.WriteFile(bundles[0], b, 0o644); err != nil {
			t.Fatal(err)
		}
		ro, err := audit.Open(f.ctx, filepath.Join(f.dir, "audit"), audit.Options{VerifierKeys: f.logKeys})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close(f.ctx)
		o := opts
		o.Records = ro
		if _, err := Replay(f.ctx, "trace-ok", o); !errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), "inclusion proof") {
			t.Fatalf("replay over a tampered log: %v", err)
		}
	})
}

func TestCompareCriteria(t *testing.T) {
	ref := tensor.From([]float32{0.1, 0.9, 0.7, 0.3}, 2, 2)
	got := tensor.From([]float32{0.1, 0.9, 0.2, 0.8}, 2, 2)
	s, err := Compare("p", ref, got, DefaultCriteria())
	if err != nil {
		t.Fatal(err)
	}
	if s.Pass || s.Top1 != 0.5 || s.AbsMax < 0.49 || s.KL <= 0 {
		t.Fatalf("%+v", s)
	}
	loose := Criteria{ATol: 1, Check: "max"}
	if s, _ := Compare("p", ref, got, loose); !s.Pass {
		t.Fatal("max check with atol 1 must pass")
	}
	if _, err := Compare("p", ref, got, Criteria{Check: "nope"}); err == nil {
		t.Fatal("bad check accepted")
	}
}

// TestSummaryNamesServingDevice: the summary says where the record was
// computed (a GPU-served trace replayed on a CPU shows both).
func TestSummaryNamesServingDevice(t *testing.T) {
	r := &Report{Verdict: Verified, TraceID: "t1", Checkpoint: &audit.Checkpoint{Size: 1}, Record: &audit.Record{Backend: "cuda-exact", Device: "cuda:0 NVIDIA H200 (sm_90)"}}
	r.Engine.RanOn = "cpu (CPU kernels at instruction set avx512)"
	var sum bytes.Buffer
	r.Summary(&sum)
	for _, want := range []string{"served on  cuda-exact on cuda:0 NVIDIA H200 (sm_90)", "ran on     cpu (CPU kernels"} {
		if !strings.Contains(sum.String(), want) {
			t.Fatalf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	if got := servedOn("", "cpu"); got != "cpu" {
		t.Fatalf("servedOn without backend = %q", got)
	}
}
