package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/vouchml/vouch/compile"
)

const models = "../../shared/models"

func TestCompareAndProfileMLP(t *testing.T) {
	m, err := Load(models+"/breast_cancer_mlp/model.onnx", Shape{Batch: 4}, 1, compile.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVouch(m)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Compare(context.Background(), []Engine{v, v}, Options{Runs: 5, Warmup: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Summary.N != 5 || res[0].Summary.Median <= 0 {
		t.Fatalf("results %+v", res)
	}
	layers, err := Profile(context.Background(), m.Plan, m.Inputs, Options{Runs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != len(m.Plan.Graph.Nodes) {
		t.Fatalf("%d layers profiled, plan has %d", len(layers), len(m.Plan.Graph.Nodes))
	}
	var share float64
	for _, l := range layers {
		share += l.Share
	}
	if share < 0.999 || share > 1.001 {
		t.Errorf("shares sum to %v", share)
	}
}

func TestPeerUnavailableIsReported(t *testing.T) {
	m, err := Load(models+"/breast_cancer_mlp/model.onnx", Shape{}, 1, compile.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !ORTBuilt {
		_, err := NewPeer("ort", m, PeerConfig{Threads: 1})
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("ort without -tags ort: %v, want ErrUnavailable", err)
		}
	}
	_, err = NewPeer("ort", m, PeerConfig{Threads: 1, ORTLib: "/nonexistent/libonnxruntime.so.1"})
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("ort with a missing library: %v, want ErrUnavailable", err)
	}
	if _, err := NewPeer("tensorflow", m, PeerConfig{}); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("unknown peer: %v", err)
	}
}

func TestGEMM(t *testing.T) {
	r, err := GEMM(33, 17, 9, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.GFLOPs <= 0 {
		t.Errorf("GEMM %+v", r)
	}
}
