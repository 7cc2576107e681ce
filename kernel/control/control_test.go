package control

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/vouchml/vouch/conformance"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// testOps are minimal stand-ins for the operators the control-flow tests'
// bodies use, so that this package is tested independently of the other
// families. They support only what those bodies need.
func testOps() kernel.Table {
	return kernel.Table{
		"Identity": {Run: func(_ *kernel.Ctx, _ *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			return []*tensor.Tensor{in[0]}, nil
		}, Infer: kernel.InferSame(0)},
		"Constant": {Run: func(_ *kernel.Ctx, n *ir.Node, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
			return []*tensor.Tensor{n.Attrs["value"].T}, nil
		}, Infer: func(n *ir.Node, _ []ir.InferInput) ([]ir.Type, error) {
			return []ir.Type{ir.TensorType(n.Attrs["value"].T)}, nil
		}},
		"Add": {Run: func(_ *kernel.Ctx, _ *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			a, _ := in[0].Float64s()
			b, _ := in[1].Float64s()
			shape, err := kernel.BroadcastShapes(in[0].Shape, in[1].Shape)
			if err != nil {
				return nil, err
			}
			out := make([]float64, tensor.NumElems(shape))
			kernel.Broadcast2(shape, in[0].Shape, in[1].Shape, func(i, ia, ib int) { out[i] = a[ia] + b[ib] })
			return []*tensor.Tensor{tensor.FromFloat64s(in[0].DType, shape, out)}, nil
		}},
		"Less": {Run: func(_ *kernel.Ctx, _ *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			a, _ := in[0].Float64s()
			b, _ := in[1].Float64s()
			return []*tensor.Tensor{tensor.Scalar(a[0] < b[0])}, nil
		}},
		"Unsqueeze": {Run: func(_ *kernel.Ctx, _ *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			return []*tensor.Tensor{in[0].Reshaped(append([]int{1}, in[0].Shape...)...)}, nil
		}},
		"Slice": {Run: func(_ *kernel.Ctx, _ *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			s, _ := in[1].Int64s()
			e, _ := in[2].Int64s()
			x := in[0].Data.([]float32)
			return []*tensor.Tensor{tensor.From(append([]float32{}, x[s[0]:e[0]]...), int(e[0]-s[0]))}, nil
		}},
	}
}

func testRegistry() *kernel.Registry {
	return kernel.NewRegistry("", Ops(), testOps())
}

// TestBackend runs the ONNX backend tests of If, Loop and Scan with the
// stand-in operators above.
func TestBackend(t *testing.T) {
	if _, err := os.Stat(conformance.DefaultRoot); err != nil {
		t.Skip("ONNX backend test data not installed")
	}
	for _, name := range []string{"test_if", "test_loop11", "test_scan_sum", "test_scan9_sum"} {
		r := conformance.RunTest(conformance.DefaultRoot, "node", name, testRegistry(), time.Minute)
		if r.Status != conformance.Pass {
			t.Errorf("%s: %s: %s", name, r.Status, r.Reason)
		}
	}
}

func f32(shape []int, v ...float32) *tensor.Tensor { return tensor.From(v, shape...) }

func val(name string, dt tensor.DType, shape ...int) *ir.Value {
	return &ir.Value{Name: name, Type: ir.StaticType(dt, shape)}
}

func run(t *testing.T, g *ir.Graph, in map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	t.Helper()
	ex, err := exec.New(g, testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return ex.Run(in)
}

func node(op string, version int64, ins, outs []string, attrs ...*ir.Attr) *ir.Node {
	n := &ir.Node{Name: op, OpType: op, Version: version, Inputs: ins, Outputs: outs, Attrs: map[string]*ir.Attr{}}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	return n
}

func ints(name string, v ...int64) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrInts, Ints: v}
}

// sumBody: (state, x) -> (state+x, state+x).
func sumBody(elem int) *ir.Graph {
	return &ir.Graph{
		Name:    "body",
		Inputs:  []*ir.Value{val("s", tensor.Float32, elem), val("x", tensor.Float32, elem)},
		Outputs: []*ir.Value{val("s2", tensor.Float32, elem), val("y", tensor.Float32, elem)},
		Nodes: []*ir.Node{
			node("Add", 13, []string{"s", "x"}, []string{"s2"}),
			node("Identity", 13, []string{"s2"}, []string{"y"}),
		},
	}
}

func TestScanAxesAndDirections(t *testing.T) {
	body := sumBody(2)
	sc := node("Scan", 11, []string{"init", "x"}, []string{"final", "ys"},
		&ir.Attr{Name: "body", Kind: ir.AttrGraph, G: body},
		&ir.Attr{Name: "num_scan_inputs", Kind: ir.AttrInt, I: 1},
		ints("scan_input_axes", 1), ints("scan_input_directions", 1),
		ints("scan_output_axes", -1), ints("scan_output_directions", 0))
	g := &ir.Graph{
		Name:    "main",
		Inputs:  []*ir.Value{val("init", tensor.Float32, 2), val("x", tensor.Float32, 2, 3)},
		Outputs: []*ir.Value{val("final", tensor.Float32, 2), val("ys", tensor.Float32, 2, 3)},
		Nodes:   []*ir.Node{sc},
	}
	// x[:, t] for t = 2, 1, 0 (reverse): [3,6], [2,5], [1,4].
	out, err := run(t, g, map[string]*tensor.Tensor{
		"init": f32([]int{2}, 0, 0),
		"x":    f32([]int{2, 3}, 1, 2, 3, 4, 5, 6),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(out["final"].Data); got != "[6 15]" {
		t.Errorf("final = %s, want [6 15]", got)
	}
	// Output axis -1: ys[i, t] = running sum after iteration t.
	if got := fmt.Sprint(out["ys"].Shape, out["ys"].Data); got != "[2 3] [3 5 6 6 11 15]" {
		t.Errorf("ys = %s", got)
	}
	types, err := inferScan(sc, []ir.InferInput{
		{Present: true, Type: ir.StaticType(tensor.Float32, []int{2})},
		{Present: true, Type: ir.StaticType(tensor.Float32, []int{2, 3})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(types); got != "[float32[2] float32[2,3]]" {
		t.Errorf("inferred %s", got)
	}
}

func TestScan8SequenceLens(t *testing.T) {
	body := sumBody(1)
	sc := node("Scan", 8, []string{"lens", "init", "x"}, []string{"final", "ys"},
		&ir.Attr{Name: "body", Kind: ir.AttrGraph, G: body},
		&ir.Attr{Name: "num_scan_inputs", Kind: ir.AttrInt, I: 1},
		ints("directions", 1))
	g := &ir.Graph{
		Name:    "main",
		Inputs:  []*ir.Value{val("lens", tensor.Int64, 2), val("init", tensor.Float32, 2, 1), val("x", tensor.Float32, 2, 3, 1)},
		Outputs: []*ir.Value{val("final", tensor.Float32, 2, 1), val("ys", tensor.Float32, 2, 3, 1)},
		Nodes:   []*ir.Node{sc},
	}
	out, err := run(t, g, map[string]*tensor.Tensor{
		"lens": tensor.From([]int64{3, 2}, 2),
		"init": f32([]int{2, 1}, 0, 100),
		"x":    f32([]int{2, 3, 1}, 1, 2, 3, 4, 5, 6),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Batch 1 scans only [4, 5], in reverse: 105, 109, then zero padding.
	if got := fmt.Sprint(out["final"].Data, out["ys"].Data); got != "[6 109] [3 5 6 105 109 0]" {
		t.Errorf("got %s", got)
	}
}

func TestLoopTripCountAndCond(t *testing.T) {
	// body: (i, c, acc) -> (i+1 < 3... , acc + i, acc + i)
	body := &ir.Graph{
		Name:    "body",
		Inputs:  []*ir.Value{val("i", tensor.Int64), val("c", tensor.Bool), val("acc", tensor.Int64)},
		Outputs: []*ir.Value{val("c2", tensor.Bool), val("acc2", tensor.Int64), val("scan", tensor.Int64)},
		Nodes: []*ir.Node{
			node("Add", 13, []string{"acc", "i"}, []string{"acc2"}),
			node("Less", 13, []string{"acc2", "limit"}, []string{"c2"}),
			node("Identity", 13, []string{"acc2"}, []string{"scan"}),
		},
	}
	loop := node("Loop", 13, []string{"M", "cond", "init"}, []string{"acc", "all"},
		&ir.Attr{Name: "body", Kind: ir.AttrGraph, G: body})
	g := &ir.Graph{
		Name:    "main",
		Inputs:  []*ir.Value{val("M", tensor.Int64), val("cond", tensor.Bool), val("init", tensor.Int64), val("limit", tensor.Int64)},
		Outputs: []*ir.Value{{Name: "acc", Type: ir.Type{DType: tensor.Int64}}, {Name: "all", Type: ir.Type{DType: tensor.Int64}}},
		Nodes:   []*ir.Node{loop},
	}
	cases := []struct {
		m     int64
		cond  bool
		limit int64
		want  string
	}{
		{10, true, 100, "45 [10] [0 1 3 6 10 15 21 28 36 45]"},
		{10, true, 5, "6 [4] [0 1 3 6]"}, // stops once acc2 >= 5
		{10, false, 100, "0 [0] []"},     // cond is checked before the first iteration
		{0, true, 100, "0 [0] []"},
	}
	for _, c := range cases {
		out, err := run(t, g, map[string]*tensor.Tensor{
			"M": tensor.Scalar(c.m), "cond": tensor.Scalar(c.cond), "init": tensor.Scalar(int64(0)), "limit": tensor.Scalar(c.limit),
		})
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint(out["acc"].Data.([]int64)[0], out["all"].Shape, out["all"].Data)
		if got != c.want {
			t.Errorf("M=%d cond=%v limit=%d: got %s, want %s", c.m, c.cond, c.limit, got, c.want)
		}
	}
	types, err := inferLoop(loop, []ir.InferInput{
		{Present: true, Type: ir.StaticType(tensor.Int64, nil), Const: tensor.Scalar(int64(4))},
		{},
		{Present: true, Type: ir.StaticType(tensor.Int64, nil)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(types); got != "[int64[] int64[4]]" {
		t.Errorf("inferred %s", got)
	}
}

func TestLoopRefusesEndless(t *testing.T) {
	loop := node("Loop", 13, []string{"", ""}, nil, &ir.Attr{Name: "body", Kind: ir.AttrGraph, G: &ir.Graph{
		Inputs: []*ir.Value{val("i", tensor.Int64), val("c", tensor.Bool)}, Outputs: []*ir.Value{val("c", tensor.Bool)},
	}})
	if _, err := runLoop(&kernel.Ctx{Sub: nilRunner{}}, loop, []*tensor.Tensor{nil, nil}); err == nil {
		t.Fatal("expected an error")
	}
}

type nilRunner struct{}

func (nilRunner) RunSubgraph(*ir.Graph, []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return nil, fmt.Errorf("not expected")
}

func TestIfBadCond(t *testing.T) {
	n := node("If", 13, []string{"c"}, []string{"y"})
	for _, c := range []*tensor.Tensor{nil, tensor.Scalar(int64(1)), tensor.From([]bool{true, false}, 2)} {
		if _, err := runIf(&kernel.Ctx{Sub: nilRunner{}}, n, []*tensor.Tensor{c}); err == nil {
			t.Errorf("cond %v: expected an error", c)
		}
	}
}
