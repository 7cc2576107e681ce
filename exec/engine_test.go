package exec_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

// The engine gives Executor.Run's bits, from any number of goroutines, and
// its outputs are the caller's: a later run on other inputs (which reuses
// the pooled arena) leaves them as they were.
func TestEngineRun(t *testing.T) {
	for _, name := range []string{"breast_cancer_mlp", "digits_cnn"} {
		t.Run(name, func(t *testing.T) {
			p, in := sharedPlan(t, name)
			ex, err := exec.New(p.Graph, builtin.Registry())
			if err != nil {
				t.Fatal(err)
			}
			ref, err := ex.Run(feeds(p.Graph, in))
			if err != nil {
				t.Fatal(err)
			}
			eng, err := exec.NewEngine(p.Graph, builtin.Registry(), exec.Options{})
			if err != nil {
				t.Fatal(err)
			}
			first, err := eng.Run(context.Background(), feeds(p.Graph, in))
			if err != nil {
				t.Fatal(err)
			}
			other := make([]*tensor.Tensor, len(in))
			for i, x := range in {
				c := x.Clone()
				for j, v := range c.Data.([]float32) {
					c.Data.([]float32)[j] = v*2 + 1
				}
				other[i] = c
			}
			second, err := eng.Run(context.Background(), feeds(p.Graph, other))
			if err != nil {
				t.Fatal(err)
			}
			changed := false
			for _, o := range p.Graph.Outputs {
				if !sameBits(first[o.Name], ref[o.Name]) {
					t.Fatalf("output %q differs from Executor.Run, or was overwritten by the next run", o.Name)
				}
				changed = changed || !sameBits(second[o.Name], ref[o.Name])
			}
			if !changed {
				t.Fatal("other inputs gave the same outputs: the test input change did nothing")
			}
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 3 {
						got, err := eng.Run(context.Background(), feeds(p.Graph, in))
						if err != nil {
							errs <- err
							return
						}
						for _, o := range p.Graph.Outputs {
							if !sameBits(got[o.Name], ref[o.Name]) {
								errs <- errors.New("a concurrent run's output " + o.Name + " differs")
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}

func TestEngineErrors(t *testing.T) {
	p, in := sharedPlan(t, "breast_cancer_mlp")
	if _, err := exec.NewEngine(p.Graph, builtin.Registry(), exec.Options{Device: "tpu"}); err == nil || !strings.Contains(err.Error(), `unknown device "tpu"`) {
		t.Errorf("device tpu: %v", err)
	}
	eng, err := exec.NewEngine(p.Graph, builtin.Registry(), exec.Options{Device: exec.DeviceCPU})
	if err != nil {
		t.Fatal(err)
	}
	if o := eng.Options(); o.Device != exec.DeviceCPU || o.Limits.MaxBytes != exec.DefaultMaxBytes {
		t.Errorf("options with defaults: %+v", o)
	}
	f := feeds(p.Graph, in)
	f["extra"] = in[0]
	if _, err := eng.Run(context.Background(), f); !errors.Is(err, exec.ErrInput) {
		t.Errorf("unknown input: %v, want ErrInput", err)
	}
	small, err := exec.NewEngine(p.Graph, builtin.Registry(), exec.Options{Limits: exec.Limits{MaxBytes: 64}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.Run(context.Background(), feeds(p.Graph, in)); !errors.Is(err, exec.ErrBudget) {
		t.Errorf("64-byte budget: %v, want ErrBudget", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := eng.Run(ctx, feeds(p.Graph, in)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v, want context.Canceled", err)
	}
}
