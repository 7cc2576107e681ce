package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/internal/demo/credit"
	"github.com/vouchml/vouch/npy"
	"github.com/vouchml/vouch/registry"
	"github.com/vouchml/vouch/replay"
	"github.com/vouchml/vouch/tensor"
)

// DemoOptions are the settings of `vouch demo`.
type DemoOptions struct {
	Dir      string // working directory ("" = a new temporary one)
	Requests int
	Clients  int
}

func runDemo(ctx context.Context, m *Main, args []string) error {
	o := DemoOptions{Requests: 300, Clients: 4}
	fs := m.newFlagSet("demo", "demo [--dir DIR] [--requests N]", `
Runs vouch's whole story on embedded defaults, in a fresh directory, in
under a minute:

  1. trains a small credit-risk model on synthetic applicants (vouch's own
     code writes the ONNX file) and builds it into a signed bundle;
  2. pushes the bundle to the registry and tags it prod;
  3. starts the server in process (transparency log, encrypted input
     capture) and sends a few hundred scoring requests;
  4. shows three audit records and a declined applicant's principal
     reasons (recorded with the decision), and replays that decision to
     VERIFIED — output and reasons recomputed bit for bit — writing a
     signed JSON and an HTML verification report;
  5. tampers with a copy of the audit log and shows verification catch it.

Everything it makes stays in the directory it prints.`)
	fs.StringVar(&o.Dir, "dir", "", "where to work (default: a new temporary directory)")
	fs.IntVar(&o.Requests, "requests", o.Requests, "scoring requests to send")
	fs.IntVar(&o.Clients, "clients", o.Clients, "concurrent clients")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	if o.Requests < 1 || o.Clients < 1 {
		return fmt.Errorf("%w: --requests and --clients must be at least 1", ErrUsage)
	}
	return m.demo(ctx, o)
}

func (m *Main) demo(ctx context.Context, o DemoOptions) (err error) {
	start := time.Now()
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "vouch-demo-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	p := func(parts ...string) string { return filepath.Join(append([]string{o.Dir}, parts...)...) }
	data := p("data")
	step := func(n int, what string) { fmt.Fprintf(m.Stdout, "\n[%d/6] %s\n", n, what) }
	quiet := NewMain(io.Discard, io.Discard)

	step(1, "train a credit-risk model and build it into a signed bundle")
	model := p("credit-risk.onnx")
	if err := writeFileAtomic(model, credit.Model(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "      model      %s (MLP 8→16→2, classes %s)\n", model, strings.Join(credit.Labels, "/"))
	if err := os.MkdirAll(p("keys"), 0o755); err != nil {
		return err
	}
	pub, err := bundle.Keygen(bundle.KeygenOptions{Name: "demo-signer", PrivateKeyPath: p("keys", "demo-signer.key"), PublicKeyPath: p("keys", "demo-signer.pub"), Force: true})
	if err != nil {
		return err
	}
	// The bundle keeps what explains each decision: the feature names and
	// a background of 16 applicants from the training distribution, the
	// baseline of KernelSHAP (exact over the 8 features' 256 coalitions).
	if err := writeFileAtomic(p("features.txt"), []byte(strings.Join(credit.Features, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	bg, _ := credit.Applicants(1, 16)
	var bgFile bytes.Buffer
	if err := npy.Encode(&bgFile, tensor.From(bg, 16, len(credit.Features))); err != nil {
		return err
	}
	if err := writeFileAtomic(p("background.npy"), bgFile.Bytes(), 0o644); err != nil {
		return err
	}
	bo := BuildOptions{Model: model, Out: p("credit-risk.plan"), Compile: compile.DefaultOptions(),
		Bundle: p("credit-risk.vouch"), Key: p("keys", "demo-signer.key"), ModelName: "credit-risk", ModelVersion: "1.0.0",
		Features: p("features.txt"), Background: p("background.npy")}
	bo.LogFile, bo.Report = bo.Out+".log.jsonl", bo.Out+".report.json"
	if err := quiet.build(bo); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "      bundle     %s, signed by %s\n", bo.Bundle, pub.ID())

	step(2, "push it to the registry and tag it prod")
	reg, err := registry.Open(registry.Options{Dir: filepath.Join(data, "registry"), TrustedKeys: []*bundle.PublicKey{pub}})
	if err != nil {
		return err
	}
	v, err := reg.PushFile(ctx, bo.Bundle, registry.PushOptions{Principal: "demo-ci"})
	if err == nil {
		_, err = reg.Tag(ctx, "credit-risk@1.0.0", "prod", "demo-ci")
	}
	reg.Close()
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "      registry   credit-risk@1.0.0 (%s…) = credit-risk@prod\n", v.Digest[:19])

	step(3, fmt.Sprintf("serve it and send %d scoring requests", o.Requests))
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	addr := make(chan string, 1)
	served := make(chan error, 1)
	serveLog, err := os.Create(p("serve.log"))
	if err != nil {
		return err
	}
	defer serveLog.Close()
	go func() {
		served <- NewMain(serveLog, serveLog).serve(sctx, ServeOptions{
			Models: []string{"credit-risk@prod"}, Keys: p("keys", "demo-signer.pub"), DataDir: data,
			Listen: "127.0.0.1:0", Audit: "on", AuditDurability: "durable", AuditFailure: "closed", CaptureInputs: true,
			Workers: 2, Queue: 64, MaxBody: 1 << 20, AccessLog: p("access.log"), ShutdownTimeout: 10 * time.Second,
			// The demo's server listens on loopback only and its one user
			// is also the auditor who reads the records back: anonymous
			// callers get the audit role here (never the default).
			Limits: serveLimits{AnonymousRoles: "infer,audit"},
			ready:  func(h, g string) { addr <- h },
		})
	}()
	var url string
	select {
	case a := <-addr:
		url = "http://" + a
	case err := <-served:
		return fmt.Errorf("starting the server: %v (see %s)", err, p("serve.log"))
	}
	stopServer := func() error {
		stop()
		if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}
	fmt.Fprintf(m.Stdout, "      server     %s (audit log %s, inputs captured encrypted)\n", url, filepath.Join(data, "audit"))
	traces, decisions, err := m.demoTraffic(ctx, url, o)
	if err != nil {
		stopServer()
		return err
	}
	fmt.Fprintf(m.Stdout, "      answered   %d requests: %d approve, %d decline; every one has an audit record\n", len(traces), decisions["approve"], decisions["decline"])

	step(4, "show three audit records and a declined applicant's reasons")
	conn, err := openAuditConn(ctx, auditFlags{DataDir: data, URL: url})
	if err != nil {
		stopServer()
		return err
	}
	if note, err := conn.recordAccess(ctx, "show", "3 demo records"); err != nil {
		conn.close()
		stopServer()
		return err
	} else if note != "" {
		fmt.Fprintf(m.Stdout, "      %s\n", note)
	}
	for _, tr := range traces[:3] {
		inc, err := conn.showLocal(ctx, tr)
		if err != nil {
			conn.close()
			stopServer()
			return err
		}
		rec, err := audit.Parse(inc.Record)
		if err != nil {
			conn.close()
			stopServer()
			return err
		}
		conf := ""
		if rec.Confidence != nil {
			conf = fmt.Sprintf(" (%.3f)", *rec.Confidence)
		}
		fmt.Fprintf(m.Stdout, "      #%-4d %s  %s  %s@%s  %s  %s%s  input %s…  leaf %s…\n", inc.Index, rec.Time.Format("15:04:05.000"),
			rec.RequestID, rec.Model, rec.ModelVersion, rec.Principal, rec.OutputLabel, conf, rec.InputDigest[7:19], inc.LeafHash[:12])
	}
	// A declined applicant is owed the principal reasons: the record holds
	// them, computed when the request was served.
	declined := ""
	for _, tr := range traces {
		inc, err := conn.showLocal(ctx, tr)
		if err != nil {
			conn.close()
			stopServer()
			return err
		}
		rec, err := audit.Parse(inc.Record)
		if err != nil || rec.OutputLabel != "decline" || len(rec.Decisions) == 0 || rec.Explanation == nil {
			continue
		}
		declined = tr
		fmt.Fprintf(m.Stdout, "      %s was declined; the principal reasons (%s, recorded with the decision):\n", rec.RequestID, rec.Explanation.Method)
		for k, re := range rec.Decisions[0].Reasons {
			fmt.Fprintf(m.Stdout, "        %d. %s\n", k+1, replay.ReasonText(re))
		}
		break
	}
	conn.close()
	if declined == "" {
		stopServer()
		return fmt.Errorf("no declined applicant has reasons in its record: the demo failed")
	}

	step(5, "replay the declined request months later: prove it, re-run it, recompute its reasons, compare")
	ro := ReplayOptions{Trace: declined, Audit: auditFlags{DataDir: data, URL: url}, DataDir: data,
		Keys: p("keys", "demo-signer.pub"), ReportDir: p("report"), SignKey: p("keys", "demo-signer.key"), Principal: "demo-auditor"}
	var replayOut bytes.Buffer
	rm := NewMain(&replayOut, io.Discard)
	if err := rm.replay(ctx, ro); err != nil {
		stopServer()
		return fmt.Errorf("replay: %w\n%s", err, replayOut.String())
	}
	for _, line := range strings.Split(strings.TrimRight(replayOut.String(), "\n"), "\n") {
		fmt.Fprintf(m.Stdout, "      %s\n", line)
	}
	if err := stopServer(); err != nil {
		return err
	}

	step(6, "tamper with a copy of the log and verify both")
	keys, err := verifierKeys(filepath.Join(auditDir(data), "log.pub"))
	if err != nil {
		return err
	}
	rep, err := audit.Verify(ctx, os.DirFS(auditDir(data)), audit.VerifyOptions{VerifierKeys: keys, CheckRecords: true})
	if err != nil {
		return fmt.Errorf("the demo's own log does not verify: %w\n%s", err, rep)
	}
	fmt.Fprintf(m.Stdout, "      original   verifies: %d entries, root %x…\n", rep.Checkpoint.Size, rep.Root[:8])
	tampered := p("tampered-audit")
	victim, err := copyLog(auditDir(data), tampered)
	if err != nil {
		return err
	}
	rep, err = audit.Verify(ctx, os.DirFS(tampered), audit.VerifyOptions{VerifierKeys: keys, CheckRecords: true})
	if err == nil {
		return fmt.Errorf("a tampered copy of the log verified: the demo failed")
	}
	fmt.Fprintf(m.Stdout, "      tampered   flipped one byte of %s: verification FAILS\n", victim)
	for i, pr := range rep.Problems {
		if i == 3 {
			fmt.Fprintf(m.Stdout, "                 (%d problems in all)\n", len(rep.Problems))
			break
		}
		fmt.Fprintf(m.Stdout, "                 %s\n", pr)
	}

	fmt.Fprintf(m.Stdout, "\ndone in %v. Everything is in %s:\n", time.Since(start).Round(100*time.Millisecond), o.Dir)
	for _, w := range [][2]string{
		{"credit-risk.vouch", "the signed bundle (plan, build log, report, provenance)"},
		{"data/registry", "the registry"},
		{"data/audit", "the transparency log (C2SP tlog-tiles, signed checkpoints)"},
		{"data/capture", "the captured inputs (AES-256-GCM, key per model)"},
		{"report/report.html", "the verification report for a compliance officer"},
		{"report/report.dsse.json", "the same report, signed (DSSE)"},
		{"tampered-audit", "the tampered copy of the log"},
	} {
		fmt.Fprintf(m.Stdout, "  %-26s %s\n", w[0], w[1])
	}
	fmt.Fprintf(m.Stdout, "Try: vouch audit show %s --data %s\n", traces[0], data)
	return nil
}

// demoTraffic sends o.Requests scoring requests from o.Clients clients
// and returns the trace ids (in request order) and the decisions.
func (m *Main) demoTraffic(ctx context.Context, url string, o DemoOptions) ([]string, map[string]int, error) {
	x, _ := credit.Applicants(2026, o.Requests)
	traces := make([]string, o.Requests)
	labels := make([]string, o.Requests)
	bar := progressbar.NewOptions(o.Requests, progressbar.OptionSetWriter(m.Stderr), progressbar.OptionSetDescription("      scoring"),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionSetVisibility(isTerminal(m.Stderr)))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	work := make(chan int)
	client := &http.Client{Timeout: 30 * time.Second}
	for c := 0; c < o.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				tr, label, err := scoreOne(ctx, client, url, i, x[i*8:(i+1)*8])
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				traces[i], labels[i] = tr, label
				bar.Add(1)
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < o.Requests; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	bar.Finish()
	if firstErr != nil {
		return nil, nil, firstErr
	}
	count := map[string]int{}
	for _, l := range labels {
		count[l]++
	}
	return traces, count, nil
}

// scoreOne sends one applicant as an Open Inference Protocol JSON request.
func scoreOne(ctx context.Context, c *http.Client, url string, i int, row []float32) (trace, label string, err error) {
	body, _ := json.Marshal(map[string]any{
		"id":     fmt.Sprintf("application-%04d", i),
		"inputs": []map[string]any{{"name": "features", "shape": []int{1, 8}, "datatype": "FP32", "data": row}},
	})
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v2/models/credit-risk/infer", bytes.NewReader(body))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	var out struct {
		Parameters map[string]any `json:"parameters"`
		Error      string         `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", "", fmt.Errorf("request %d: %s: %w", i, resp.Status, err)
	}
	if resp.StatusCode != 200 {
		return "", "", fmt.Errorf("request %d: %s: %s", i, resp.Status, out.Error)
	}
	label, _ = out.Parameters["output_label"].(string)
	return resp.Header.Get("Vouch-Trace-Id"), label, nil
}

// copyLog copies the published log files (checkpoint and tiles) of src to
// dst and flips one byte of the first entry bundle; it returns that file.
func copyLog(src, dst string) (string, error) {
	var bundles []string
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if rel != "checkpoint" && !strings.HasPrefix(rel, "tile"+string(filepath.Separator)) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(rel, "entries") {
			bundles = append(bundles, rel)
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		return "", err
	}
	// The entry bundle the checkpoint commits to: the first full bundle, or
	// while the log is smaller than one bundle, the partial one of its size
	// (older partial bundles stay on disk but are no longer part of the tree).
	cp, err := os.ReadFile(filepath.Join(src, "checkpoint"))
	if err != nil {
		return "", err
	}
	lines := strings.SplitN(string(cp), "\n", 3)
	if len(lines) < 2 {
		return "", fmt.Errorf("malformed checkpoint in %s", src)
	}
	rel := filepath.Join("tile", "entries", "000")
	if size, err := strconv.Atoi(lines[1]); err == nil && size < 256 {
		rel = filepath.Join("tile", "entries", "000.p", strconv.Itoa(size))
	}
	if !slices.Contains(bundles, rel) {
		return "", fmt.Errorf("no entry bundle %s in %s", rel, src)
	}
	victim := filepath.Join(dst, rel)
	bundles = []string{rel}
	b, err := os.ReadFile(victim)
	if err != nil {
		return "", err
	}
	b[len(b)/2] ^= 0x01
	return filepath.Join("tampered-audit", bundles[0]), os.WriteFile(victim, b, 0o644)
}
