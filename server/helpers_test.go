package server

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

const models = "../../shared/models"

// modelRunner loads one of the shared models' ONNX graph as a plan without
// compiling it: the server never depends on the compiler, and the graph runs
// on the same executor.
func modelRunner(t testing.TB, name string, o PlanOptions) *PlanRunner {
	t.Helper()
	m, err := onnx.DecodeFile(models + "/" + name + "/model.onnx")
	if err != nil {
		t.Skipf("shared model %s: %v", name, err)
	}
	p := &plan.Plan{Graph: m.Graph}
	p.Header.Source.Name = name
	r, err := NewPlanRunner(p, "sha256:"+fmt.Sprintf("%064x", 0), name, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// memAppender keeps records in memory.
type memAppender struct {
	mu   sync.Mutex
	recs []*audit.Record
	fail error
}

func (a *memAppender) Append(ctx context.Context, r *audit.Record) (uint64, [32]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return 0, [32]byte{}, a.fail
	}
	cp := *r
	a.recs = append(a.recs, &cp)
	return uint64(len(a.recs) - 1), [32]byte{1, 2, 3}, nil
}

func (a *memAppender) last() *audit.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.recs) == 0 {
		return nil
	}
	return a.recs[len(a.recs)-1]
}

func (a *memAppender) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.recs)
}

// slowRunner is a fake model, f32[batch,2] → f32[batch,2] doubling, that
// blocks each run until release is closed (when set).
type slowRunner struct {
	release chan struct{}
	started chan struct{}
}

func (r *slowRunner) Info() ModelInfo {
	return ModelInfo{Name: "slow", Version: "1", Platform: "fake",
		Inputs:  []TensorSpec{{Name: "x", DType: tensor.Float32, Shape: []int64{-1, 2}}},
		Outputs: []TensorSpec{{Name: "y", DType: tensor.Float32, Shape: []int64{-1, 2}}}}
}

func (r *slowRunner) Check(in map[string]*tensor.Tensor) (string, error) {
	x, ok := in["x"]
	if !ok || len(in) != 1 || x.DType != tensor.Float32 || len(x.Shape) != 2 || x.Shape[1] != 2 {
		return "", fmt.Errorf("%w: want x f32[n,2]", ErrInput)
	}
	return "", nil
}

func (r *slowRunner) Run(ctx context.Context, in map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	if r.started != nil {
		select {
		case r.started <- struct{}{}:
		default:
		}
	}
	if r.release != nil {
		<-r.release
	}
	x := in["x"].Data.([]float32)
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = 2 * v
	}
	return map[string]*tensor.Tensor{"y": tensor.From(y, in["x"].Shape...)}, nil
}
