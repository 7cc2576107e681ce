package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// LayerTime is one layer's GPU time in a profiled run (Profile).
type LayerTime struct {
	Layer, Op, Kernel string
	Ms                float64
}

// profiler is a profiled run's events: ev[0] before the first layer,
// ev[i+1] after layer i.
type profiler struct {
	ev   []*cuda.Event
	hold *cuda.Buffer
}

// profileHold is the memory the stream fills before a profiled run's
// layers (profileFills times): a few milliseconds of GPU work while the
// host queues the layers' launches, so that each layer's events bracket
// its kernels' GPU time, not the host's launch gaps.
const (
	profileHold  = 256 << 20
	profileFills = 40
)

// Profile runs the program once more on inputs (after a run of their
// shape, which it makes when there was none), directly rather than as a
// graph, with an event after each layer, and returns each layer's GPU
// time and the held run's outputs. The arithmetic is a direct run's: the
// same kernels and chains as any run. A program with CPU layers is not
// profiled (a CPU layer synchronises the stream).
func (pr *Program) Profile(ctx context.Context, inputs []*tensor.Tensor) ([]LayerTime, []*tensor.Tensor, error) {
	if !pr.allGPU {
		return nil, nil, errors.New("engine: a program with CPU layers is not profiled")
	}
	if _, err := pr.Run(ctx, inputs); err != nil {
		return nil, nil, err
	}
	p := &profiler{}
	defer func() {
		for _, e := range p.ev {
			e.Destroy()
		}
		if p.hold != nil {
			p.hold.Free()
		}
	}()
	var err error
	if p.hold, err = pr.c.Alloc(profileHold); err != nil {
		return nil, nil, err
	}
	for range len(pr.g.Nodes) + 1 {
		e, err := pr.c.NewEvent()
		if err != nil {
			return nil, nil, err
		}
		p.ev = append(p.ev, e)
	}
	pr.setup.Lock()
	pr.prof = p
	pr.setup.Unlock()
	outs, err := pr.Run(ctx, inputs)
	pr.setup.Lock()
	pr.prof = nil
	pr.setup.Unlock()
	if err != nil {
		return nil, nil, err
	}
	var t []LayerTime
	for i, n := range pr.g.Nodes {
		ms, err := p.ev[i].Elapsed(p.ev[i+1])
		if err != nil {
			return nil, nil, fmt.Errorf("engine: profile of layer %s: %w", n.Name, err)
		}
		t = append(t, LayerTime{Layer: n.Name, Op: n.OpType, Kernel: pr.kernel[n], Ms: ms})
	}
	return t, outs, nil
}

// start holds the stream back and records the run's first event.
func (p *profiler) start(c *cuda.Context, st *cuda.Stream) error {
	for range profileFills {
		if err := c.Fill32(st, p.hold.Ptr, 0, profileHold/4); err != nil {
			return err
		}
	}
	return p.ev[0].Record(st)
}

// layer records the event after layer i.
func (p *profiler) layer(st *cuda.Stream, i int, _ *ir.Node) error { return p.ev[i+1].Record(st) }
