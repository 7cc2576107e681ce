package gputest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/conformance"
	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

var flagPlacement = flag.String("placement", "", "comma-separated zoo-style directories: TestPlacementTable prints their GPU placement table")

// nodeRoot is libonnx-testdata's node tests, as the conformance runner
// finds them.
var nodeRoot = filepath.Join(conformance.DefaultRoot, "node")

// testTarget stands a CPU engine in for the device: GPU plans carry a
// placeholder kernel image (they are never loaded on a GPU here) and run
// through open.
func testTarget(open func(p *plan.Plan) (NodeEngine, error)) NodeTarget {
	img := &cuda.Image{Arch: "sm_90", NVRTC: "none", Source: kernels.Name, SourceDigest: strings.Repeat("0", 64),
		PTX: []byte("placeholder\x00"), Cubin: []byte("placeholder")}
	return NodeTarget{Name: "cpu stand-in", Image: img, Open: open, Sticky: StickyCUDA}
}

// portable runs the plan on the portable Go twins with two threads: a real
// twin of the default engine (AVX-512/AVX2, all threads), so its bits must
// be the same.
func portable(p *plan.Plan) (NodeEngine, error) {
	return exec.NewPlanEngine(p, builtin.Registry(), exec.Options{CPU: exec.CPU{ISA: kernel.ISAPortable, Threads: 2}})
}

// wrapped alters a stand-in engine's runs.
type wrapped struct {
	NodeEngine
	run func(out map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error)
}

func (w wrapped) Run(ctx context.Context, in map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	out, err := w.NodeEngine.Run(ctx, in)
	if err != nil {
		return nil, err
	}
	return w.run(out)
}

func wrap(f func(out map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error)) func(p *plan.Plan) (NodeEngine, error) {
	return func(p *plan.Plan) (NodeEngine, error) {
		e, err := portable(p)
		if err != nil {
			return nil, err
		}
		return wrapped{e, f}, nil
	}
}

func needNodeTests(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(nodeRoot); err != nil {
		t.Fatalf("the ONNX node tests are missing (%v): apt-get install libonnx-testdata", err)
	}
}

// byID indexes a summary's results.
func byID(s *NodeSummary) map[string]NodeResult {
	m := map[string]NodeResult{}
	for _, r := range s.Results {
		m[r.ID] = r
	}
	return m
}

var fewTests = regexp.MustCompile(`^node/(test_conv_with_strides_padding|test_relu|test_matmul_2d|test_argmax_default_axis_example|test_softmax_axis_1|test_add_bcast|test_constant)$`)

// TestNodeTestsSelection builds real node tests as vouch build --device
// cuda does: the GPU-placed ones run (here on the portable twins, which
// must give the default kernels' bits) and match their references, the
// others are skipped with the placement's reason.
func TestNodeTestsSelection(t *testing.T) {
	needNodeTests(t)
	var log bytes.Buffer
	sum, err := NodeTests(NodeConfig{Roots: []string{nodeRoot}, Match: fewTests}, testTarget(portable), &log)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + log.String())
	res := byID(sum)
	for _, id := range []string{"test_conv_with_strides_padding", "test_relu", "test_matmul_2d", "test_add_bcast"} {
		r := res["node/"+id]
		if r.Status != NodeEqual || r.GPU == 0 || r.GPU > r.Layers || r.Ref != "pass" || r.Values == 0 {
			t.Errorf("%s: %+v, want BITS-EQUAL with GPU layers and the reference matched", id, r)
		}
	}
	am := res["node/test_argmax_default_axis_example"]
	if am.Status != NodeSkip || am.GPU != 0 || am.Layers == 0 || !strings.HasPrefix(am.Reason, "no layer on the GPU: ") {
		t.Errorf("ArgMax: %+v, want skipped: no layer on the GPU", am)
	}
	for _, id := range []string{"test_constant", "test_softmax_axis_1"} {
		if c := res["node/"+id]; c.Status != NodeSkip || c.Layers == 0 {
			t.Errorf("%s: %+v, want skipped", id, c)
		}
	}
	if sum.Tests != 7 || sum.Equal != 4 || sum.Skipped != 3 || sum.Differ+sum.Errors != 0 || sum.RefPass != 4 {
		t.Errorf("summary %+v", *sum)
	}
	if !strings.Contains(log.String(), "SUMMARY ") || !strings.Contains(log.String(), "skipped    1  no layer on the GPU: ") ||
		!strings.Contains(log.String(), "  skipped by kind: 3 no layer on the GPU\n") {
		t.Errorf("log lacks the summary or the skip reasons:\n%s", log.String())
	}
}

// TestNodeTestsDetect: a device whose output differs in one bit is
// reported BITS-DIFFER with the count and the element; a panic or an
// error in one test is that test's ERROR and the others still run.
func TestNodeTestsDetect(t *testing.T) {
	needNodeTests(t)
	flip := wrap(func(out map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
		res := map[string]*tensor.Tensor{}
		for k, v := range out {
			if f, ok := v.Data.([]float32); ok && len(f) > 0 {
				g := append([]float32{}, f...)
				g[len(g)-1] = math.Float32frombits(math.Float32bits(g[len(g)-1]) ^ 1)
				v = &tensor.Tensor{DType: v.DType, Shape: v.Shape, Data: g}
			}
			res[k] = v
		}
		return res, nil
	})
	match := regexp.MustCompile(`^node/(test_relu|test_matmul_2d)$`)
	var log bytes.Buffer
	sum, err := NodeTests(NodeConfig{Roots: []string{nodeRoot}, Match: match, Runs: 3}, testTarget(flip), &log)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sum.Results {
		if r.Status != NodeDiffer || r.Diffs != 3 || !strings.Contains(r.Detail, "element ") {
			t.Errorf("%s: %+v, want 3 values differing (one per run)", r.ID, r)
		}
	}
	if sum.Differ != 2 || !strings.Contains(log.String(), "BITS-DIFFER 3 of ") {
		t.Errorf("summary %+v\n%s", *sum, log.String())
	}

	calls := 0
	bad := func(p *plan.Plan) (NodeEngine, error) {
		calls++
		switch calls {
		case 1:
			panic("a device that panics")
		case 2:
			return nil, fmt.Errorf("no engine")
		}
		return portable(p)
	}
	log.Reset()
	sum, err = NodeTests(NodeConfig{Roots: []string{nodeRoot}, Match: fewTests}, testTarget(bad), &log)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Errors != 2 || sum.Equal != 2 || byID(sum)["node/test_add_bcast"].GPU != 1 || !strings.Contains(log.String(), "panic: a device that panics") || !strings.Contains(log.String(), "gpu engine: no engine") {
		t.Errorf("summary %+v\n%s", *sum, log.String())
	}
}

// TestNodeTestsResume: a test past its time stops the run with ErrRestart
// after recording it; run again on the same results file, the run goes on
// after it, never repeating a recorded test, and a test a crashed process
// left started is reported, not rerun.
func TestNodeTestsResume(t *testing.T) {
	needNodeTests(t)
	results := filepath.Join(t.TempDir(), "results.jsonl")
	slow := wrap(func(out map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
		time.Sleep(3 * time.Second)
		return out, nil
	})
	cfg := NodeConfig{Roots: []string{nodeRoot}, Match: fewTests, Results: results, Timeout: 300 * time.Millisecond}
	var log bytes.Buffer
	sum, err := NodeTests(cfg, testTarget(slow), &log)
	if err != ErrRestart {
		t.Fatalf("err %v, want ErrRestart\n%s", err, log.String())
	}
	first := sum.Results[len(sum.Results)-1]
	if first.Status != NodeError || !strings.Contains(first.Detail, "timed out") || sum.NotRun == 0 {
		t.Fatalf("last result %+v, not run %d", first, sum.NotRun)
	}
	// A process that died during the next test left it started.
	f, err := os.OpenFile(results, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, `{"id":"node/test_relu","status":"started"}`)
	f.Close()
	cfg.Timeout = 0
	log.Reset()
	sum, err = NodeTests(cfg, testTarget(portable), &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	res := byID(sum)
	if r := res[first.ID]; r.Status != NodeError || !strings.Contains(r.Detail, "timed out") {
		t.Errorf("%s was run again: %+v", first.ID, r)
	}
	if r := res["node/test_relu"]; r.Status != NodeError || !strings.Contains(r.Detail, "the process stopped during this test") {
		t.Errorf("relu: %+v", r)
	}
	if sum.Tests != 7 || sum.NotRun != 0 || sum.Errors != 2 || sum.Equal+sum.Skipped != 5 {
		t.Errorf("summary %+v\n%s", *sum, log.String())
	}
	b, _ := os.ReadFile(results)
	if !strings.HasSuffix(string(b), `{"id":"","status":"done"}`+"\n") {
		t.Errorf("results file does not end with the done record:\n%s", b)
	}
	// Done: a third run runs nothing.
	log.Reset()
	sum, err = NodeTests(cfg, testTarget(slow), &log)
	if err != nil || sum.Tests != 7 {
		t.Errorf("third run: %v, %+v", err, sum)
	}
	// A deadline in the past starts nothing.
	cfg.Results, cfg.Deadline = "", time.Now().Add(-time.Second)
	if sum, err = NodeTests(cfg, testTarget(slow), &log); err != nil || sum.NotRun != 7 || sum.Tests != 0 {
		t.Errorf("past deadline: %v, %+v", err, sum)
	}
}

func f32s(v ...float32) *tensor.Tensor {
	return &tensor.Tensor{DType: tensor.Float32, Shape: []int{len(v)}, Data: v}
}

// TestCompareBits: the NaN payload rule and every other value's bits.
func TestCompareBits(t *testing.T) {
	nan1, nan2 := math.Float32frombits(0x7fc00000), math.Float32frombits(0xffc00001)
	sub := math.Float32frombits(1)
	negz := float32(math.Copysign(0, -1))
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		name        string
		got, want   *tensor.Tensor
		diffs, nans int
	}{
		{"equal", f32s(1, negz, sub, inf, nan1), f32s(1, negz, sub, inf, nan1), 0, 0},
		{"NaN payloads", f32s(nan1, 2), f32s(nan2, 2), 0, 1},
		{"-0 vs +0", f32s(negz, 1), f32s(0, 1), 1, 0},
		{"subnormal vs 0", f32s(sub), f32s(0), 1, 0},
		{"NaN vs Inf", f32s(nan1, inf), f32s(inf, inf), 1, 0},
		{"one ulp", f32s(1, math.Nextafter32(1, 2)), f32s(1, 1), 1, 0},
		{"int64", &tensor.Tensor{DType: tensor.Int64, Shape: []int{2}, Data: []int64{1 << 60, 2}}, &tensor.Tensor{DType: tensor.Int64, Shape: []int{2}, Data: []int64{1<<60 + 1, 2}}, 1, 0},
		{"float64 NaN payload", &tensor.Tensor{DType: tensor.Float64, Shape: []int{1}, Data: []float64{math.NaN()}}, &tensor.Tensor{DType: tensor.Float64, Shape: []int{1}, Data: []float64{math.Float64frombits(0xfff8000000000001)}}, 0, 1},
		{"shape", &tensor.Tensor{DType: tensor.Float32, Shape: []int{1, 2}, Data: []float32{1, 2}}, f32s(1, 2), 2, 0},
		{"dtype", &tensor.Tensor{DType: tensor.Float64, Shape: []int{2}, Data: []float64{1, 2}}, f32s(1, 2), 2, 0},
		{"missing", nil, f32s(1, 2, 3), 3, 0},
		{"strings", &tensor.Tensor{DType: tensor.String, Shape: []int{2}, Data: []string{"a", "b"}}, &tensor.Tensor{DType: tensor.String, Shape: []int{2}, Data: []string{"a", "c"}}, 1, 0},
	} {
		got := compareBits(c.got, c.want)
		if got.diffs != c.diffs || got.nanPayloads != c.nans || (c.diffs > 0) != (got.first != "") {
			t.Errorf("%s: %+v, want %d differing, %d NaN payloads", c.name, got, c.diffs, c.nans)
		}
	}
	if c := compareBits(f32s(1, 2, float32(math.Nextafter32(3, 4))), f32s(1, 2, 3)); c.first != "element 2: gpu 40400001, cpu 40400000 (3.000000238418579 vs 3)" {
		t.Errorf("first difference %q", c.first)
	}
}

// TestStickyCUDA: the context-killing CUDA errors, wrapped or flattened to
// text, and not the others.
func TestStickyCUDA(t *testing.T) {
	ill := &cuda.Error{Call: "cuStreamSynchronize", Code: 700, Name: "CUDA_ERROR_ILLEGAL_ADDRESS", Detail: "an illegal memory access was encountered"}
	oom := &cuda.Error{Call: "cuMemAlloc", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Detail: "out of memory"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{ill, true},
		{fmt.Errorf("engine: layer x (Conv): %w", ill), true},
		{fmt.Errorf("exec: device cuda:0: %v", ill), true},
		{oom, false},
		{fmt.Errorf("engine: layer x: %w", oom), false},
		{fmt.Errorf("no engine"), false},
		{nil, false},
	} {
		if got := StickyCUDA(c.err); got != c.want {
			t.Errorf("StickyCUDA(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestPlacementTable prints the placement table of -placement's
// directories (the zoo); without the flag it checks the table of a few
// node tests.
func TestPlacementTable(t *testing.T) {
	var b bytes.Buffer
	if *flagPlacement != "" {
		if err := NodePlacement(strings.Split(*flagPlacement, ","), nil, 3, &b); err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + b.String())
		return
	}
	needNodeTests(t)
	if err := NodePlacement([]string{nodeRoot}, regexp.MustCompile(`^node/(test_relu|test_argmax_default_axis_example)$`), 3, &b); err != nil {
		t.Fatal(err)
	}
	want := "| test_argmax_default_axis_example | 0 / 1 | 1x "
	if !strings.Contains(b.String(), want) || !strings.Contains(b.String(), "| test_relu | 1 / 1 |  |\n") || !strings.Contains(b.String(), "| all 2 | 1 / 2 | |\n") {
		t.Errorf("table:\n%s", b.String())
	}
}

var flagRehearse = flag.String("rehearse", "", "comma-separated node-test or zoo directories: TestNodeTestsRehearsal runs them all with the portable CPU engine standing in for the GPU")

// TestNodeTestsRehearsal rehearses the device run on this CPU (the
// portable twins as the device): which tests would run, how long they
// take. Without -rehearse it does nothing.
func TestNodeTestsRehearsal(t *testing.T) {
	if *flagRehearse == "" {
		t.Skip("no -rehearse directories")
	}
	sum, err := NodeTests(NodeConfig{Roots: strings.Split(*flagRehearse, ",")}, testTarget(portable), os.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Differ > 0 {
		t.Errorf("%d tests differ between the portable twins and the default kernels", sum.Differ)
	}
}
