package exec

import (
	"fmt"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/plan"
)

// openCUDA loads p's GPU section on CUDA device d (the driver found where
// cuda.Find looks). Without a driver the error wraps cuda.ErrNoDriver and
// ErrDevice.
func openCUDA(p *plan.Plan, d Device, reg *kernel.Registry) (Program, error) {
	drv, err := cuda.Open("")
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrDevice, d, err)
	}
	prog, err := engine.Open(drv, d.Ordinal, p, reg)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrDevice, d, err)
	}
	return prog, nil
}
