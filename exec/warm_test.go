package exec

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// warmProg is a device program whose runs fail with err; fault says which
// errors are device faults (nil: the program cannot tell).
type warmProg struct {
	err   error
	fault func(error) bool
	runs  int
}

func (w *warmProg) Run(context.Context, []*tensor.Tensor) ([]*tensor.Tensor, error) {
	w.runs++
	return nil, w.err
}
func (w *warmProg) Backend() string { return "test" }
func (w *warmProg) Device() string  { return "test:0" }
func (w *warmProg) Close() error    { return nil }
func (w *warmProg) Graphs() bool    { return true }

type faultProg struct{ *warmProg }

func (f faultProg) DeviceFault(err error) bool { return f.fault(err) }

// The warm-up skips a shape the model refuses, and refuses the plan on a
// device fault or when the program cannot tell the two apart.
func TestWarmSkipsModelErrors(t *testing.T) {
	p := &plan.Plan{Graph: &ir.Graph{Inputs: []*ir.Value{{Name: "ids", Type: ir.StaticType(tensor.Int64, []int{1, 128})}}},
		Header: plan.Header{Profiles: []plan.Profile{{Inputs: map[string]plan.ShapeRange{"ids": {Min: []int{1, 128}, Opt: []int{1, 128}, Max: []int{1, 128}}}}}}}
	device := errors.New("cuda: cuLaunchKernel: CUDA_ERROR_ILLEGAL_ADDRESS")
	model := errors.New("engine: layer /pos/Gather (Gather): exact: Gather index 64 out of range for an axis of 64")
	isDevice := func(err error) bool { return errors.Is(err, device) }
	w := &warmProg{err: model, fault: isDevice}
	if err := warm(faultProg{w}, p); err != nil || w.runs != 1 {
		t.Fatalf("a model error: %v after %d runs, want none after 1", err, w.runs)
	}
	w = &warmProg{err: device, fault: isDevice}
	if err := warm(faultProg{w}, p); !errors.Is(err, ErrDevice) || !strings.Contains(err.Error(), "ILLEGAL_ADDRESS") {
		t.Fatalf("a device fault: %v", err)
	}
	if err := warm(&warmProg{err: model}, p); !errors.Is(err, ErrDevice) {
		t.Fatalf("a program that cannot tell: %v", err)
	}
}
