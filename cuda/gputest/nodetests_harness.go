package gputest

// The ONNX node tests (and zoo-style model directories) on the GPU: each
// test's model is built as `vouch build --device cuda` builds it (the CPU
// plan of compile.Build, then engine.Section's placement and the kernel
// image added by plan.AddGPU), the tests with no layer on the GPU are
// skipped with the placement's reason, and the others run through the
// serving engine twice: on the device (exec.NewPlanEngine with
// Options.Device cuda:N) and on the CPU (the same plan), and every output
// is compared bit for bit (NaN matches NaN whatever its payload, as
// docs/determinism.md says; every other value, ±Inf, -0 and subnormals
// included, must have the same bits). The device output is also checked
// against the test's reference as the CPU conformance runner checks it.
//
// This file holds everything that needs no GPU (selection, building,
// comparison, the report, the results file a restarted process resumes
// from), so that the CPU tests can run it with a CPU engine standing in for
// the device; nodetests.go (build tag cuda) opens the real one.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/conformance"
	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// NodeTarget is the device side of the harness: the kernel image every
// GPU plan is built with (compiled once) and how a GPU plan's engine is
// opened.
type NodeTarget struct {
	Name  string      // the device, for the log
	Image *cuda.Image // the kernels a GPU plan carries
	Env   engine.Env  // the build GPU the plans record
	// Open returns the engine that runs p on the device (an
	// *exec.Engine from exec.NewPlanEngine).
	Open func(p *plan.Plan) (NodeEngine, error)
	// Sticky reports whether err leaves the device unusable for the
	// tests after it (a CUDA context error): the process then stops so
	// that a fresh one can resume. Nil: never.
	Sticky func(err error) bool
}

// NodeEngine runs a plan: *exec.Engine.
type NodeEngine interface {
	Run(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error)
	Close() error
}

// stickyCodes are the CUresults after which a CUDA context is unusable
// until the process ends: illegal address, launch time-out, hardware
// stack error, illegal instruction, misaligned address, invalid address
// space, invalid PC, launch failed, unknown.
var stickyCodes = map[int32]string{700: "CUDA_ERROR_ILLEGAL_ADDRESS", 702: "CUDA_ERROR_LAUNCH_TIMEOUT", 714: "CUDA_ERROR_HARDWARE_STACK_ERROR",
	715: "CUDA_ERROR_ILLEGAL_INSTRUCTION", 716: "CUDA_ERROR_MISALIGNED_ADDRESS", 717: "CUDA_ERROR_INVALID_ADDRESS_SPACE",
	718: "CUDA_ERROR_INVALID_PC", 719: "CUDA_ERROR_LAUNCH_FAILED", 999: "CUDA_ERROR_UNKNOWN"}

// StickyCUDA reports whether err is (or, flattened into text by a
// wrapper, names) a CUDA error that leaves the context unusable.
func StickyCUDA(err error) bool {
	if err == nil {
		return false
	}
	var ce *cuda.Error
	if errors.As(err, &ce) {
		if _, ok := stickyCodes[ce.Code]; ok {
			return true
		}
	}
	msg := err.Error()
	for _, name := range stickyCodes {
		if strings.Contains(msg, name+" ") || strings.HasSuffix(msg, name) || strings.Contains(msg, name+":") {
			return true
		}
	}
	return false
}

// NodeConfig says which tests to run and how.
type NodeConfig struct {
	// Roots are directories of test directories (Debian's
	// libonnx-testdata node/, or a zoo: <name>/model.onnx and
	// test_data_set_N/{input,output}_K.pb); a root that itself holds
	// model.onnx is one test.
	Roots []string
	Match *regexp.Regexp // tests whose id matches (nil: all)
	// RTol, ATol are the reference check's tolerances (0, 0:
	// conformance.RTol and ATol, the node tests').
	RTol, ATol float64
	Timeout    time.Duration // per test (0: 20 s)
	Deadline   time.Time     // no test starts after it (zero: none)
	Runs       int           // device runs per data set, each compared (0: 2)
	// Results is a JSON-lines file of results: the tests it records are
	// not run again, and every new result is appended, so a process that
	// stopped (crash, sticky device error, time-out) is resumed by
	// running it again. "" keeps none.
	Results string
}

// Node-test outcomes.
const (
	NodeEqual   = "BITS-EQUAL"
	NodeDiffer  = "BITS-DIFFER"
	NodeError   = "ERROR"
	NodeSkip    = "SKIP"
	nodeStarted = "started" // in the results file only: a test in progress
	nodeDone    = "done"    // in the results file only: every test was taken
)

// NodeResult is one test's outcome.
type NodeResult struct {
	ID     string `json:"id"` // root's base name / test directory
	Status string `json:"status"`
	GPU    int    `json:"gpu,omitempty"`    // layers placed on the GPU
	Layers int    `json:"layers,omitempty"` // layers of the plan
	// Values are the output values compared (all runs), Diffs those
	// whose bits differ, NaNPayloads the NaNs whose payloads differ
	// (allowed).
	Values      int `json:"values,omitempty"`
	Diffs       int `json:"diffs,omitempty"`
	NaNPayloads int `json:"nan_payloads,omitempty"`
	// Reason is a skip's category ("no layer on the GPU: ...").
	Reason string `json:"reason,omitempty"`
	// Detail is the first difference, or the error.
	Detail string `json:"detail,omitempty"`
	// Ref is the reference check of the device output: "pass", "fail:
	// ..." (the CPU plan's output failing too says "(cpu too)").
	Ref string `json:"ref,omitempty"`
	// CPUReasons are the reasons the plan's CPU layers stay there, most
	// frequent first, with their counts.
	CPUReasons []string `json:"cpu_reasons,omitempty"`
	Millis     int64    `json:"ms,omitempty"`
	// restart: the device must not be used again in this process.
	restart bool
}

// Line is the result's line of the log.
func (r NodeResult) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-60s ", r.ID)
	if r.Status == NodeSkip {
		fmt.Fprintf(&b, "SKIP gpu %d/%d: %s", r.GPU, r.Layers, r.Reason)
		if r.Detail != "" {
			fmt.Fprintf(&b, " (%s)", r.Detail)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "gpu %d/%d %s", r.GPU, r.Layers, r.Status)
	switch r.Status {
	case NodeEqual:
		fmt.Fprintf(&b, " %d values", r.Values)
	case NodeDiffer:
		fmt.Fprintf(&b, " %d of %d values differ: %s", r.Diffs, r.Values, r.Detail)
	case NodeError:
		fmt.Fprintf(&b, ": %s", r.Detail)
	}
	if r.NaNPayloads > 0 {
		fmt.Fprintf(&b, " (%d NaN payloads differ: allowed)", r.NaNPayloads)
	}
	if r.Ref != "" {
		fmt.Fprintf(&b, "; ref %s", r.Ref)
	}
	fmt.Fprintf(&b, "; %d ms", r.Millis)
	if why := r.CPUReasons; len(why) > 0 {
		if len(why) > 4 {
			why = append(why[:4:4], fmt.Sprintf("%d more reasons", len(r.CPUReasons)-4))
		}
		fmt.Fprintf(&b, "\n    cpu layers: %s", strings.Join(why, "; "))
	}
	return b.String()
}

// NodeSummary counts the outcomes of a NodeTests run, resumed runs included.
type NodeSummary struct {
	Tests, OnGPU, Equal, Differ, Errors, Skipped, NotRun int
	RefPass, RefFail                                     int
	Values, Diffs                                        int
	SkipReasons                                          map[string]int
	Results                                              []NodeResult
}

// ErrRestart says NodeTests stopped early because the device cannot be
// trusted in this process any more (a sticky CUDA error, or a test that
// ran past its time and may still hold it): run it again with the same
// Results file to go on after that test.
var ErrRestart = errors.New("gputest: node tests stopped: restart to resume")

// NodeTests runs the tests of cfg.Roots on target and writes one line per
// test and a summary to w. A test's failure (an error, a panic) never stops
// the others; a test past cfg.Timeout or a sticky device error stops the
// process's run with ErrRestart, after recording that test.
func NodeTests(cfg NodeConfig, target NodeTarget, w io.Writer) (*NodeSummary, error) {
	if cfg.RTol == 0 && cfg.ATol == 0 {
		cfg.RTol, cfg.ATol = conformance.RTol, conformance.ATol
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 20 * time.Second
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 2
	}
	tests, err := listNodeTests(cfg.Roots, cfg.Match)
	if err != nil {
		return nil, err
	}
	done, err := readNodeResults(cfg.Results)
	if err != nil {
		return nil, err
	}
	var rec *os.File
	if cfg.Results != "" {
		if rec, err = os.OpenFile(cfg.Results, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			return nil, err
		}
		defer rec.Close()
	}
	record := func(r NodeResult) {
		if rec != nil {
			b, _ := json.Marshal(r)
			rec.Write(append(b, '\n'))
			rec.Sync()
		}
	}
	img := target.Image.Encode()
	sum := &NodeSummary{SkipReasons: map[string]int{}}
	var stop error
	for _, t := range tests {
		if r, ok := done[t.id]; ok {
			if r.Status == nodeStarted {
				// The process that ran it stopped before it ended.
				r = NodeResult{ID: t.id, Status: NodeError, Detail: "the process stopped during this test (crash, sticky device error or time-out)"}
				record(r)
				fmt.Fprintln(w, r.Line())
			}
			sum.add(r)
			continue
		}
		if stop != nil || (!cfg.Deadline.IsZero() && time.Now().After(cfg.Deadline)) {
			sum.NotRun++
			continue
		}
		record(NodeResult{ID: t.id, Status: nodeStarted})
		r := runNodeTest(t, cfg, target, img)
		record(r)
		fmt.Fprintln(w, r.Line())
		sum.add(r)
		if r.restart {
			stop = ErrRestart
		}
	}
	if stop == nil {
		record(NodeResult{Status: nodeDone})
	}
	sum.write(w, cfg)
	return sum, stop
}

// nodeTest is one test directory.
type nodeTest struct{ id, dir string }

// listNodeTests lists the test directories under roots (sorted within a
// root), keeping those whose id matches.
func listNodeTests(roots []string, match *regexp.Regexp) ([]nodeTest, error) {
	var out []nodeTest
	for _, root := range roots {
		base := filepath.Base(filepath.Clean(root))
		if isFile(filepath.Join(root, "model.onnx")) {
			if id := base; match == nil || match.MatchString(id) {
				out = append(out, nodeTest{id, root})
			}
			continue
		}
		entries, err := os.ReadDir(root)
		if err != nil {
			return nil, fmt.Errorf("gputest: node tests: %w", err)
		}
		for _, e := range entries {
			dir := filepath.Join(root, e.Name())
			id := base + "/" + e.Name()
			if e.IsDir() && isFile(filepath.Join(dir, "model.onnx")) && (match == nil || match.MatchString(id)) {
				out = append(out, nodeTest{id, dir})
			}
		}
	}
	return out, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// readNodeResults reads a results file: the last record of each test, and
// whether the run finished. A missing file is an empty one.
func readNodeResults(path string) (map[string]NodeResult, error) {
	out := map[string]NodeResult{}
	if path == "" {
		return out, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		var r NodeResult
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.ID == "" {
			continue // a torn last line, or the done record
		}
		out[r.ID] = r
	}
	return out, sc.Err()
}

func (s *NodeSummary) add(r NodeResult) {
	s.Tests++
	s.Results = append(s.Results, r)
	switch r.Status {
	case NodeSkip:
		s.Skipped++
		s.SkipReasons[r.Reason]++
		return
	case NodeEqual:
		s.Equal++
	case NodeDiffer:
		s.Differ++
	default:
		s.Errors++
	}
	if r.GPU > 0 {
		s.OnGPU++
	}
	s.Values += r.Values
	s.Diffs += r.Diffs
	switch {
	case r.Ref == "pass":
		s.RefPass++
	case r.Ref != "":
		s.RefFail++
	}
}

// write prints the summary: totals, then the skip reasons, most frequent
// first.
func (s *NodeSummary) write(w io.Writer, cfg NodeConfig) {
	fmt.Fprintf(w, "SUMMARY %s: %d tests; %d ran with layers on the GPU: %d BITS-EQUAL, %d BITS-DIFFER, %d ERROR (%d of %d values differ); reference (rtol %g, atol %g): %d pass, %d fail; %d skipped; %d not run (time limit or stopped)\n",
		strings.Join(cfg.Roots, ","), s.Tests+s.NotRun, s.Equal+s.Differ+s.Errors, s.Equal, s.Differ, s.Errors, s.Diffs, s.Values,
		cfg.RTol, cfg.ATol, s.RefPass, s.RefFail, s.Skipped, s.NotRun)
	kinds := map[string]int{}
	for reason, n := range s.SkipReasons {
		kind, _, _ := strings.Cut(reason, ": ")
		kinds[kind] += n
	}
	var parts []string
	for _, kv := range byCount(kinds) {
		parts = append(parts, fmt.Sprintf("%d %s", kv.n, kv.key))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "  skipped by kind: %s\n", strings.Join(parts, "; "))
	}
	for _, kv := range byCount(s.SkipReasons) {
		fmt.Fprintf(w, "  skipped %4d  %s\n", kv.n, kv.key)
	}
}

type keyCount struct {
	key string
	n   int
}

// byCount orders a tally by count, then key.
func byCount(m map[string]int) []keyCount {
	out := make([]keyCount, 0, len(m))
	for k, n := range m {
		out = append(out, keyCount{k, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].n != out[j].n {
			return out[i].n > out[j].n
		}
		return out[i].key < out[j].key
	})
	return out
}

// runNodeTest runs one test under cfg.Timeout, recovering from a panic.
func runNodeTest(t nodeTest, cfg NodeConfig, target NodeTarget, img []byte) NodeResult {
	start := time.Now()
	done := make(chan NodeResult, 1)
	go func() {
		// The placement, known before the runs, stays in a panic's result.
		partial := NodeResult{ID: t.id}
		defer func() {
			if p := recover(); p != nil {
				partial.Status, partial.Detail = NodeError, oneLine(fmt.Sprintf("panic: %v", p))
				done <- partial
			}
		}()
		done <- nodeTestRun(t, cfg, target, img, &partial)
	}()
	var r NodeResult
	select {
	case r = <-done:
	case <-time.After(cfg.Timeout):
		// The run may still hold the device: this process stops.
		r = NodeResult{ID: t.id, Status: NodeError, Detail: fmt.Sprintf("timed out after %v", cfg.Timeout), restart: true}
	}
	r.Millis = time.Since(start).Milliseconds()
	return r
}

// nodeScope are the domains the CPU conformance runner skips.
var nodeScope = map[string]bool{"ai.onnx.preview.training": true, "ai.onnx.ml": true}

// nodeBuilt is a test's model built into a CPU plan, with its placement.
type nodeBuilt struct {
	res      *compile.Result
	sets     []nodeSet
	outNames []string
	place    []plan.Placement
}

// buildNodeTest loads a test and builds its plan as vouch build does; ok
// is false when r says why it goes no further (a skip).
func buildNodeTest(t nodeTest) (nb *nodeBuilt, r NodeResult, ok bool) {
	r = NodeResult{ID: t.id}
	skip := func(reason, detail string) (*nodeBuilt, NodeResult, bool) {
		r.Status, r.Reason, r.Detail = NodeSkip, reason, oneLine(detail)
		return nil, r, false
	}
	src, err := os.ReadFile(filepath.Join(t.dir, "model.onnx"))
	if err != nil {
		return skip("the model does not load", err.Error())
	}
	m, err := onnx.Decode(src, t.dir)
	if err != nil {
		return skip("the model does not load", err.Error())
	}
	for d := range m.Opsets {
		if nodeScope[d] {
			return skip("outside vouch's scope (domain "+d+")", "")
		}
	}
	for _, v := range append(append([]*ir.Value{}, m.Graph.Inputs...), m.Graph.Outputs...) {
		if v.Type.DType == tensor.Sequence || v.Type.DType == tensor.Undefined {
			return skip("sequence, map or optional values (not read here)", v.Name)
		}
	}
	nb = &nodeBuilt{}
	if nb.sets, err = readNodeSets(t.dir, m.Graph); err != nil {
		return skip("test data does not load", err.Error())
	}
	for _, o := range m.Graph.Outputs {
		nb.outNames = append(nb.outNames, o.Name)
	}
	nb.res, err = compile.Build(m, src, filepath.Base(t.dir), "vouch gputest", compile.DefaultOptions(), builtin.Registry(), buildlog.New(io.Discard))
	if err != nil {
		return skip("vouch build fails", err.Error())
	}
	nb.place = engine.Place(nb.res.Graph, nb.res.Graph.Types)
	reasons := map[string]int{}
	for _, l := range nb.place {
		if l.Backend == plan.BackendCUDA {
			r.GPU++
		} else {
			reasons[l.Reason]++
		}
	}
	r.Layers = len(nb.place)
	top := byCount(reasons)
	for _, kv := range top {
		r.CPUReasons = append(r.CPUReasons, fmt.Sprintf("%dx %s", kv.n, kv.key))
	}
	switch {
	case r.Layers == 0:
		return skip("no layers (the build folded the graph to constants)", "")
	case r.GPU == 0:
		return skip("no layer on the GPU: "+top[0].key, "")
	}
	return nb, r, true
}

// NodePlacement writes, for every test (model) under roots, how many of
// its plan's layers engine.Place puts on the GPU and why the others stay
// on the CPU (the most frequent reasons first), as a Markdown table, in
// name order; a model in several roots is taken from the first. It needs
// no GPU.
func NodePlacement(roots []string, match *regexp.Regexp, reasons int, w io.Writer) error {
	all, err := listNodeTests(roots, match)
	if err != nil {
		return err
	}
	var tests []nodeTest
	seen := map[string]bool{}
	for _, t := range all {
		if name := filepath.Base(t.dir); !seen[name] {
			seen[name] = true
			tests = append(tests, t)
		}
	}
	sort.SliceStable(tests, func(i, j int) bool { return filepath.Base(tests[i].dir) < filepath.Base(tests[j].dir) })
	fmt.Fprintf(w, "| model | layers on cuda / total | why the CPU layers stay on the CPU (layers) |\n|---|---|---|\n")
	gpu, total := 0, 0
	for _, t := range tests {
		_, r, _ := buildNodeTest(t)
		why := r.CPUReasons
		if len(why) > reasons {
			why = append(why[:reasons:reasons], fmt.Sprintf("%d more reasons", len(r.CPUReasons)-reasons))
		}
		cell := strings.ReplaceAll(strings.Join(why, "; "), "|", "\\|")
		if r.Layers == 0 && r.Status == NodeSkip {
			cell = r.Reason
			if r.Detail != "" {
				cell += ": " + r.Detail
			}
			cell = strings.ReplaceAll(cell, "|", "\\|")
			fmt.Fprintf(w, "| %s | - | %s |\n", filepath.Base(t.dir), cell)
			continue
		}
		gpu += r.GPU
		total += r.Layers
		fmt.Fprintf(w, "| %s | %d / %d | %s |\n", filepath.Base(t.dir), r.GPU, r.Layers, cell)
	}
	fmt.Fprintf(w, "| all %d | %d / %d | |\n", len(tests), gpu, total)
	return nil
}

// nodeTestRun builds, places and runs one test; partial receives the
// placement before the runs.
func nodeTestRun(t nodeTest, cfg NodeConfig, target NodeTarget, img []byte, partial *NodeResult) NodeResult {
	nb, r, ok := buildNodeTest(t)
	if !ok {
		return r
	}
	*partial = r
	fail := func(stage string, err error) NodeResult {
		r.Status, r.Detail = NodeError, oneLine(stage+": "+err.Error())
		r.restart = target.Sticky != nil && target.Sticky(err)
		return r
	}
	reg := builtin.Registry()
	sec := engine.Section(nb.res.Graph, nb.res.Graph.Types, target.Image, target.Env)
	if len(sec.Layers) != len(nb.place) || sec.GPULayers() != r.GPU {
		return fail("placement", fmt.Errorf("Section placed %d of %d layers on the GPU, Place %d of %d", sec.GPULayers(), len(sec.Layers), r.GPU, len(nb.place)))
	}
	res, sets, outNames := nb.res, nb.sets, nb.outNames
	b, err := plan.AddGPU(res.Plan, sec, img)
	if err != nil {
		return fail("GPU plan", err)
	}
	p, err := plan.Decode(b)
	if err != nil {
		return fail("GPU plan", err)
	}
	cpuE, err := exec.NewPlanEngine(p, reg, exec.Options{})
	if err != nil {
		return fail("cpu engine", err)
	}
	defer cpuE.Close()
	devE, err := target.Open(p)
	if err != nil {
		return fail("gpu engine", err)
	}
	defer devE.Close()
	ctx := context.Background()
	refFail := ""
	for _, set := range sets {
		cpuOut, err := cpuE.Run(ctx, set.inputs)
		if err != nil {
			return fail("cpu run", err)
		}
		for run := 0; run < cfg.Runs; run++ {
			devOut, err := devE.Run(ctx, set.inputs)
			if err != nil {
				return fail(fmt.Sprintf("gpu run %d", run), err)
			}
			for _, name := range outNames {
				c := compareBits(devOut[name], cpuOut[name])
				r.Values += c.values
				r.Diffs += c.diffs
				r.NaNPayloads += c.nanPayloads
				if c.diffs > 0 && r.Detail == "" {
					r.Detail = fmt.Sprintf("%s run %d output %q: %s", filepath.Base(set.dir), run, name, c.first)
				}
			}
			if run > 0 || refFail != "" {
				continue
			}
			for i, name := range outNames {
				if set.outputs[i] == nil {
					continue
				}
				if err := conformance.Compare(devOut[name], set.outputs[i], cfg.RTol, cfg.ATol); err != nil {
					refFail = fmt.Sprintf("fail: output %q: %v", name, err)
					if conformance.Compare(cpuOut[name], set.outputs[i], cfg.RTol, cfg.ATol) != nil {
						refFail += " (cpu too)"
					}
					break
				}
			}
		}
	}
	r.Ref = "pass"
	if refFail != "" {
		r.Ref = oneLine(refFail)
	}
	r.Status = NodeEqual
	if r.Diffs > 0 {
		r.Status = NodeDiffer
	}
	return r
}

// oneLine keeps an error's first line, at most 300 bytes.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// nodeSet is one test_data_set_N: the inputs by name and the reference
// outputs in graph-output order (nil where a file is missing).
type nodeSet struct {
	dir     string
	inputs  map[string]*tensor.Tensor
	outputs []*tensor.Tensor
}

// readNodeSets reads every test_data_set_N of dir for graph g.
func readNodeSets(dir string, g *ir.Graph) ([]nodeSet, error) {
	dirs, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no test_data_set directories")
	}
	sort.Strings(dirs)
	var out []nodeSet
	for _, d := range dirs {
		s := nodeSet{dir: d, inputs: map[string]*tensor.Tensor{}}
		for i, v := range g.Inputs {
			t, _, err := onnx.DecodeTensorFile(filepath.Join(d, fmt.Sprintf("input_%d.pb", i)))
			if err != nil {
				return nil, err
			}
			s.inputs[v.Name] = bf16As(t, v.Type.DType)
		}
		for i, v := range g.Outputs {
			t, _, err := onnx.DecodeTensorFile(filepath.Join(d, fmt.Sprintf("output_%d.pb", i)))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
			if t != nil {
				t = bf16As(t, v.Type.DType)
			}
			s.outputs = append(s.outputs, t)
		}
		out = append(out, s)
	}
	return out, nil
}

// bf16As gives uint16 test data the bfloat16 type a model declares (ONNX
// 1.12's generator stored bfloat16 tensors as uint16: the same bits).
func bf16As(t *tensor.Tensor, declared tensor.DType) *tensor.Tensor {
	u, ok := t.Data.([]uint16)
	if declared != tensor.BFloat16 || !ok {
		return t
	}
	b := make([]tensor.BHalf, len(u))
	for i := range u {
		b[i] = tensor.BHalf(u[i])
	}
	return &tensor.Tensor{DType: tensor.BFloat16, Shape: t.Shape, Data: b}
}

// bitsCompared is compareBits's count.
type bitsCompared struct {
	values, diffs, nanPayloads int
	first                      string // the first difference
}

// compareBits compares got with want element by element on their bits: a
// NaN matches any NaN (the payload is counted, not a difference), every
// other value must have equal bits; a different dtype or shape makes every
// element differ.
func compareBits(got, want *tensor.Tensor) bitsCompared {
	if want == nil {
		return bitsCompared{diffs: 1, values: 1, first: "no CPU output"}
	}
	n := want.Len()
	if got == nil || got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) {
		g := "missing"
		if got != nil {
			g = fmt.Sprintf("%v %s", got.DType, tensor.ShapeString(got.Shape))
		}
		return bitsCompared{values: max(n, 1), diffs: max(n, 1), first: fmt.Sprintf("gpu %s, cpu %v %s", g, want.DType, tensor.ShapeString(want.Shape))}
	}
	c := bitsCompared{values: n}
	if ws, ok := want.Data.([]string); ok {
		gs, _ := got.Data.([]string)
		for i := range ws {
			if i >= len(gs) || gs[i] != ws[i] {
				c.diffs++
				if c.first == "" {
					c.first = fmt.Sprintf("element %d", i)
				}
			}
		}
		return c
	}
	gb, wb := tensor.RawBytes(got), tensor.RawBytes(want)
	size := want.DType.Size()
	if size == 0 || len(gb) != len(wb) {
		return bitsCompared{values: max(n, 1), diffs: max(n, 1), first: fmt.Sprintf("%v: no bytes to compare", want.DType)}
	}
	var gf, wf []float64
	for i := 0; i < n; i++ {
		a, b := gb[i*size:(i+1)*size], wb[i*size:(i+1)*size]
		if string(a) == string(b) {
			continue
		}
		if want.DType.IsFloat() {
			if gf == nil {
				gf, _ = got.Float64s()
				wf, _ = want.Float64s()
			}
			if i < len(gf) && i < len(wf) && math.IsNaN(gf[i]) && math.IsNaN(wf[i]) {
				c.nanPayloads++
				continue
			}
		}
		c.diffs++
		if c.first == "" {
			c.first = fmt.Sprintf("element %d: gpu %x, cpu %x", i, reverse(a), reverse(b))
			if gf != nil && i < len(gf) && i < len(wf) {
				c.first += fmt.Sprintf(" (%g vs %g)", gf[i], wf[i])
			}
		}
	}
	return c
}

// reverse returns little-endian bytes in reading order (0x3f800000 for 1.0).
func reverse(b []byte) []byte {
	out := make([]byte, len(b))
	for i := range b {
		out[len(b)-1-i] = b[i]
	}
	return out
}
