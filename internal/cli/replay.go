package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/capture"
	"github.com/vouchml/vouch/audit/index"
	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/explain"
	"github.com/vouchml/vouch/registry"
	"github.com/vouchml/vouch/replay"
)

// ReplayOptions are the settings of `vouch replay`.
type ReplayOptions struct {
	Trace       string
	Audit       auditFlags // where the record is: the data directory or a server
	DataDir     string
	Keys        string   // trusted bundle keys
	LogKeys     []string // trusted audit-log verifier keys (default: DIR/audit/log.pub)
	Inputs      []string // NAME=FILE: the request's input, when not captured
	Outputs     []string // NAME=FILE: the served output (a fast-mode trace --against the exact plan)
	Plan        string   // a plan or bundle to use instead of the registry's
	Against     string   // a second engine to compare with
	Since       time.Time
	Until       time.Time
	Model       string
	Criteria    replay.Criteria
	ReportDir   string
	SignKey     string
	Principal   string
	Labels      string // class labels file, when the server was given them (serve --labels)
	LabelOutput string
	Device      string        // --device (device.go)
	CPU         cpuFlags      // --isa, --threads (isa.go)
	inputSource replay.Inputs // tests and the demo: captured inputs
}

func runReplay(ctx context.Context, m *Main, args []string) error {
	o := ReplayOptions{Criteria: replay.DefaultCriteria()}
	fs := m.newFlagSet("replay", "replay TRACE [--input NAME=FILE] [--report DIR] | replay --against BUNDLE (TRACE | --since T --until T)", `
Proves, months later, what a served decision was. For trace id TRACE it
finds the audit record, checks its inclusion proof against a signed
checkpoint, gets the input (the encrypted capture, or --input, whose
canonical digest must equal the record's), loads the exact signed bundle the
record names from the registry (verifying signature and digests), runs it
and compares the output digest: VERIFIED (bit for bit) or MISMATCH. It
then recomputes every row's decision and the principal reasons for it with
the bundle's feature names, background and labels — the code the server
ran — and compares them with the record, bit for bit: a reason, label or
contribution that differs is a MISMATCH naming it. A server given its
labels by serve --labels needs the same file here (--labels).

--isa portable (or avx2) re-runs on the portable Go kernels (or AVX2 ones)
instead of the fastest this CPU has: a decision served with AVX-512 kernels
gives the same bits, as it would on a machine without them. The report
names the instruction set that ran.

--report DIR writes report.json, report.html (for a compliance officer) and,
with --sign KEY, report.dsse.json (the JSON in a DSSE envelope signed by you).

--against BUNDLE runs recorded inputs through another engine (a rebuilt or
quantized one) and reports error statistics per output (max, mean, median,
p99 of absolute and relative error, KL divergence, top-1 agreement) with
pass/fail under --atol, --rtol and --check elemwise|max|mean|quantile; over
a time range with --since and --until (RFC 3339 or a duration like 24h).

A trace served by a fast-mode GPU plan (vouch build --device cuda
--precision fp16|bf16|int8|best) has bits pinned to the plan and its GPU
architecture: it replays VERIFIED only on a GPU of that architecture
(--device cuda:N). Anywhere else, --against EXACT.vouch (the exact plan of
the same model) runs the input on the exact plan on the CPU and compares
it with the served output (--output NAME=FILE, the response's outputs,
whose digest must be the record's; or, on such a GPU, the fast plan's
output recomputed there): VERIFIED-within-tolerance under --atol, --rtol
and --check, or NOT-within-tolerance; never a claim of equal bits.`)
	o.Audit.register(fs)
	fs.StringVar(&o.Keys, "key", "", "trusted public key(s) of bundle signers")
	var logKeys multiFlag
	fs.Var(&logKeys, "log-key", "trusted audit-log verifier key (default: DIR/audit/log.pub); repeatable")
	var inputs multiFlag
	fs.Var(&inputs, "input", "the request's input as NAME=FILE (.pb or .npy) when it was not captured; repeat")
	var outputs multiFlag
	fs.Var(&outputs, "output", "with --against, for a fast-mode trace: the served output as NAME=FILE (.pb or .npy; its digest must be the record's); repeat")
	fs.StringVar(&o.Plan, "plan", "", "replay with this plan or bundle instead of the registry's (its digest must be the record's)")
	fs.StringVar(&o.Against, "against", "", "compare with this engine (bundle or plan) instead of proving the record")
	since := fs.String("since", "", "with --against: first record time (RFC 3339, or a duration ago like 24h)")
	until := fs.String("until", "", "with --against: last record time (RFC 3339, or a duration ago)")
	fs.StringVar(&o.Model, "model", "", "with --against and a time range: only this model's records")
	fs.Float64Var(&o.Criteria.ATol, "atol", o.Criteria.ATol, "absolute tolerance")
	fs.Float64Var(&o.Criteria.RTol, "rtol", o.Criteria.RTol, "relative tolerance (elemwise check)")
	fs.StringVar(&o.Criteria.Check, "check", o.Criteria.Check, "elemwise, max, mean or quantile")
	fs.Float64Var(&o.Criteria.Quantile, "quantile", o.Criteria.Quantile, "the quantile of --check quantile")
	fs.StringVar(&o.ReportDir, "report", "", "write report.json and report.html (and report.dsse.json with --sign) to DIR")
	fs.StringVar(&o.SignKey, "sign", "", "sign the JSON report with this private key (vouch keygen)")
	fs.StringVar(&o.Principal, "principal", defaultPrincipal(), "who is replaying, for the access trails")
	deviceFlag(fs, &o.Device)
	o.CPU.register(fs)
	fs.StringVar(&o.Labels, "labels", "", "class labels, one a line (when the server was given them with serve --labels; else the bundle's)")
	fs.StringVar(&o.LabelOutput, "label-output", "", "the output --labels name")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	o.LogKeys, o.Inputs, o.Outputs, o.DataDir = logKeys, inputs, outputs, o.Audit.DataDir
	if len(o.Outputs) > 0 && o.Against == "" {
		return fmt.Errorf("%w: --output gives a fast-mode trace's served output to compare with the exact plan: give --against EXACT.vouch too", ErrUsage)
	}
	if o.Since, err = parseWhen(*since); err != nil {
		return err
	}
	if o.Until, err = parseWhen(*until); err != nil {
		return err
	}
	switch {
	case len(pos) == 1:
		o.Trace = pos[0]
	case len(pos) == 0 && o.Against != "" && !o.Since.IsZero():
	default:
		return fmt.Errorf("%w: want one TRACE (or --against with --since)", ErrUsage)
	}
	return m.replay(ctx, o)
}

// parseWhen reads an RFC 3339 time or a duration ago ("" is zero).
func parseWhen(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %q is neither an RFC 3339 time nor a duration", ErrUsage, s)
	}
	return t, nil
}

// connRecords finds records through an audit connection: the local log
// when there is one, else the server's audit API.
type connRecords struct{ c *auditConn }

func (r connRecords) Show(ctx context.Context, trace string) (*audit.Inclusion, error) {
	if !r.c.remote() {
		return r.c.showLocal(ctx, trace)
	}
	var inc audit.Inclusion
	if err := r.c.do(ctx, "GET", "/v1/audit/records/"+url.PathEscape(trace), nil, &inc); err != nil {
		return nil, err
	}
	return &inc, nil
}

func (m *Main) replay(ctx context.Context, o ReplayOptions) error {
	logKeys := o.LogKeys
	if len(logKeys) == 0 {
		pub := filepath.Join(auditDir(o.Audit.DataDir), "log.pub")
		k, err := verifierKeys(pub)
		if err != nil {
			return fmt.Errorf("no audit-log verifier key: give --log-key (reading %s: %w)", pub, err)
		}
		fmt.Fprintf(m.Stderr, "note: trusting %s (give --log-key to verify against a key you hold)\n", pub)
		logKeys = k
	}
	conn, err := openAuditConn(ctx, o.Audit)
	if err != nil {
		return err
	}
	defer conn.close()
	target := o.Trace
	if target == "" {
		until := "now"
		if !o.Until.IsZero() {
			until = o.Until.Format(time.RFC3339)
		}
		target = fmt.Sprintf("records %s..%s", o.Since.Format(time.RFC3339), until)
	}
	note, err := conn.recordAccess(ctx, "replay", target)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintln(m.Stderr, note)
	}
	if o.inputSource == nil {
		dir := filepath.Join(o.DataDir, "capture")
		if _, err := os.Stat(dir); err == nil {
			st, err := capture.Open(dir)
			if err != nil {
				return err
			}
			o.inputSource = st
		}
	}
	var trusted []*bundle.PublicKey
	if o.Keys != "" {
		if trusted, err = readKeys(o.Keys); err != nil {
			return err
		}
	}
	ro := replay.Options{Records: connRecords{conn}, LogKeys: logKeys, Inputs: o.inputSource, LabelOutput: o.LabelOutput, Device: o.Device}
	if ro.CPU, err = o.CPU.cpu(); err != nil {
		return err
	}
	if o.Labels != "" {
		b, err := os.ReadFile(o.Labels)
		if err != nil {
			return err
		}
		if ro.Labels, err = explain.ParseLabels(b); err != nil {
			return fmt.Errorf("--labels %s: %w", o.Labels, err)
		}
	}
	if len(o.Inputs) > 0 {
		in, err := readInputFiles(o.Inputs)
		if err != nil {
			return err
		}
		ro.Input = in
	}
	if len(o.Outputs) > 0 {
		out, err := readInputFiles(o.Outputs)
		if err != nil {
			return err
		}
		ro.Output = out
	}
	switch {
	case o.Plan != "":
		eng, err := replay.LoadEngine(o.Plan, trusted, checkOptions(false))
		if err != nil {
			return err
		}
		ro.Plans = replay.FixedPlan{Engine: eng}
	default:
		if len(trusted) == 0 {
			return fmt.Errorf("%w: give --key (the bundle signers you trust) to load the record's bundle from the registry, or --plan", ErrUsage)
		}
		reg, err := registry.Open(registry.Options{Dir: filepath.Join(o.DataDir, "registry"), TrustedKeys: trusted})
		if err != nil {
			return err
		}
		defer reg.Close()
		ro.Plans = &replay.RegistryPlans{Registry: reg, Principal: o.Principal, Check: checkOptions(false)}
	}
	if o.Against != "" {
		return m.replayAgainst(ctx, o, ro, conn, trusted)
	}
	r, err := replay.Replay(ctx, o.Trace, ro)
	if err != nil {
		return err
	}
	r.Replayer = o.Principal + " with vouch " + Version
	r.Summary(m.Stdout)
	if o.ReportDir != "" {
		if err := writeReports(o, r, nil); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "  report     %s\n", o.ReportDir)
	}
	if r.Verdict != replay.Verified {
		return fmt.Errorf("trace %s: %s: the replayed output differs from the one served", o.Trace, r.Verdict)
	}
	return nil
}

func writeReports(o ReplayOptions, r *replay.Report, stats *replay.Comparison) error {
	if err := os.MkdirAll(o.ReportDir, 0o755); err != nil {
		return err
	}
	j, err := r.JSON()
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(o.ReportDir, "report.json"), j, 0o644); err != nil {
		return err
	}
	f, err := os.CreateTemp(o.ReportDir, ".report-*.html")
	if err != nil {
		return err
	}
	if err := r.HTML(f, stats); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	f.Close()
	if err := os.Rename(f.Name(), filepath.Join(o.ReportDir, "report.html")); err != nil {
		return err
	}
	if o.SignKey != "" {
		k, err := bundle.ReadPrivateKey(o.SignKey)
		if err != nil {
			return err
		}
		env, err := r.Sign(k)
		if err != nil {
			return err
		}
		return writeFileAtomic(filepath.Join(o.ReportDir, "report.dsse.json"), env, 0o644)
	}
	return nil
}

func (m *Main) replayAgainst(ctx context.Context, o ReplayOptions, ro replay.Options, conn *auditConn, trusted []*bundle.PublicKey) error {
	other, err := replay.LoadEngine(o.Against, trusted, checkOptions(false))
	if err != nil {
		return err
	}
	traces := []string{o.Trace}
	if o.Trace == "" {
		traces = nil
		f := index.Filter{Model: o.Model, Since: o.Since, Until: o.Until, Status: audit.StatusOK, Kind: audit.KindInference}
		if conn.remote() {
			return fmt.Errorf("%w: --since/--until need the local log (--data)", ErrUsage)
		}
		if err := conn.log.Query(ctx, f, func(r index.Row) error { traces = append(traces, r.TraceID); return nil }); err != nil {
			return err
		}
		if len(traces) == 0 {
			return fmt.Errorf("no successful records between %s and %s", o.Since.Format(time.RFC3339), o.Until.Format(time.RFC3339))
		}
	}
	bar := progressbar.NewOptions(len(traces), progressbar.OptionSetWriter(m.Stderr), progressbar.OptionSetDescription("replaying"),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionSetVisibility(isTerminal(m.Stderr)))
	pass, skipped := 0, 0
	var failed []string
	agg := map[string]*replay.Stats{}
	for _, tr := range traces {
		c, err := replay.Against(ctx, tr, other, o.Criteria, ro)
		bar.Add(1)
		if err != nil && o.Trace != "" {
			return err // one trace asked for: its error is the answer
		}
		if err != nil {
			skipped++
			fmt.Fprintf(m.Stderr, "skipped %s: %v\n", tr, err)
			continue
		}
		if c.Pass {
			pass++
		} else {
			failed = append(failed, tr)
		}
		if c.Verdict != "" {
			printFastComparison(m, c, o.Criteria)
		}
		for _, s := range c.Outputs {
			a := agg[s.Name]
			if a == nil {
				a = &replay.Stats{Name: s.Name, Top1: 0}
				agg[s.Name] = a
			}
			a.AbsMax = max(a.AbsMax, s.AbsMax)
			a.RelMax = max(a.RelMax, s.RelMax)
			a.AbsMean += s.AbsMean
			a.KL += s.KL
			a.Top1 += s.Top1
		}
	}
	bar.Finish()
	n := len(traces) - skipped
	fmt.Fprintf(m.Stdout, "against %s: %d records, %d pass, %d fail, %d skipped (check %s, atol %g, rtol %g)\n",
		other.Source, len(traces), pass, len(failed), skipped, o.Criteria.Check, o.Criteria.ATol, o.Criteria.RTol)
	for name, a := range agg {
		if n > 0 {
			fmt.Fprintf(m.Stdout, "  %s: max abs %.3g, mean abs %.3g, max rel %.3g, mean KL %.3g, top-1 agreement %.2f%%\n",
				name, a.AbsMax, a.AbsMean/float64(n), a.RelMax, a.KL/float64(n), 100*a.Top1/float64(n))
		}
	}
	for i, tr := range failed {
		if i == 10 {
			fmt.Fprintf(m.Stdout, "  … and %d more (replay one with: vouch replay TRACE --against %s)\n", len(failed)-10, o.Against)
			break
		}
		fmt.Fprintf(m.Stdout, "  FAIL %s\n", tr)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d records fail the check", len(failed), n)
	}
	return nil
}

// printFastComparison says what a fast-mode trace's comparison with the
// exact plan found: within the tolerance or not, never equal bits.
func printFastComparison(m *Main, c *replay.Comparison, crit replay.Criteria) {
	fmt.Fprintf(m.Stdout, "%s  trace %s: served by a fast-mode plan (%s, bits pinned to %s GPUs), compared with the exact plan under check %s, atol %g, rtol %g\n",
		c.Verdict, c.TraceID, c.Precision, c.Pinned, crit.Check, crit.ATol, crit.RTol)
	fmt.Fprintf(m.Stdout, "  served     %s\n  exact      %s\n", c.Served, c.Reference)
	for _, s := range c.Outputs {
		fmt.Fprintf(m.Stdout, "  %s: max abs %.3g, mean abs %.3g, max rel %.3g, mean rel %.3g, KL %.3g, top-1 agreement %.2f%%\n",
			s.Name, s.AbsMax, s.AbsMean, s.RelMax, s.RelMean, s.KL, 100*s.Top1)
	}
	fmt.Fprintln(m.Stdout, "  (a fast plan's bits are its own: this compares values within a tolerance, it does not claim the exact plan's bits)")
}
