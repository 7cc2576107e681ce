package credit

import (
	"bytes"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/tensor"
)

func TestModelIsDeterministicAndAccurate(t *testing.T) {
	a, b := Model(), Model()
	if !bytes.Equal(a, b) {
		t.Fatal("two trainings gave different model bytes")
	}
	m, err := onnx.Decode(a, "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Metadata["vouch.labels"] != "approve,decline" {
		t.Fatalf("labels: %q", m.Metadata["vouch.labels"])
	}
	ex, err := exec.New(m.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	x, y := Applicants(99, 1000) // held-out applicants
	out, err := ex.Run(map[string]*tensor.Tensor{"features": tensor.From(x, 1000, 8)})
	if err != nil {
		t.Fatal(err)
	}
	p := out["probabilities"].Data.([]float32)
	correct := 0
	for i, label := range y {
		pred := 0
		if p[2*i+1] > p[2*i] {
			pred = 1
		}
		if pred == label {
			correct++
		}
	}
	acc := float64(correct) / float64(len(y))
	t.Logf("held-out accuracy %.1f%%", 100*acc)
	if acc < 0.85 {
		t.Fatalf("held-out accuracy %.1f%% is too low for a useful demo model", 100*acc)
	}
}
