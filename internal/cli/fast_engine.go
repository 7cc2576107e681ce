package cli

import (
	"errors"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/plan"
)

// This file binds the build to cuda/engine's fast-mode API, as
// notes/fast-interface.md specifies it (FastOptions, FastNote, PlaceFast,
// BuildFast). TEMPORARY: until helper fastk's cuda/engine lands on main,
// placeFast keeps every layer exact with a note saying so and buildFast
// refuses; after it lands, these become aliases of engine's names.

// fastOptions are engine.FastOptions.
type fastOptions struct {
	Precision plan.Precision
	Layers    map[string]plan.Precision
	Scales    map[string]float32
}

// fastNote is engine.FastNote.
type fastNote struct{ Layer, Reason string }

var errNoFastKernels = errors.New("cli: this vouch's cuda/engine has no fast kernels yet (issue 19)")

func placeFast(g *ir.Graph, types map[string]ir.Type, o fastOptions) ([]plan.Placement, []fastNote) {
	out := engine.Place(g, types)
	var notes []fastNote
	for _, p := range out {
		if want, ok := o.Layers[p.Layer]; (ok && want != plan.FP32) || (!ok && o.Precision != "" && o.Precision != plan.FP32) {
			notes = append(notes, fastNote{p.Layer, errNoFastKernels.Error()})
		}
	}
	return out, notes
}

func buildFast(cpuPlan []byte, g *ir.Graph, types map[string]ir.Type, n *cuda.NVRTC, arch string, env engine.Env, o fastOptions) ([]byte, *plan.GPU, []fastNote, error) {
	return nil, nil, nil, errNoFastKernels
}
