package compile_test

import (
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// chainModel is a small fp32 CNN with int8 chains: x → conv 3×3 → Relu →
// a → conv 3×3 stride 2 → Relu → b; b → conv 1×1 → Relu → c and b → conv
// 3×3 → d (b has two int8 readers); c + d → Relu → conv 1×1 → out. With
// depthwise, a MobileNet-style chain of depthwise layers instead.
func chainModel(depthwise bool) *ir.Model {
	r := rand.New(rand.NewPCG(8, 9))
	inits := map[string]*tensor.Tensor{}
	var nodes []*ir.Node
	conv := func(name, x, y string, cin, cout, k, stride int) {
		group := 1
		if cin < 0 { // depthwise
			cin, group = 1, cout
		}
		w := make([]float32, cout*cin*k*k)
		for i := range w {
			w[i] = float32(r.NormFloat64() * 0.2)
		}
		b := make([]float32, cout)
		for i := range b {
			b[i] = float32(r.NormFloat64() * 0.1)
		}
		inits[name+".w"], inits[name+".b"] = tensor.From(w, cout, cin, k, k), tensor.From(b, cout)
		p := int64(k / 2)
		nodes = append(nodes, &ir.Node{Name: name, OpType: "Conv", Version: 11, Inputs: []string{x, name + ".w", name + ".b"}, Outputs: []string{y},
			Attrs: map[string]*ir.Attr{
				"pads":    {Name: "pads", Kind: ir.AttrInts, Ints: []int64{p, p, p, p}},
				"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(stride), int64(stride)}},
				"group":   {Name: "group", Kind: ir.AttrInt, I: int64(group)},
			}})
	}
	relu := func(name, x, y string) {
		nodes = append(nodes, &ir.Node{Name: name, OpType: "Relu", Version: 14, Inputs: []string{x}, Outputs: []string{y}, Attrs: map[string]*ir.Attr{}})
	}
	if depthwise {
		// x → conv 3×3 → Relu → a → depthwise 3×3 stride 2 → Relu → b →
		// depthwise 5×5 → c → conv 1×1 → out
		conv("c1", "x", "c1y", 8, 32, 3, 1)
		relu("r1", "c1y", "a")
		conv("dw1", "a", "dw1y", -1, 32, 3, 2)
		relu("r2", "dw1y", "b")
		conv("dw2", "b", "c", -1, 32, 5, 1)
		conv("c5", "c", "out", 32, 16, 1, 1)
	} else {
		conv("c1", "x", "c1y", 8, 24, 3, 1)
		relu("r1", "c1y", "a")
		conv("c2", "a", "c2y", 24, 32, 3, 2)
		relu("r2", "c2y", "b")
		conv("c3", "b", "c3y", 32, 32, 1, 1)
		relu("r3", "c3y", "c")
		conv("c4", "b", "d", 32, 32, 3, 1)
		nodes = append(nodes, &ir.Node{Name: "add", OpType: "Add", Version: 14, Inputs: []string{"c", "d"}, Outputs: []string{"e"}, Attrs: map[string]*ir.Attr{}})
		relu("r5", "e", "f")
		conv("c5", "f", "out", 32, 16, 1, 1)
	}
	g := &ir.Graph{Name: "chain", Nodes: nodes, Initializers: inits, Types: map[string]ir.Type{},
		Inputs:  []*ir.Value{{Name: "x", Type: ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{{Param: "N"}, {Value: 8}, {Value: 12}, {Value: 14}}}}},
		Outputs: []*ir.Value{{Name: "out"}}}
	return &ir.Model{Graph: g, IRVersion: 8, Opsets: map[string]int64{"": 14}}
}

func normalBatch(r *rand.Rand, n int) *tensor.Tensor {
	x := make([]float32, n*8*12*14)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return tensor.From(x, n, 8, 12, 14)
}

// TestInt8ChainsBuild: the int8 build passes the chainable activations
// as u8 (the report lists them and the check that ran, the plan holds the
// attributes), and its outputs have the bits of the same build without
// the int8-chains pass at every level, 1 and 2 threads, batch 1 and 3.
func TestInt8ChainsBuild(t *testing.T) { testInt8Chains(t, false) }

// TestInt8DepthwiseBuild: the same with depthwise layers, which stay fp32
// by default (the reason in the report) and run the int8 depthwise kernel
// when --layer-precision asks, chained on both sides.
func TestInt8DepthwiseBuild(t *testing.T) { testInt8Chains(t, true) }

func testInt8Chains(t *testing.T, depthwise bool) {
	r := rand.New(rand.NewPCG(10, 11))
	o := compile.DefaultOptions()
	o.Tactics = "heuristic"
	o.Precision = "int8"
	for i := 0; i < 4; i++ {
		o.Quant.Calib = append(o.Quant.Calib, normalBatch(r, 1))
	}
	o.Quant.EvalData = []*tensor.Tensor{normalBatch(r, 1), normalBatch(r, 1), normalBatch(r, 1)}
	buildWith := func(o compile.Options) (*compile.Result, *plan.Plan) {
		t.Helper()
		res, err := compile.Build(chainModel(depthwise), []byte("chain"), "chain", "test", o, builtin.Registry(), buildlog.New(nil))
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Decode(res.Plan)
		if err != nil {
			t.Fatal(err)
		}
		return res, p
	}
	if depthwise {
		d, _ := buildWith(o)
		kept := 0
		for _, l := range d.Report.Precision.Layers {
			if strings.HasPrefix(l.Layer, "dw") && l.Precision == "fp32" && strings.Contains(l.Reason, "depthwise") {
				kept++
			}
		}
		if kept != 2 {
			t.Fatalf("by default %d depthwise layers kept fp32 with the reason, want 2: %+v", kept, d.Report.Precision.Layers)
		}
		o.Quant.LayerPrecision = map[string]string{"dw1": "int8", "dw2": "int8"}
	}
	resA, pa := buildWith(o)
	ob := o
	ob.DisabledPasses = []string{"int8-chains"}
	resB, pb := buildWith(ob)

	e := resA.Report.Precision.Int8Edges
	if e == nil || len(e.Edges) < 2 || e.Verified != 2 || e.VerifiedOn != "evaluation data" {
		t.Fatalf("int8 edges %+v: want a and b (at least), verified on 2 evaluation inputs", e)
	}
	var tensors []string
	for _, x := range e.Edges {
		tensors = append(tensors, x.Tensor)
	}
	if !slices.Contains(tensors, "a") || !slices.Contains(tensors, "b") || (depthwise && !slices.Contains(tensors, "c")) {
		t.Fatalf("int8 edges on %v, want a and b (and c) among them", tensors)
	}
	for _, x := range e.Edges {
		if x.Tensor == "b" && len(x.Consumers) != 2 && !depthwise {
			t.Fatalf("b's consumers %v, want c3 and c4", x.Consumers)
		}
	}
	ca, cb := compile.Int8Chains(pa.Graph), compile.Int8Chains(pb.Graph)
	if ca.U8() != len(e.Edges) || cb.U8() != 0 || len(cb.Chains) != len(e.Edges) {
		t.Fatalf("plans' u8 edges: %s; without the pass %s", ca.Summary(), cb.Summary())
	}
	if resB.Report.Precision.Int8Edges != nil {
		t.Fatalf("the build without the pass reports edges %+v", resB.Report.Precision.Int8Edges)
	}
	if !reflect.DeepEqual(resA.Report.Precision.Accuracy, resB.Report.Precision.Accuracy) {
		t.Fatalf("accuracy %+v, without the pass %+v", resA.Report.Precision.Accuracy, resB.Report.Precision.Accuracy)
	}
	// The u8 values are uint8 in the plan's graph.
	if err := ir.Infer(pa.Graph, builtin.Registry(), nil); err != nil {
		t.Fatal(err)
	}
	if ty := pa.Graph.Types["a"]; ty.DType != tensor.Uint8 {
		t.Fatalf("a is %v in the plan, want uint8", ty.DType)
	}

	run := func(p *plan.Plan, x *tensor.Tensor, cpu exec.CPU) *tensor.Tensor {
		t.Helper()
		ex, err := exec.New(p.Graph, builtin.Registry())
		if err != nil {
			t.Fatal(err)
		}
		if err := ex.SetCPU(cpu); err != nil {
			t.Fatal(err)
		}
		out, err := ex.Run(map[string]*tensor.Tensor{"x": x})
		if err != nil {
			t.Fatal(err)
		}
		return out["out"]
	}
	x3 := normalBatch(r, 3)
	want := run(pb, x3, exec.CPU{ISA: kernel.ISAPortable, Threads: 1})
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for _, threads := range []int{1, 2} {
		runtime.GOMAXPROCS(threads)
		for _, isa := range kernel.ISAs() {
			for _, p := range []*plan.Plan{pa, pb} {
				if got := run(p, x3, exec.CPU{ISA: isa, Threads: threads}); !sameBits(got, want) {
					t.Fatalf("%v, %d threads, u8 edges %d: output differs", isa, threads, compile.Int8Chains(p.Graph).U8())
				}
			}
		}
	}
	// A row alone has the bits of its row in the batch.
	per := want.Len() / 3
	xd := x3.Data.([]float32)
	for i := 0; i < 3; i++ {
		one := tensor.From(slices.Clone(xd[i*8*12*14:(i+1)*8*12*14]), 1, 8, 12, 14)
		got := run(pa, one, exec.CPU{ISA: kernel.ISABest, Threads: 1})
		if !slices.Equal(tensor.RawBytes(got), tensor.RawBytes(want)[4*i*per:4*(i+1)*per]) {
			t.Fatalf("row %d alone differs from the batch of 3", i)
		}
	}
}
