package bench

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx/onnxpb"
	"github.com/vouchml/vouch/tensor"
)

// zooTensor is a float32 TensorProto.
func zooTensor(name string, dims []int64, v []float32) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), Dims: dims, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), FloatData: v}
}

func zooValue(name string, dims ...int64) *onnxpb.ValueInfoProto {
	var sh []*onnxpb.TensorShapeProto_Dimension
	for _, d := range dims {
		sh = append(sh, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Shape: &onnxpb.TensorShapeProto{Dim: sh}}}}}
}

// writeZooModel writes DIR/name/model.onnx (y = op(x·W + b), x [1,k], W
// [k,n]) with the reference input x and output want.
func writeZooModel(t *testing.T, dir, name, op string, k, n int, want func(y []float32)) {
	t.Helper()
	w, b, x := make([]float32, k*n), make([]float32, n), make([]float32, k)
	for i := range w {
		w[i] = float32(i%7-3) / 4
	}
	for i := range b {
		b[i] = float32(i%3) - 1
	}
	for i := range x {
		x[i] = float32(i%5) - 2
	}
	nodes := []*onnxpb.NodeProto{
		{OpType: proto.String("MatMul"), Input: []string{"x", "W"}, Output: []string{"xw"}},
		{OpType: proto.String("Add"), Input: []string{"xw", "b"}, Output: []string{"z"}},
		{OpType: proto.String(op), Input: []string{"z"}, Output: []string{"y"}},
	}
	m := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}},
		Graph: &onnxpb.GraphProto{Name: proto.String(name), Node: nodes,
			Input: []*onnxpb.ValueInfoProto{zooValue("x", 1, int64(k))}, Output: []*onnxpb.ValueInfoProto{zooValue("y", 1, int64(n))},
			Initializer: []*onnxpb.TensorProto{zooTensor("W", []int64{int64(k), int64(n)}, w), zooTensor("b", []int64{int64(n)}, b)}},
	}
	y := make([]float32, n)
	for j := range y {
		acc := float64(b[j])
		for i := range x {
			acc += float64(x[i]) * float64(w[i*n+j])
		}
		y[j] = float32(math.Max(acc, 0)) // Relu; the other ops here are not meant to match
	}
	want(y)
	d := filepath.Join(dir, name, "test_data_set_0")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(path string, msg proto.Message) {
		raw, err := proto.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, name, "model.onnx"), m)
	write(filepath.Join(d, "input_0.pb"), zooTensor("x", []int64{1, int64(k)}, x))
	write(filepath.Join(d, "output_0.pb"), zooTensor("y", []int64{1, int64(n)}, y))
}

// TestZoo runs a generated zoo: a model that matches, one whose reference
// is wrong, one with an operator vouch does not know and one without its
// test data; each is a row with its status and reason, and the run goes on.
func TestZoo(t *testing.T) {
	dir := t.TempDir()
	writeZooModel(t, dir, "mlp_ok", "Relu", 24, 16, func([]float32) {})
	writeZooModel(t, dir, "mlp_wrong", "Relu", 8, 4, func(y []float32) { y[2] += 0.5 })
	writeZooModel(t, dir, "mlp_unknown_op", "NoSuchOperator", 8, 4, func([]float32) {})
	writeZooModel(t, dir, "mlp_no_data", "Relu", 8, 4, func([]float32) {})
	if err := os.Remove(filepath.Join(dir, "mlp_no_data", "test_data_set_0", "output_0.pb")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "not_a_model"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A model linked from another directory counts.
	other := t.TempDir()
	writeZooModel(t, other, "mlp_linked", "Relu", 8, 4, func([]float32) {})
	if err := os.Symlink(filepath.Join(other, "mlp_linked"), filepath.Join(dir, "mlp_linked")); err != nil {
		t.Fatal(err)
	}
	var progress []string
	rows, err := Zoo(context.Background(), dir, ZooOptions{Runs: 3, Progress: func(r ZooRow) { progress = append(progress, r.Model) }})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		status ZooStatus
		reason string
	}{
		"mlp_ok":         {ZooOK, ""},
		"mlp_linked":     {ZooOK, ""},
		"mlp_wrong":      {ZooMismatch, `output "y": element 2`},
		"mlp_unknown_op": {ZooFailed, "NoSuchOperator"},
		"mlp_no_data":    {ZooFailed, "reference output"},
	}
	if len(rows) != len(want) || len(progress) != len(want) {
		t.Fatalf("%d rows, %d progress calls, want %d: %+v", len(rows), len(progress), len(want), rows)
	}
	for _, r := range rows {
		w, ok := want[r.Model]
		if !ok {
			t.Errorf("unexpected row %q", r.Model)
			continue
		}
		if r.Status != w.status || !strings.Contains(r.Reason, w.reason) || (w.reason == "" && r.Reason != "") {
			t.Errorf("%s: status %s, reason %q; want %s, reason containing %q", r.Model, r.Status, r.Reason, w.status, w.reason)
		}
		if r.Nodes != 3 {
			t.Errorf("%s: %d ONNX nodes, want 3", r.Model, r.Nodes)
		}
		if r.Status != ZooFailed && (r.Layers < 1 || r.Vouch <= 0 || r.Runs < 3) {
			t.Errorf("%s: not timed: %+v", r.Model, r)
		}
		if r.Status != ZooFailed && !r.ThreadInvariant {
			t.Errorf("%s: not bit-identical at 1 and 2 threads: %s", r.Model, r.Reason)
		}
		if r.Status == ZooMismatch && math.Abs(r.MaxAbsErr-0.5) > 1e-6 {
			t.Errorf("%s: max abs err %v, want 0.5", r.Model, r.MaxAbsErr)
		}
	}
	var buf bytes.Buffer
	if err := WriteZooTable(&buf, rows, "ort"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| mlp_ok | 3 → ", "mismatch: output", "failed: ", "5 models: 0 compared with ort; 1 mismatched, 2 failed; 3 of 3 run bit-identical at 1 and 2 threads"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, buf.String())
		}
	}

	// Batch 4: the reference is tiled, every row checked.
	rows, err = Zoo(context.Background(), dir, ZooOptions{Runs: 3, Batch: 4, Only: []string{"mlp_ok", "mlp_wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Status != ZooOK || rows[1].Status != ZooMismatch || !strings.Contains(rows[1].Reason, "element 2") {
		t.Errorf("batch 4: %+v", rows)
	}
	if _, err := Zoo(context.Background(), dir, ZooOptions{Only: []string{"nope"}}); err == nil {
		t.Error("an unknown model name: no error")
	}
	if _, err := Zoo(context.Background(), t.TempDir(), ZooOptions{}); err == nil {
		t.Error("an empty zoo: no error")
	}
}

// TestZooPeer compares with ONNX Runtime where the peer is built in and its
// library is given ($VOUCH_ORT_LIB), as CI has it.
func TestZooPeer(t *testing.T) {
	lib := os.Getenv("VOUCH_ORT_LIB")
	if !ORTBuilt || lib == "" {
		if os.Getenv("VOUCH_CI") != "" && ORTBuilt {
			t.Fatal("VOUCH_CI is set and the ort peer is built, but VOUCH_ORT_LIB is not")
		}
		t.Skip("needs -tags ort and VOUCH_ORT_LIB")
	}
	dir := t.TempDir()
	writeZooModel(t, dir, "mlp_ok", "Relu", 24, 16, func([]float32) {})
	rows, err := Zoo(context.Background(), dir, ZooOptions{Runs: 3, Peer: "ort", Config: PeerConfig{Threads: 1, ORTLib: lib}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Status != ZooOK || rows[0].Peer <= 0 || rows[0].Ratio <= 0 || rows[0].Reason != "" {
		t.Fatalf("%+v", rows)
	}
	if e := rows[0].PeerMaxAbsErr; e > 1e-5 {
		t.Errorf("ORT's outputs are %v from the reference", e)
	}
	if s := SummarizeZoo(rows); s.Compared != 1 || math.Abs(s.Geomean-rows[0].Ratio) > 1e-12 || s.Worst.Model != "mlp_ok" {
		t.Errorf("summary %+v", s)
	}
}

func TestSummarizeZoo(t *testing.T) {
	rows := []ZooRow{
		{Model: "a", Status: ZooOK, Ratio: 0.5},
		{Model: "b", Status: ZooOK, Ratio: 2},
		{Model: "c", Status: ZooOK, Ratio: 4},
		{Model: "d", Status: ZooMismatch, Ratio: 8}, // timed: counts for speed
		{Model: "e", Status: ZooFailed, Ratio: 100},
		{Model: "f", Status: ZooOK}, // the peer did not run
	}
	s := SummarizeZoo(rows)
	if s.Models != 6 || s.Compared != 4 || s.Mismatched != 1 || s.Failed != 1 || s.Worst.Model != "d" {
		t.Fatalf("%+v", s)
	}
	if want := math.Pow(0.5*2*4*8, 0.25); math.Abs(s.Geomean-want) > 1e-12 {
		t.Errorf("geomean %v, want %v", s.Geomean, want)
	}
}

// TestThreadBits: the zoo's thread check names an output whose bits
// differ from the run it checks, and passes the same bits.
func TestThreadBits(t *testing.T) {
	dir := t.TempDir()
	writeZooModel(t, dir, "m", "Relu", 24, 16, func([]float32) {})
	var row ZooRow
	m, _, err := loadZooModel(filepath.Join(dir, "m"), "m", ZooOptions{}.withDefaults(), &row)
	if err != nil {
		t.Fatal(err)
	}
	g := m.Plan.Graph
	in := []*tensor.Tensor{m.Inputs[g.Inputs[0].Name]}
	shapes := [][]int{in[0].Shape}
	ex, err := exec.New(g, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ex.Bind(shapes)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Execute(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []*tensor.Tensor{got[0].Clone()}
	if why := threadBits(g, shapes, in, want, 2); why != "" {
		t.Fatalf("the same bits: %s", why)
	}
	v := want[0].Data.([]float32)
	v[3] = math.Nextafter32(v[3], float32(math.Inf(1)))
	if why := threadBits(g, shapes, in, want, 1); !strings.Contains(why, `output "y" differs at 1 threads`) {
		t.Fatalf("one ulp off: %q", why)
	}
}
