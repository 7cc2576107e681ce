package gputest

import (
	"fmt"

	"github.com/vouchml/vouch/cuda/exact"
)

// gemmAsConv checks the route cuda/engine takes for a small product by a
// weight (smallmm.go): A [m, k] by B [k, n] as the 1x1 convolution of m
// images of k channels by the n filters Bᵀ (bt), through every kernel
// ConvKernels lists for it, against the CPU's MatMul (want).
func (s *suite) gemmAsConv(m, n, k int, a, bt, want []float32) error {
	g := exact.ConvGeom{N: m, C: k, H: 1, W: 1, M: n, OH: 1, OW: 1, G: 1, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
	defer func() { s.e.ConvKernel = "" }()
	for _, kn := range exact.ConvKernels(g) {
		s.e.ConvKernel = kn
		gpu, err := s.run(m*n, [][]float32{a, bt}, func(in []uint64, out uint64) error {
			return s.e.Conv2DAct(nil, g, in[0], in[1], 0, 0, exact.Act{}, out)
		})
		if err != nil {
			return fmt.Errorf("MatMul %dx%dx%d as a 1x1 conv (%s): %w", m, n, k, kn, err)
		}
		s.record(fmt.Sprintf("MatMul %dx%dx%d as a 1x1 conv (%s)", m, n, k, kn), gpu, want, true)
	}
	return nil
}
