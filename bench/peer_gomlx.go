//go:build gomlx

package bench

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/onnx-gomlx/onnx"

	"github.com/vouchml/vouch/tensor"
)

// gomlxEngine runs the model with onnx-gomlx on GoMLX's pure-Go backend
// (SimpleGo). Its parallelism is bounded by GOMAXPROCS, which vouch bench
// sets to --threads. The graph is compiled for the inputs' shapes at the
// first run (a warm-up run).
type gomlxEngine struct {
	be   backends.Backend
	ex   *context.Exec
	args []any
}

func newGoMLX(m *Model, _ PeerConfig) (e Engine, err error) {
	defer func() {
		// onnx-gomlx reports unsupported operators by panicking.
		if r := recover(); r != nil {
			e, err = nil, fmt.Errorf("bench: peer gomlx: %w: %v", ErrUnavailable, r)
		}
	}()
	om, err := onnx.Parse(m.ONNX)
	if err != nil {
		return nil, fmt.Errorf("bench: peer gomlx: %w: %w", ErrUnavailable, err)
	}
	be, err := simplego.New("")
	if err != nil {
		return nil, fmt.Errorf("bench: peer gomlx: %w: %w", ErrUnavailable, err)
	}
	ctx := context.New()
	if err := om.VariablesToContext(ctx); err != nil {
		return nil, fmt.Errorf("bench: peer gomlx: %w: %w", ErrUnavailable, err)
	}
	names, _ := om.Inputs()
	outs, _ := om.Outputs()
	g := &gomlxEngine{be: be}
	for _, n := range names {
		t, ok := m.Inputs[n]
		if !ok {
			return nil, fmt.Errorf("bench: peer gomlx: %w: no input %q", ErrUnavailable, n)
		}
		gt, err := gomlxTensor(t)
		if err != nil {
			return nil, fmt.Errorf("bench: peer gomlx: %w: input %q: %w", ErrUnavailable, n, err)
		}
		g.args = append(g.args, gt)
	}
	g.ex, err = context.NewExec(be, ctx, func(ctx *context.Context, in []*graph.Node) []*graph.Node {
		feeds := make(map[string]*graph.Node, len(in))
		for i, n := range names {
			feeds[n] = in[i]
		}
		return om.CallGraph(ctx, in[0].Graph(), feeds, outs...)
	})
	if err != nil {
		return nil, fmt.Errorf("bench: peer gomlx: %w: %w", ErrUnavailable, err)
	}
	// Compile now, so that an unsupported operator is reported as
	// unavailable rather than failing the benchmark.
	if err := g.Run(); err != nil {
		return nil, fmt.Errorf("bench: peer gomlx: %w: %w", ErrUnavailable, err)
	}
	return g, nil
}

func gomlxTensor(t *tensor.Tensor) (*tensors.Tensor, error) {
	switch d := t.Data.(type) {
	case []float32:
		return tensors.FromFlatDataAndDimensions(d, t.Shape...), nil
	case []float64:
		return tensors.FromFlatDataAndDimensions(d, t.Shape...), nil
	case []int64:
		return tensors.FromFlatDataAndDimensions(d, t.Shape...), nil
	case []int32:
		return tensors.FromFlatDataAndDimensions(d, t.Shape...), nil
	}
	return nil, fmt.Errorf("dtype %v is not wired to GoMLX", t.DType)
}

func (g *gomlxEngine) Name() string { return "gomlx" }

func (g *gomlxEngine) Run() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("gomlx panicked: %v", r)
		}
	}()
	outs, err := g.ex.Exec(g.args...)
	for _, o := range outs {
		o.FinalizeAll()
	}
	return err
}

func (g *gomlxEngine) Close() error {
	g.ex.Finalize()
	g.be.Finalize()
	return nil
}
