package gputest

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/vouchml/vouch/bench"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// planBench runs each of cfg.Plans (GPU plans) through the serving engine
// (exec.NewPlanEngine on the device, as vouch serve and bench do) at each
// of cfg.Batches on bench's seeded inputs and prints two medians of
// BenchReps runs after 3 warm-ups: end to end (input upload, the layers,
// output download) and the layers alone (events on the stream around the
// CUDA graph, the figure PyTorch's graph replay is comparable with).
func (s *suite) planBench() error {
	for _, path := range s.cfg.Plans {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		p, err := plan.Decode(b)
		if err != nil {
			return fmt.Errorf("gputest: %s: %w", path, err)
		}
		e, err := exec.NewPlanEngine(p, builtin.Registry(), exec.Options{Device: fmt.Sprintf("cuda:%d", s.cfg.Device)})
		if err != nil {
			return fmt.Errorf("gputest: %s: %w", path, err)
		}
		for _, batch := range s.cfg.Batches {
			in, err := bench.Inputs(p.Graph, bench.Shape{Batch: batch}, 1)
			if err != nil {
				fmt.Fprintf(s.w, "bench plan %s batch %4d: not run: %v\n", path, batch, err)
				continue
			}
			var wall, dev []float64
			var out map[string]*tensor.Tensor
			for i := 0; i < s.cfg.BenchReps+3; i++ {
				t0 := time.Now()
				if out, err = e.Run(context.Background(), in); err != nil {
					break
				}
				if i >= 3 {
					wall = append(wall, float64(time.Since(t0))/1e6)
					dev = append(dev, float64(e.DeviceTime())/1e6)
				}
			}
			if err != nil {
				fmt.Fprintf(s.w, "bench plan %s batch %4d: failed: %v\n", path, batch, err)
				continue
			}
			if !s.cfg.SkipPlanCPU {
				if err := s.planCPU(path, p, batch, in, out); err != nil {
					return err
				}
			}
			mw, md := median(wall), median(dev)
			if md == 0 {
				// A plan with CPU layers: the stream is synchronised in
				// the middle of a run, so only the wall time means anything.
				fmt.Fprintf(s.w, "bench plan %s batch %4d: end to end %8.3f ms (%8.1f img/s), layers not timed alone (CPU layers); min %.3f ms\n",
					path, batch, mw, float64(batch)/mw*1e3, sorted(wall)[0])
				continue
			}
			fmt.Fprintf(s.w, "bench plan %s batch %4d: end to end %8.3f ms (%8.1f img/s), layers on the GPU %8.3f ms (%8.1f img/s); min %.3f / %.3f ms\n",
				path, batch, mw, float64(batch)/mw*1e3, md, float64(batch)/md*1e3, sorted(wall)[0], sorted(dev)[0])
		}
		if err := s.planInvariance(path, p, e); err != nil {
			e.Close()
			return err
		}
		if err := e.Close(); err != nil {
			return err
		}
	}
	return nil
}

// planInvariance checks, through the serving engine, that a row's outputs
// do not depend on the batch it is run in (row 0 of a batch of 3 against
// the row alone; skipped where the batch is fixed) nor on the streams:
// four concurrent runs, each on its own lane, give the serial run's bits.
func (s *suite) planInvariance(path string, p *plan.Plan, e *exec.Engine) error {
	ctx := context.Background()
	if in, err := bench.Inputs(p.Graph, bench.Shape{Batch: 3}, 7); err == nil {
		full, err := e.Run(ctx, in)
		if err != nil {
			return fmt.Errorf("gputest: %s batch 3: %w", path, err)
		}
		alone, err := e.Run(ctx, firstRows(in))
		if err != nil {
			return fmt.Errorf("gputest: %s row 0 alone: %w", path, err)
		}
		for name, t := range alone {
			if f, ok := t.Data.([]float32); ok {
				s.record(fmt.Sprintf("plan %s: output %s of row 0 alone == in a batch of 3", path, name), f, full[name].Data.([]float32)[:len(f)], true)
			}
		}
	}
	in, err := bench.Inputs(p.Graph, bench.Shape{Batch: 1}, 8)
	if err != nil {
		return err
	}
	serial, err := e.Run(ctx, in)
	if err != nil {
		return err
	}
	const n = 4
	outs := make([]map[string]*tensor.Tensor, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for round := 0; round < 3; round++ {
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i], errs[i] = e.Run(ctx, in)
			}()
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				return fmt.Errorf("gputest: %s concurrent run: %w", path, errs[i])
			}
			for name, t := range serial {
				if f, ok := t.Data.([]float32); ok {
					s.record(fmt.Sprintf("plan %s: output %s, concurrent run %d.%d == serial", path, name, round, i), outs[i][name].Data.([]float32), f, true)
				}
			}
		}
	}
	fmt.Fprintf(s.w, "plan %s: %d concurrent runs x 3 rounds on the serving engine\n", path, n)
	return nil
}

// firstRows returns each input's first row along the batch axis.
func firstRows(in map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for name, t := range in {
		shape := append([]int{1}, t.Shape[1:]...)
		k := tensor.NumElems(shape)
		out[name] = &tensor.Tensor{DType: t.DType, Shape: shape, Data: reflect.ValueOf(t.Data).Slice(0, k).Interface()}
	}
	return out
}

func sorted(v []float64) []float64 {
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	return c
}
