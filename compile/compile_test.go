package compile_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vouchml/vouch/bench"
	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/conformance"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/q8"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
	"github.com/vouchml/vouch/tune"
)

const models = "../../shared/models"

func build(t testing.TB, name string, opts compile.Options) (*compile.Result, *buildlog.Log) {
	t.Helper()
	path := filepath.Join(models, name, "model.onnx")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Decode(src, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	log := buildlog.New(nil)
	res, err := compile.Build(m, src, name, "test", opts, builtin.Registry(), log)
	if err != nil {
		t.Fatal(err)
	}
	return res, log
}

func inputs(t testing.TB, name string, g *ir.Graph) (map[string]*tensor.Tensor, []*tensor.Tensor) {
	dir := filepath.Join(models, name, "test_data_set_0")
	feeds := map[string]*tensor.Tensor{}
	for i, v := range g.Inputs {
		in, _, err := onnx.DecodeTensorFile(filepath.Join(dir, fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			t.Fatal(err)
		}
		feeds[v.Name] = in
	}
	var want []*tensor.Tensor
	for i := range g.Outputs {
		w, _, err := onnx.DecodeTensorFile(filepath.Join(dir, fmt.Sprintf("output_%d.pb", i)))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, w)
	}
	return feeds, want
}

func runPlan(t testing.TB, b []byte, feeds map[string]*tensor.Tensor) (*plan.Plan, map[string]*tensor.Tensor) {
	t.Helper()
	p, err := plan.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.SelectProfile(feeds); err != nil {
		t.Fatal(err)
	}
	ex, err := exec.New(p.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	out, err := ex.Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	return p, out
}

func sameBits(a, b *tensor.Tensor) bool {
	return a.String() == b.String() && bytes.Equal(tensor.RawBytes(a), tensor.RawBytes(b))
}

// TestSharedModelsFromPlans: every shared model builds, and its plan
// matches the PyTorch reference within the engine-core tolerances.
func TestSharedModelsFromPlans(t *testing.T) {
	for _, name := range conformance.SharedModels {
		t.Run(name, func(t *testing.T) {
			res, log := build(t, name, compile.DefaultOptions())
			feeds, want := inputs(t, name, res.Graph)
			p, out := runPlan(t, res.Plan, feeds)
			for i, o := range p.Graph.Outputs {
				if err := conformance.Compare(out[o.Name], want[i], 1e-4, 1e-5); err != nil {
					t.Errorf("output %q: %v", o.Name, err)
				}
			}
			r := res.Report
			t.Logf("%s: %d nodes -> %d layers, fusions %v, peak arena %d bytes, %d ms, %d log lines",
				name, r.NodesIn, r.LayersOut, r.Fusions, r.PeakArenaBytes, r.BuildMillis, len(log.Records))
			if r.LayersOut >= r.NodesIn && name != "breast_cancer_mlp" {
				t.Errorf("no reduction in layer count: %d -> %d", r.NodesIn, r.LayersOut)
			}
		})
	}
}

// TestRebuildIdentical: two builds of the same model with the same options
// give byte-identical plans.
func TestRebuildIdentical(t *testing.T) {
	opts := compile.DefaultOptions()
	opts.Tactics = "heuristic" // timed builds are identical given the same timing cache (TestTimedTacticsAndCache)
	for _, name := range []string{"digits_cnn", "tiny_bert", "mobilenet_v2"} {
		a, _ := build(t, name, opts)
		b, _ := build(t, name, opts)
		if !bytes.Equal(a.Plan, b.Plan) {
			t.Errorf("%s: rebuild differs (%s vs %s)", name, a.Digest, b.Digest)
		}
	}
	// Timed builds: the second one reads the first one's timing cache.
	timed := compile.DefaultOptions()
	timed.TuneReps = 1
	timed.TimingCache = tune.NewCache()
	a, _ := build(t, "mobilenet_v2", timed)
	b, _ := build(t, "mobilenet_v2", timed)
	if !bytes.Equal(a.Plan, b.Plan) {
		t.Errorf("timed rebuild with the same timing cache differs")
	}
	p, err := plan.Decode(a.Plan)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, l := range p.Header.Graph.Layers {
		seen[l.Tactic] = true
	}
	if !seen["conv.1x1-gemm"] && !seen["conv.im2col-gemm"] {
		t.Errorf("no conv tactic recorded: %v", seen)
	}
}

// TestFusionKeepsBits: the layer fusions (bias, residual, activation),
// constant and shape folding and dead-code elimination never change a bit:
// with only the passes that rewrite arithmetic disabled (they are listed in
// compile.NumericPasses), a plan computes exactly the bits of the
// unoptimized ONNX graph.
func TestFusionKeepsBits(t *testing.T) {
	for _, name := range []string{"breast_cancer_mlp", "digits_cnn", "tiny_bert"} {
		opts := compile.DefaultOptions()
		opts.DisabledPasses = compile.NumericPasses
		res, _ := build(t, name, opts)
		m, err := onnx.DecodeFile(filepath.Join(models, name, "model.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		feeds, _ := inputs(t, name, m.Graph)
		ex, err := exec.New(m.Graph, builtin.Registry())
		if err != nil {
			t.Fatal(err)
		}
		ref, err := ex.Run(feeds)
		if err != nil {
			t.Fatal(err)
		}
		_, out := runPlan(t, res.Plan, feeds)
		for k, v := range ref {
			if !sameBits(v, out[k]) {
				t.Errorf("%s: output %q differs from the unfused graph", name, k)
			}
		}
	}
}

// TestThreadsAndBatchInvariance: a plan's outputs are bit-identical at
// GOMAXPROCS 1, 2 and 8, and a sample run alone gives the bits it gets
// inside a batch of 8.
func TestThreadsAndBatchInvariance(t *testing.T) {
	for _, name := range []string{"breast_cancer_mlp", "digits_cnn"} {
		res, _ := build(t, name, compile.DefaultOptions())
		feeds, _ := inputs(t, name, res.Graph)
		// Make a batch of 8 from the reference rows.
		inName := res.Graph.Inputs[0].Name
		x := feeds[inName]
		rowLen := x.Len() / x.Shape[0]
		src := x.Data.([]float32)
		batch := make([]float32, 8*rowLen)
		for i := 0; i < 8; i++ {
			copy(batch[i*rowLen:], src[(i%x.Shape[0])*rowLen:(i%x.Shape[0]+1)*rowLen])
			batch[i*rowLen] += float32(i) * 0.01 // make the rows distinct
		}
		shape := append([]int{8}, x.Shape[1:]...)
		bt := tensor.From(batch, shape...)
		var first map[string]*tensor.Tensor
		prev := runtime.GOMAXPROCS(0)
		for _, procs := range []int{1, 2, 8} {
			runtime.GOMAXPROCS(procs)
			_, out := runPlan(t, res.Plan, map[string]*tensor.Tensor{inName: bt})
			if first == nil {
				first = out
				continue
			}
			for k := range out {
				if !sameBits(out[k], first[k]) {
					t.Errorf("%s: output %q differs at GOMAXPROCS=%d", name, k, procs)
				}
			}
		}
		runtime.GOMAXPROCS(prev)
		outName := res.Graph.Outputs[0].Name
		full := first[outName].Data.([]float32)
		per := len(full) / 8
		for i := 0; i < 8; i++ {
			one := tensor.From(append([]float32{}, batch[i*rowLen:(i+1)*rowLen]...), append([]int{1}, x.Shape[1:]...)...)
			_, out := runPlan(t, res.Plan, map[string]*tensor.Tensor{inName: one})
			got := out[outName].Data.([]float32)
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(full[i*per+j]) {
					t.Fatalf("%s: row %d alone differs from the same row in a batch of 8 at %d: %g vs %g", name, i, j, got[j], full[i*per+j])
				}
			}
		}
	}
}

func TestProfiles(t *testing.T) {
	prof, err := compile.ParseProfile("features:1x30,4x30,16x30")
	if err != nil {
		t.Fatal(err)
	}
	opts := compile.DefaultOptions()
	opts.Profiles = append(opts.Profiles, prof)
	res, _ := build(t, "breast_cancer_mlp", opts)
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.SelectProfile(map[string]*tensor.Tensor{"features": tensor.New(tensor.Float32, 32, 30)})
	if err == nil || !strings.Contains(err.Error(), `input "features" dimension 0 is 32, outside 1..16`) {
		t.Fatalf("out-of-profile input: %v", err)
	}
	for _, bad := range []string{"features", "features:1x30,2x30", "features:4x30,1x30,8x30", "features:1x30,2x30,4"} {
		if _, err := compile.ParseProfile(bad); err == nil {
			t.Errorf("profile %q accepted", bad)
		}
	}
	opts.Profiles = []plan.Profile{{Inputs: map[string]plan.ShapeRange{"nope": {Min: []int{1}, Opt: []int{1}, Max: []int{1}}}}}
	path := filepath.Join(models, "breast_cancer_mlp", "model.onnx")
	src, _ := os.ReadFile(path)
	m, _ := onnx.Decode(src, "")
	if _, err := compile.Build(m, src, "x", "test", opts, builtin.Registry(), buildlog.New(nil)); err == nil || !strings.Contains(err.Error(), `"nope", which is not a model input`) {
		t.Fatalf("bad profile input: %v", err)
	}
}

func TestBuildLogRecordsDecisions(t *testing.T) {
	_, log := build(t, "resnet18", compile.DefaultOptions())
	if n := log.Count("fold-batchnorm", "folded"); n != 20 {
		t.Errorf("resnet18: %d BatchNormalization folds logged, want 20", n)
	}
	if n := log.Count("fuse-activation", "fused"); n == 0 {
		t.Error("no fusions logged")
	}
	if log.Count("tactics", "chosen") == 0 || log.Count("memory", "arena") != 1 {
		t.Error("tactic and memory decisions must be logged")
	}
}

// TestExpandDepthwiseKeepsBits: mobilenet_v2 with its expansion and
// depthwise convolutions fused (fuse-expand-depthwise) gives the bits of
// the plan built without that pass, through bound execution (the fused
// kernel's fast path) and through Run.
func TestExpandDepthwiseKeepsBits(t *testing.T) {
	passKeepsBits(t, "mobilenet_v2", "fuse-expand-depthwise", "ExpandDepthwise", 0)
}

// TestConvChainKeepsBits: resnet18 with its four stages in one ConvChain
// layer (fuse-conv-chain) gives the bits of the plan built without that
// pass, through bound execution (the blocked kernels on AVX-512, the body
// node by node elsewhere; twice, the second on reused buffers) and through
// Run (the body node by node).
func TestConvChainKeepsBits(t *testing.T) {
	passKeepsBits(t, "resnet18", "fuse-conv-chain", "ConvChain", 1)
}

// passKeepsBits builds model with and without pass and checks that the
// plan with it has layers of opType (exactly want of them, when want > 0)
// and gives the other's bits through Run and through Execute (twice).
func passKeepsBits(t *testing.T, model, pass, opType string, want int) {
	t.Helper()
	opts := compile.DefaultOptions()
	opts.Tactics = "heuristic"
	with, _ := build(t, model, opts)
	n := 0
	for _, nd := range with.Graph.Nodes {
		if nd.OpType == opType {
			n++
		}
	}
	if n == 0 || want > 0 && n != want {
		t.Fatalf("%d %s layers in %s's plan, want %d", n, opType, model, max(want, 1))
	}
	opts.DisabledPasses = []string{pass}
	apart, _ := build(t, model, opts)
	m, err := onnx.DecodeFile(filepath.Join(models, model, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	feeds, _ := inputs(t, model, m.Graph)
	_, ref := runPlan(t, apart.Plan, feeds)
	_, got := runPlan(t, with.Plan, feeds)
	for k, v := range ref {
		if !sameBits(v, got[k]) {
			t.Errorf("Run: output %q differs with %d %s layers", k, n, opType)
		}
	}
	for rep := 0; rep < 2; rep++ {
		bound := executePlan(t, with.Plan, feeds)
		for k, v := range ref {
			if !sameBits(v, bound[k]) {
				t.Errorf("Execute %d: output %q differs with %d %s layers", rep, k, n, opType)
			}
		}
	}
}

// TestConvChainProfileParts: `vouch bench --layers` shows each
// convolution of resnet18's ConvChain as a part of that layer, timed
// inside it, where the chain runs blocked (AVX-512); the parts are left
// out of the per-kind sums.
func TestConvChainProfileParts(t *testing.T) {
	if !amd64.EnabledZ {
		t.Skip("the chain runs node by node here: no parts are timed")
	}
	opts := compile.DefaultOptions()
	opts.Tactics = "heuristic"
	res, _ := build(t, "resnet18", opts)
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.DecodeFile(filepath.Join(models, "resnet18", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	feeds, _ := inputs(t, "resnet18", m.Graph)
	layers, err := bench.Profile(t.Context(), p, feeds, bench.Options{Runs: 2})
	if err != nil {
		t.Fatal(err)
	}
	parts, chain := 0, -1
	for i, l := range layers {
		switch {
		case l.Kind == "vouch.ConvChain":
			chain = i
		case l.Part:
			if chain < 0 || l.Median <= 0 || !strings.Contains(l.Name, "/layer") {
				t.Errorf("part %d %+v: not after its chain, or not timed", i, l)
			}
			parts++
		}
	}
	if parts != 19 {
		t.Errorf("%d parts of resnet18's chain profiled, want its 19 convolutions", parts)
	}
	for _, k := range bench.ByKind(layers) {
		if k.Kind == "vouch.Fused" && k.Layers != 1 {
			t.Errorf("by kind: %d Fused layers, want the stem alone (parts are not layers)", k.Layers)
		}
	}
}

// executePlan runs a plan bound to the feeds' shapes (the server's path:
// every kernel's Into).
func executePlan(t testing.TB, b []byte, feeds map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	t.Helper()
	p, err := plan.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := exec.New(p.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	var shapes [][]int
	var in []*tensor.Tensor
	for _, v := range p.Graph.Inputs {
		shapes = append(shapes, feeds[v.Name].Shape)
		in = append(in, feeds[v.Name])
	}
	bd, err := ex.Bind(shapes)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := bd.Execute(in)
	if err != nil {
		t.Fatal(err)
	}
	res := map[string]*tensor.Tensor{}
	for i, v := range p.Graph.Outputs {
		res[v.Name] = outs[i].Clone()
	}
	return res
}

// TestRequiredFeatures: a plan records the CPU features its kernels use
// on the build machine (what its vector kernels check for), and a
// reduced-precision plan the int8 kernels' too.
func TestRequiredFeatures(t *testing.T) {
	sorted := func(f []string) string {
		f = append([]string{}, f...)
		slices.Sort(f)
		return strings.Join(slices.Compact(f), ",")
	}
	res, _ := build(t, "breast_cancer_mlp", compile.DefaultOptions())
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(p.Header.RequiredFeatures, ","), sorted(amd64.Features()); got != want {
		t.Errorf("fp32 plan: required features %q, want the vector kernels' %q", got, want)
	}
	if amd64.Enabled && !slices.Contains(p.Header.RequiredFeatures, "fma") {
		t.Errorf("required features %v lack fma on a machine whose kernels use it", p.Header.RequiredFeatures)
	}
	res8, _ := build(t, "breast_cancer_mlp", reducedOptions(t, "breast_cancer_mlp", "int8"))
	p8, err := plan.Decode(res8.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(p8.Header.RequiredFeatures, ","), sorted(append(amd64.Features(), q8.Features()...)); got != want {
		t.Errorf("int8 plan: required features %q, want %q", got, want)
	}
}
