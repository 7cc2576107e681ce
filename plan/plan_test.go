package plan

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/tensor"
)

func sharedModel(t testing.TB, name string) *ir.Graph {
	m, err := onnx.DecodeFile("../../shared/models/" + name + "/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	return m.Graph
}

func encode(t testing.TB, g *ir.Graph) []byte {
	b, err := Encode(Header{Producer: "test", RequiredFeatures: []string{}, Source: Source{SHA256: "00", Opsets: map[string]int64{"": 13}}}, g,
		map[string]LayerInfo{g.Nodes[0].Name: {Origin: []string{"a", "b"}, Tactic: "portable", Precision: "fp32"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTripSharedModels(t *testing.T) {
	for _, name := range []string{"breast_cancer_mlp", "digits_cnn", "tiny_bert"} {
		g := sharedModel(t, name)
		b := encode(t, g)
		p, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(p.Graph.Nodes) != len(g.Nodes) || len(p.Graph.Initializers) != len(g.Initializers) {
			t.Fatalf("%s: %d nodes/%d weights, want %d/%d", name, len(p.Graph.Nodes), len(p.Graph.Initializers), len(g.Nodes), len(g.Initializers))
		}
		for k, w := range g.Initializers {
			got := p.Graph.Initializers[k]
			if got == nil || !bytes.Equal(tensor.RawBytes(got), tensor.RawBytes(w)) || got.String() != w.String() {
				t.Fatalf("%s: weight %q changed", name, k)
			}
		}
		if l := p.Header.Graph.Layers[0]; l.Tactic != "portable" || len(l.Origin) != 2 {
			t.Fatalf("layer info lost: %+v", l)
		}
		// Re-encoding the decoded plan gives the same bytes: the format is canonical.
		again, err := Encode(p.Header, p.Graph, map[string]LayerInfo{g.Nodes[0].Name: {Origin: []string{"a", "b"}, Tactic: "portable", Precision: "fp32"}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("%s: re-encoding changed the bytes (%d vs %d)", name, len(again), len(b))
		}
		if len(Digest(b)) != 64 {
			t.Fatal("digest")
		}
	}
}

func tinyPlan(t testing.TB) []byte {
	g := &ir.Graph{
		Name:         "g",
		Inputs:       []*ir.Value{{Name: "x", Type: ir.Type{DType: tensor.Float32, Shape: []ir.Dim{{Value: -1, Param: "n"}, ir.Fixed(2)}, RankKnown: true}}},
		Outputs:      []*ir.Value{{Name: "y", Type: ir.Type{DType: tensor.Float32}}},
		Initializers: map[string]*tensor.Tensor{"w": tensor.From([]float32{1, 2}, 2)},
		Nodes: []*ir.Node{{Name: "add", OpType: "Add", Version: 13, Inputs: []string{"x", "w"}, Outputs: []string{"y"},
			Attrs: map[string]*ir.Attr{"alpha": {Name: "alpha", Kind: ir.AttrFloat, F: float32(-0.0)}}}},
	}
	return encode(t, g)
}

func TestTruncatedAndCorrupt(t *testing.T) {
	b := tinyPlan(t)
	for i := 0; i < len(b); i++ {
		if _, err := Decode(b[:i]); err == nil {
			t.Fatalf("truncation at %d of %d accepted", i, len(b))
		}
	}
	v3 := append([]byte("VOUCHPLAN 3\n"), b[len(versionLine):]...)
	if _, err := Decode(v3); err == nil || !strings.Contains(err.Error(), `unsupported format version "3"`) {
		t.Fatalf("version 3: %v", err)
	}
	// A CPU plan's bytes under the GPU plans' version line: no "gpu" object.
	v2 := append([]byte(versionLineGPU), b[len(versionLine):]...)
	if _, err := Decode(v2); err == nil {
		t.Fatal("a version 2 line on a CPU plan accepted")
	}
	if _, err := Decode([]byte("PK\x03\x04 a zip file")); !errors.Is(err, ErrFormat) {
		t.Fatalf("not a plan: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(tinyPlan(f))
	f.Add([]byte(versionLine + "\x02\x00\x00\x00\x00\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			return
		}
		for _, w := range p.Graph.Initializers {
			if err := w.Check(); err != nil {
				t.Fatal(err)
			}
			if w.Len() > 0 && w.Len() > len(b) {
				t.Fatalf("%d elements from %d bytes", w.Len(), len(b))
			}
		}
	})
}
