package gputest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/vouchml/vouch/bench"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
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
			for i := 0; i < s.cfg.BenchReps+3; i++ {
				t0 := time.Now()
				if _, err = e.Run(context.Background(), in); err != nil {
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
		if err := e.Close(); err != nil {
			return err
		}
	}
	return nil
}

func sorted(v []float64) []float64 {
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	return c
}
