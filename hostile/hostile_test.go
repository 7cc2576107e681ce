package hostile

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

var chainLen = flag.Int("chain", 20000, "length of the long-chain cases")

// budget is the memory budget the suite builds and runs under.
const budget = 256 << 20

// limits are the run limits: the budget, and few enough body runs that
// the 2^40 Loop is refused in milliseconds.
var limits = exec.Limits{MaxBytes: budget, MaxSubgraphRuns: 100000, MaxDuration: 10 * time.Second}

// perCase bounds each case's wall time: past it the case is a hang.
const perCase = 20 * time.Second

// TestHostile runs every hostile case through decode, build, plan decode,
// bind and run, and requires a clear error (or, for the long chains, a
// result), within the per-case time bound, with the process's peak
// resident memory (VmHWM) staying within the budget plus the runtime's
// own.
func TestHostile(t *testing.T) {
	base := vmHWM(t)
	var longest time.Duration
	var longestName string
	cases := Cases(*chainLen)
	for _, c := range cases {
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- runCase(t, c) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(perCase):
			t.Fatalf("%s: no answer after %v (a hang)", c.Name, perCase)
		}
		took := time.Since(start)
		if took > longest {
			longest, longestName = took, c.Name
		}
		switch {
		case c.Want == "" && err != nil:
			t.Errorf("%s: %v", c.Name, err)
		case c.Want != "" && err == nil:
			t.Errorf("%s: accepted; want an error mentioning %q", c.Name, c.Want)
		case c.Want != "" && !strings.Contains(err.Error(), c.Want):
			t.Errorf("%s: error %q does not mention %q", c.Name, firstLine(err), c.Want)
		case err != nil && strings.Contains(err.Error(), "panicked"):
			t.Errorf("%s: a kernel panicked: %v", c.Name, firstLine(err))
		}
		t.Logf("%-28s %8v  %s", c.Name, took.Round(time.Millisecond), firstLine(err))
	}
	peak := vmHWM(t)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d inputs; peak resident %d MiB (%d MiB before the cases), heap reserved %d MiB, allocated in all %d MiB; longest case %s (%v)",
		len(cases), peak>>20, base>>20, ms.HeapSys>>20, ms.TotalAlloc>>20, longestName, longest.Round(time.Millisecond))
	if peak > base+2*budget {
		t.Errorf("peak resident memory %d MiB, more than the %d MiB before the cases plus twice the %d MiB budget", peak>>20, base>>20, budget>>20)
	}
}

// runCase takes one case as far as it goes and returns the first error.
func runCase(t *testing.T, c Case) error {
	dir := t.TempDir()
	if c.Setup != nil {
		if err := c.Setup(dir); err != nil {
			t.Fatalf("%s: setup: %v", c.Name, err)
		}
	}
	path := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(path, c.Model, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Decode(c.Model, dir)
	if err != nil {
		return err
	}
	opts := compile.DefaultOptions()
	opts.MaxBytes = budget
	res, err := compile.Build(m, c.Model, c.Name, "hostile", opts, builtin.Registry(), buildlog.New(nil))
	if err != nil {
		return err
	}
	p, err := plan.Decode(res.Plan)
	if err != nil {
		return err
	}
	// The engine serving, replay and vouch run share: bound to the
	// request's shapes, then executed.
	eng, err := exec.NewEngine(p.Graph, builtin.Registry(), exec.Options{Limits: limits})
	if err != nil {
		return err
	}
	if c.Inputs == nil {
		return nil
	}
	if _, err := eng.Run(context.Background(), c.Inputs); err != nil {
		return err
	}
	// The node-by-node executor (conformance, calibration) holds too.
	ex, err := exec.New(p.Graph, builtin.Registry())
	if err != nil {
		return err
	}
	ex.SetLimits(limits)
	if _, err := ex.Run(c.Inputs); err != nil {
		return err
	}
	return nil
}

// TestHostileServer sends the cases that reach a run to a real server on
// loopback: each model is loaded (its warm-up bounded by the default run
// limits) and its hostile request answered with an error status, or 200
// for the cases that must succeed; the server never dies.
func TestHostileServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no server")
	}
	for _, c := range Cases(1000) {
		if c.Inputs == nil || len(c.Inputs) == 0 {
			continue
		}
		m, err := onnx.Decode(c.Model, "")
		if err != nil {
			continue
		}
		opts := compile.DefaultOptions()
		opts.MaxBytes = budget
		res, err := compile.Build(m, c.Model, c.Name, "hostile", opts, builtin.Registry(), buildlog.New(nil))
		if err != nil {
			continue // refused at build: TestHostile covers it
		}
		start := time.Now()
		type answer struct {
			status int
			err    error
		}
		done := make(chan answer, 1)
		go func() {
			st, err := serveCase(c, res.Plan)
			done <- answer{st, err}
		}()
		var a answer
		select {
		case a = <-done:
		case <-time.After(2 * perCase):
			t.Fatalf("%s: the server gave no answer after %v", c.Name, 2*perCase)
		}
		switch {
		case c.Want == "" && a.err != nil:
			t.Errorf("%s: %v", c.Name, a.err)
		case c.Want != "" && a.err == nil:
			t.Errorf("%s: the server answered 200", c.Name)
		case a.status >= 500 && a.status != http.StatusServiceUnavailable:
			t.Logf("%s: answered %d (a client's bad request; 4xx expected)", c.Name, a.status)
		}
		t.Logf("%-28s %8v  %s", c.Name, time.Since(start).Round(time.Millisecond), firstLine(a.err))
	}
}

func firstLine(err error) string {
	if err == nil {
		return "ok"
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// vmHWM is the process's peak resident set (Linux); the test skips the
// memory bound elsewhere.
func vmHWM(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	t.Skip("no VmHWM in /proc/self/status")
	return 0
}

// TestLoopTimeBudget: with the body-run count unbounded, the 2^40-trip
// Loop is stopped by the run's time budget, in about that time (warm-up of
// such a model ends instead of hanging the server's start).
func TestLoopTimeBudget(t *testing.T) {
	b := loopModel(1 << 40)
	m, err := onnx.Decode(b, "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := compile.Build(m, b, "loop", "hostile", compile.DefaultOptions(), builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := exec.New(p.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	ex.SetLimits(exec.Limits{MaxSubgraphRuns: 1 << 62, MaxDuration: 300 * time.Millisecond})
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := ex.Run(map[string]*tensor.Tensor{"x": tensor.From([]float32{1}, 1)})
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(perCase):
		t.Fatalf("the loop ran past %v: the time budget did not stop it", perCase)
	}
	if !errors.Is(err, exec.ErrBudget) || !strings.Contains(err.Error(), "time budget") {
		t.Fatalf("got %v, want the time budget's error", err)
	}
	t.Logf("stopped after %v: %v", time.Since(start).Round(time.Millisecond), firstLine(err))
}
