// Package conformance runs the ONNX backend test suite (the layout of
// Debian's libonnx-testdata: one directory per test holding model.onnx and
// test_data_set_N/{input,output}_K.pb) against vouch's executor and reports
// per-test and per-operator results.
//
// A test passes when every output has the reference's dtype and shape and
// every element is within ONNX Runtime's tolerances (|got-want| <= atol +
// rtol*|want|, rtol 1e-3, atol 1e-7; NaN matches NaN; integers, bools and
// strings exactly), and when shape inference predicts each output's dtype
// and shape. A test is skipped when it needs something vouch deliberately
// does not support (sequence, map or optional values; training-only
// operators); it fails otherwise, with the reason.
package conformance

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/onnx/onnxpb"
	"github.com/vouchml/vouch/tensor"
	"google.golang.org/protobuf/proto"
)

// Status is a test's outcome.
type Status string

// Outcomes.
const (
	Pass Status = "pass"
	Fail Status = "fail"
	Skip Status = "skip"
)

// Tolerances are ONNX Runtime's defaults for the backend test suite.
const (
	RTol = 1e-3
	ATol = 1e-7
)

// Result is the outcome of one test directory.
type Result struct {
	Suite  string // node, pytorch-converted, pytorch-operator, simple
	Name   string // directory name, e.g. test_add_bcast
	Op     string // the operator the test is filed under
	Status Status
	Reason string // why it did not pass
}

// ID is "suite/name".
func (r Result) ID() string { return r.Suite + "/" + r.Name }

// Suites are the suite directories run, in order.
var Suites = []string{"node", "pytorch-converted", "pytorch-operator", "simple"}

// SharedModels are the model fixtures in ../shared/models that every build
// of vouch must run within tolerance of their PyTorch reference outputs.
var SharedModels = []string{"breast_cancer_mlp", "digits_cnn", "mobilenet_v2", "resnet18", "tiny_bert"}

// DefaultRoot is where Debian's libonnx-testdata installs the suite.
const DefaultRoot = "/usr/share/libonnx-testdata/data"

// RunAll runs every test of every suite under root.
func RunAll(root string, reg *kernel.Registry, timeout time.Duration) ([]Result, error) {
	var out []Result
	for _, s := range Suites {
		entries, err := os.ReadDir(filepath.Join(root, s))
		if err != nil {
			return nil, fmt.Errorf("conformance: %w", err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			out = append(out, RunTest(root, s, e.Name(), reg, timeout))
		}
	}
	return out, nil
}

// skipError marks a test that needs a feature vouch does not support.
type skipError struct{ reason string }

func (e skipError) Error() string { return e.reason }

// RunTest runs one test directory, recovering from any panic.
func RunTest(root, suite, name string, reg *kernel.Registry, timeout time.Duration) (res Result) {
	res = Result{Suite: suite, Name: name}
	done := make(chan Result, 1)
	go func() {
		r := res
		defer func() {
			if p := recover(); p != nil {
				r.Status, r.Reason = Fail, fmt.Sprintf("panic: %v", p)
				done <- r
			}
		}()
		op, err := runDir(filepath.Join(root, suite, name), reg)
		r.Op = op
		switch e := err.(type) {
		case nil:
			r.Status = Pass
		case skipError:
			r.Status, r.Reason = Skip, e.reason
		default:
			r.Status, r.Reason = Fail, oneLine(err.Error())
		}
		done <- r
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(timeout):
		res.Status, res.Reason = Fail, fmt.Sprintf("timed out after %v", timeout)
		return res
	}
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// trainingOps are operators of the ai.onnx.preview.training domain and
// other ops outside an inference engine's scope.
var unsupportedDomains = map[string]bool{"ai.onnx.preview.training": true, "ai.onnx.ml": true}

func runDir(dir string, reg *kernel.Registry) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
	if err != nil {
		return "", err
	}
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(b, &mp); err != nil {
		return "", fmt.Errorf("decoding model: %w", err)
	}
	op := primaryOp(filepath.Base(dir), &mp)
	for _, o := range mp.OpsetImport {
		if unsupportedDomains[o.GetDomain()] {
			return op, skipError{fmt.Sprintf("domain %s is outside vouch's scope", o.GetDomain())}
		}
	}
	if g := mp.GetGraph(); g != nil {
		for _, vi := range append(append([]*onnxpb.ValueInfoProto{}, g.Input...), g.Output...) {
			if t := vi.GetType(); t != nil && t.GetTensorType() == nil && !tensorSequence(t) {
				return op, skipError{fmt.Sprintf("value %q is not a tensor (sequence, map and optional values are not supported)", vi.GetName())}
			}
		}
	}
	m, err := onnx.FromProto(&mp, dir)
	if err != nil {
		return op, err
	}
	// The engine that serves and replays plans runs the suite too.
	eng, err := exec.NewEngine(m.Graph, reg, exec.Options{})
	if err != nil {
		return op, err
	}
	sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if len(sets) == 0 {
		return op, fmt.Errorf("no test_data_set directories")
	}
	for _, set := range sets {
		inputs := map[string]*tensor.Tensor{}
		for i, v := range m.Graph.Inputs {
			t, err := readValue(filepath.Join(set, fmt.Sprintf("input_%d.pb", i)), v.Type.DType == tensor.Sequence)
			if err != nil {
				return op, err
			}
			inputs[v.Name] = asDeclared(t, v.Type.DType)
		}
		if err := checkInference(m.Graph, reg, inputs); err != nil {
			return op, err
		}
		got, err := eng.Run(context.Background(), inputs)
		if err != nil {
			return op, err
		}
		for i, o := range m.Graph.Outputs {
			want, err := readValue(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)), o.Type.DType == tensor.Sequence)
			if err != nil {
				return op, err
			}
			want = asDeclared(want, o.Type.DType)
			if err := Compare(got[o.Name], want, RTol, ATol); err != nil {
				return op, fmt.Errorf("output %q: %w", o.Name, err)
			}
		}
		if err := checkInferredOutputs(m.Graph, got); err != nil {
			return op, err
		}
	}
	return op, nil
}

// checkInference runs shape inference on a copy of the graph's types with
// the concrete input shapes.
func checkInference(g *ir.Graph, reg *kernel.Registry, inputs map[string]*tensor.Tensor) error {
	saved := make([]ir.Type, len(g.Inputs))
	for i, v := range g.Inputs {
		saved[i] = v.Type
		v.Type = ir.TensorType(inputs[v.Name])
	}
	defer func() {
		for i, v := range g.Inputs {
			v.Type = saved[i]
		}
	}()
	g.Types = map[string]ir.Type{}
	if err := ir.Infer(g, reg, nil); err != nil {
		return fmt.Errorf("shape inference: %w", err)
	}
	return nil
}

func checkInferredOutputs(g *ir.Graph, got map[string]*tensor.Tensor) error {
	for _, o := range g.Outputs {
		t, ok := g.Types[o.Name]
		if !ok {
			continue
		}
		out := got[o.Name]
		if t.DType != tensor.Undefined && t.DType != out.DType {
			return fmt.Errorf("shape inference: output %q inferred %v, got %v", o.Name, t, out)
		}
		if t.RankKnown {
			if len(t.Shape) != len(out.Shape) {
				return fmt.Errorf("shape inference: output %q inferred %v, got %v", o.Name, t, out)
			}
			for i, d := range t.Shape {
				if d.Known() && int(d.Value) != out.Shape[i] {
					return fmt.Errorf("shape inference: output %q inferred %v, got %v", o.Name, t, out)
				}
			}
		}
	}
	return nil
}

// primaryOp files a test under the operator it is named after, or the
// first operator of its graph.
func primaryOp(name string, mp *onnxpb.ModelProto) string {
	g := mp.GetGraph()
	if g == nil || len(g.Node) == 0 {
		return "?"
	}
	key := strings.ReplaceAll(strings.TrimPrefix(name, "test_"), "_", "")
	best := ""
	for _, n := range g.Node {
		op := n.GetOpType()
		if strings.HasPrefix(key, strings.ToLower(op)) && len(op) > len(best) {
			best = op
		}
	}
	if best != "" {
		return best
	}
	return g.Node[0].GetOpType()
}

// tensorSequence reports whether a type is a sequence of tensors.
func tensorSequence(t *onnxpb.TypeProto) bool {
	s := t.GetSequenceType()
	return s != nil && s.GetElemType().GetTensorType() != nil
}

// readValue reads a TensorProto, or a SequenceProto of tensors when seq.
func readValue(path string, seq bool) (*tensor.Tensor, error) {
	if !seq {
		t, _, err := onnx.DecodeTensorFile(path)
		return t, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sp onnxpb.SequenceProto
	if err := proto.Unmarshal(b, &sp); err != nil {
		return nil, fmt.Errorf("%s: decoding SequenceProto: %w", path, err)
	}
	if sp.GetElemType() != 1 { // TENSOR
		return nil, skipError{fmt.Sprintf("%s: sequences of non-tensors are not supported", path)}
	}
	var elems []*tensor.Tensor
	for _, tp := range sp.TensorValues {
		t, err := onnx.TensorFromProto(tp, "")
		if err != nil {
			return nil, err
		}
		elems = append(elems, t)
	}
	return tensor.NewSequence(elems), nil
}

// Compare checks got against want: same dtype and shape, elements within
// tolerance. Sequences compare element by element.
func Compare(got, want *tensor.Tensor, rtol, atol float64) error {
	if got == nil {
		return fmt.Errorf("missing")
	}
	if want.DType == tensor.Sequence || got.DType == tensor.Sequence {
		if got.DType != want.DType || len(got.Elems()) != len(want.Elems()) {
			return fmt.Errorf("got %v with %d elements, want %v with %d", got.DType, len(got.Elems()), want.DType, len(want.Elems()))
		}
		for i := range want.Elems() {
			if err := Compare(got.Elems()[i], want.Elems()[i], rtol, atol); err != nil {
				return fmt.Errorf("sequence element %d: %w", i, err)
			}
		}
		return nil
	}
	if got.DType != want.DType {
		return fmt.Errorf("dtype %v, want %v", got.DType, want.DType)
	}
	if tensor.ShapeString(got.Shape) != tensor.ShapeString(want.Shape) {
		return fmt.Errorf("shape %s, want %s", tensor.ShapeString(got.Shape), tensor.ShapeString(want.Shape))
	}
	if s, ok := want.Data.([]string); ok {
		g := got.Data.([]string)
		for i := range s {
			if s[i] != g[i] {
				return fmt.Errorf("element %d: %q, want %q", i, g[i], s[i])
			}
		}
		return nil
	}
	gv, _ := got.Float64s()
	wv, _ := want.Float64s()
	exact := !want.DType.IsFloat()
	for i := range wv {
		a, b := gv[i], wv[i]
		if exact {
			if !sameInt(got, want, i) {
				return fmt.Errorf("element %d: %v, want %v", i, a, b)
			}
			continue
		}
		if math.IsNaN(b) {
			if !math.IsNaN(a) {
				return fmt.Errorf("element %d: %v, want NaN", i, a)
			}
			continue
		}
		if math.IsInf(b, 0) {
			if a != b {
				return fmt.Errorf("element %d: %v, want %v", i, a, b)
			}
			continue
		}
		if math.IsNaN(a) || math.Abs(a-b) > atol+rtol*math.Abs(b) {
			return fmt.Errorf("element %d: %v, want %v (|diff| %.3g > %.3g)", i, a, b, math.Abs(a-b), atol+rtol*math.Abs(b))
		}
	}
	return nil
}

// sameInt compares integer elements without going through float64, which
// would lose the low bits of large int64 and uint64 values.
func sameInt(got, want *tensor.Tensor, i int) bool {
	switch w := want.Data.(type) {
	case []int64:
		return got.Data.([]int64)[i] == w[i]
	case []uint64:
		return got.Data.([]uint64)[i] == w[i]
	}
	g, _ := got.Float64s()
	wv, _ := want.Float64s()
	return g[i] == wv[i]
}

// Counts tallies results per operator.
type Counts struct{ Pass, Fail, Skip int }

// Markdown renders results as the committed conformance.md: totals per
// suite, per-operator counts and the reason for every test that does not pass.
func Markdown(results []Result, command string) string {
	var b strings.Builder
	b.WriteString("# ONNX backend conformance\n\n")
	fmt.Fprintf(&b, "Generated by `%s` from Debian's libonnx-testdata (ONNX 1.12 test data).\n", command)
	fmt.Fprintf(&b, "Tolerances: rtol %g, atol %g (ONNX Runtime's). Shape inference must also predict each output.\n\n", RTol, ATol)
	b.WriteString("| suite | pass | fail | skip | total |\n|---|---|---|---|---|\n")
	for _, s := range Suites {
		var c Counts
		for _, r := range results {
			if r.Suite == s {
				add(&c, r.Status)
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", s, c.Pass, c.Fail, c.Skip, c.Pass+c.Fail+c.Skip)
	}
	byOp := map[string]*Counts{}
	for _, r := range results {
		if r.Suite != "node" {
			continue
		}
		c := byOp[r.Op]
		if c == nil {
			c = &Counts{}
			byOp[r.Op] = c
		}
		add(c, r.Status)
	}
	ops := make([]string, 0, len(byOp))
	for op := range byOp {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	b.WriteString("\n## Node tests by operator\n\n| operator | pass | fail | skip |\n|---|---|---|---|\n")
	for _, op := range ops {
		c := byOp[op]
		fmt.Fprintf(&b, "| %s | %d | %d | %d |\n", op, c.Pass, c.Fail, c.Skip)
	}
	b.WriteString("\n## Tests that do not pass\n\n| test | status | reason |\n|---|---|---|\n")
	for _, r := range results {
		if r.Status != Pass {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", r.ID(), r.Status, strings.ReplaceAll(r.Reason, "|", "\\|"))
		}
	}
	return b.String()
}

func add(c *Counts, s Status) {
	switch s {
	case Pass:
		c.Pass++
	case Fail:
		c.Fail++
	case Skip:
		c.Skip++
	}
}

// asDeclared reinterprets test data stored as uint16 where the model
// declares bfloat16: ONNX 1.12's test generator wrote bfloat16 tensors
// with the uint16 data type (the bits are the same).
func asDeclared(t *tensor.Tensor, declared tensor.DType) *tensor.Tensor {
	if declared != tensor.BFloat16 || t.DType != tensor.Uint16 {
		return t
	}
	src := t.Data.([]uint16)
	dst := make([]tensor.BHalf, len(src))
	for i, v := range src {
		dst[i] = tensor.BHalf(v)
	}
	return &tensor.Tensor{DType: tensor.BFloat16, Shape: t.Shape, Data: dst}
}
