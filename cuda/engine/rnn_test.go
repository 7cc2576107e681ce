package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	. "github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// rnnGraph is one recurrent node over typed values: X [seq, batch, in]
// of dt, float32 weights, int32 sequence_lens where lens.
func rnnGraph(op string, dt tensor.DType, lens bool, attrs ...*ir.Attr) (*ir.Graph, map[string]ir.Type) {
	n := &ir.Node{Name: "cell", OpType: op, Version: 14, Attrs: map[string]*ir.Attr{}, Inputs: []string{"x", "w", "r", "b"}, Outputs: []string{"y", "yh"}}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	f := func(d tensor.DType, dims ...int) ir.Type {
		t := ir.Type{DType: d, RankKnown: true}
		for _, v := range dims {
			t.Shape = append(t.Shape, ir.Fixed(v))
		}
		return t
	}
	types := map[string]ir.Type{"x": f(dt, 5, 2, 3), "w": f(tensor.Float32, 1, 12, 3), "r": f(tensor.Float32, 1, 12, 4), "b": f(tensor.Float32, 1, 24)}
	if lens {
		n.Inputs = append(n.Inputs, "lens")
		types["lens"] = f(tensor.Int32, 2)
	}
	return &ir.Graph{Nodes: []*ir.Node{n}}, types
}

func strsAttr(name string, v ...string) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrStrings, Strings: v}
}

// Recurrent layers: placed with their kernels, or kept with a reason.
func TestPlaceRNN(t *testing.T) {
	step := "vx_rnn_start+vx_copy+vx_rnn_proj+vx_rnn_step+vx_rnn_final"
	for _, c := range []struct {
		name        string
		op          string
		dt          tensor.DType
		lens        bool
		attrs       []*ir.Attr
		kernel, why string
	}{
		{"lstm", "LSTM", tensor.Float32, false, nil, step, ""},
		{"lstm bidirectional, lens, clip", "LSTM", tensor.Float32, true, []*ir.Attr{{Name: "direction", Kind: ir.AttrString, S: "bidirectional"}, {Name: "clip", Kind: ir.AttrFloat, F: 3}}, step, ""},
		{"gru lbr", "GRU", tensor.Float32, false, []*ir.Attr{{Name: "linear_before_reset", Kind: ir.AttrInt, I: 1}}, step, ""},
		{"gru", "GRU", tensor.Float32, false, nil, "vx_rnn_start+vx_copy+vx_rnn_proj+vx_rnn_step+vx_rnn_gru_hh+vx_rnn_final", ""},
		{"rnn relu, layout 1", "RNN", tensor.Float32, false, []*ir.Attr{strsAttr("activations", "Relu"), {Name: "layout", Kind: ir.AttrInt, I: 1}}, step, ""},
		{"lstm other activations", "LSTM", tensor.Float32, false, []*ir.Attr{strsAttr("activations", "HardSigmoid", "Softplus", "ScaledTanh")}, step, ""},
		{"float16", "LSTM", tensor.Float16, false, nil, "", "LSTM of other than float32 inputs (the GPU kernels are float32)"},
		{"float64 gru", "GRU", tensor.Float64, false, nil, "", "GRU of other than float32 inputs (the GPU kernels are float32)"},
		{"unknown activation", "RNN", tensor.Float32, false, []*ir.Attr{strsAttr("activations", "Gelu")}, "", `rnn: unknown activation "Gelu"`},
		{"activation count", "GRU", tensor.Float32, false, []*ir.Attr{strsAttr("activations", "Sigmoid")}, "", "rnn: activations has 1 entries, want 2 (2 per direction)"},
		{"direction", "LSTM", tensor.Float32, false, []*ir.Attr{{Name: "direction", Kind: ir.AttrString, S: "sideways"}}, "", `rnn: direction "sideways" is not forward, reverse or bidirectional`},
		{"layout", "LSTM", tensor.Float32, false, []*ir.Attr{{Name: "layout", Kind: ir.AttrInt, I: 2}}, "", "LSTM layout 2"},
		{"clip", "GRU", tensor.Float32, false, []*ir.Attr{{Name: "clip", Kind: ir.AttrFloat, F: -1}}, "", "GRU clip -1 is not positive"},
	} {
		g, types := rnnGraph(c.op, c.dt, c.lens, c.attrs...)
		p := Place(g, types)
		if len(p) != 1 {
			t.Fatalf("%s: %d placements", c.name, len(p))
		}
		l := p[0]
		if c.why == "" && (l.Backend != plan.BackendCUDA || l.Kernel != c.kernel) {
			t.Errorf("%s: placed %s %q (%s), want cuda %q", c.name, l.Backend, l.Kernel, l.Reason, c.kernel)
		}
		if c.why != "" && (l.Backend != plan.BackendCPU || l.Reason != c.why) {
			t.Errorf("%s: placed %s %q, reason %q; want the CPU with %q", c.name, l.Backend, l.Kernel, l.Reason, c.why)
		}
	}
	// sequence_lens of another type, a missing R, a foreign domain.
	g, types := rnnGraph("LSTM", tensor.Float32, true)
	types["lens"] = ir.Type{DType: tensor.Int64, RankKnown: true, Shape: []ir.Dim{ir.Fixed(2)}}
	if l := Place(g, types)[0]; l.Backend != plan.BackendCPU || l.Reason != "LSTM sequence_lens of int64 (int32 expected)" {
		t.Errorf("int64 lengths: %+v", l)
	}
	g, types = rnnGraph("GRU", tensor.Float32, false)
	g.Nodes[0].Inputs[2] = ""
	if l := Place(g, types)[0]; l.Backend != plan.BackendCPU || l.Reason != "GRU without X, W and R" {
		t.Errorf("no R: %+v", l)
	}
	g, types = rnnGraph("RNN", tensor.Float32, false)
	g.Nodes[0].Domain = "com.example"
	if l := Place(g, types)[0]; l.Backend != plan.BackendCPU || !strings.Contains(l.Reason, "domain") {
		t.Errorf("foreign domain: %+v", l)
	}
}

// compileModel builds an ONNX file as vouch build does.
func compileModel(t *testing.T, path string) *compile.Result {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("%s: %v", path, err)
	}
	m, err := onnx.Decode(src, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	res, err := compile.Build(m, src, filepath.Base(filepath.Dir(path)), "test", compile.DefaultOptions(), builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The ONNX node tests' recurrent models compile to one layer of their
// operator, and it goes on the GPU.
func TestPlaceRNNNodeTests(t *testing.T) {
	dir := "/usr/share/libonnx-testdata/data/node"
	for _, name := range []string{"test_gru_batchwise", "test_gru_defaults", "test_gru_seq_length", "test_gru_with_initial_bias",
		"test_lstm_batchwise", "test_lstm_defaults", "test_lstm_with_initial_bias", "test_lstm_with_peepholes",
		"test_rnn_seq_length", "test_simple_rnn_batchwise", "test_simple_rnn_defaults", "test_simple_rnn_with_initial_bias"} {
		res := compileModel(t, filepath.Join(dir, name, "model.onnx"))
		p := Place(res.Graph, res.Graph.Types)
		rec := 0
		for i, n := range res.Graph.Nodes {
			if n.OpType != "LSTM" && n.OpType != "GRU" && n.OpType != "RNN" {
				continue
			}
			rec++
			if p[i].Backend != plan.BackendCUDA || !strings.Contains(p[i].Kernel, "vx_rnn_step") {
				t.Errorf("%s: layer %s (%s) placed %s %q (%s)", name, p[i].Layer, n.OpType, p[i].Backend, p[i].Kernel, p[i].Reason)
			}
		}
		if rec != 1 {
			var ops []string
			for _, n := range res.Graph.Nodes {
				ops = append(ops, n.OpType)
			}
			t.Errorf("%s: compiled to %v, want one recurrent layer", name, ops)
		}
	}
}

// The zoo's recurrent models (PyTorch's exports, with -zoo): every LSTM
// and GRU layer on the GPU; what stays on the CPU is their Squeeze (of
// the direction axis), which has no GPU kernel.
func TestPlaceZooRNN(t *testing.T) {
	if *flagZoo == "" {
		t.Skip("no -zoo directory")
	}
	found := 0
	for _, name := range []string{"lstm_64x128", "lstm2_128x256", "bilstm_64x128", "bilstm2_256x512", "gru_64x128", "bigru2_128x256", "lstm_classifier"} {
		path := filepath.Join(*flagZoo, name, "model.onnx")
		if _, err := os.Stat(path); err != nil {
			continue
		}
		found++
		res := compileModel(t, path)
		gpu, rec := 0, 0
		for i, l := range Place(res.Graph, res.Graph.Types) {
			n := res.Graph.Nodes[i]
			switch {
			case n.OpType == "LSTM" || n.OpType == "GRU":
				rec++
				if l.Backend != plan.BackendCUDA || !strings.Contains(l.Kernel, "vx_rnn_step") {
					t.Errorf("%s: layer %s (%s) placed %s %q (%s)", name, l.Layer, n.OpType, l.Backend, l.Kernel, l.Reason)
				}
			case l.Backend == plan.BackendCPU && n.OpType != "Squeeze":
				t.Errorf("%s: layer %s (%s) on the CPU: %s", name, l.Layer, n.OpType, l.Reason)
			}
			if l.Backend == plan.BackendCUDA {
				gpu++
			}
		}
		if rec == 0 {
			t.Errorf("%s: no recurrent layer", name)
		}
		t.Logf("%s: %d of %d layers on the GPU", name, gpu, len(res.Graph.Nodes))
	}
	if found == 0 {
		t.Skipf("no recurrent model in %s", *flagZoo)
	}
}
