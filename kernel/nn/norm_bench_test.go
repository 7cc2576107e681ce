package nn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
)

// BenchmarkLayerNorm32 is tiny_bert's LayerNormalization: 64 rows of 128.
func BenchmarkLayerNorm32(b *testing.B) {
	const R, D = 64, 128
	x, sc, bs, y, mean, inv := layerNormBenchData(R, D)
	for b.Loop() {
		layerNorm32(vmath.Vector(true), x, sc, bs, nil, nil, D, 1e-5, y, mean, inv)
	}
}

// BenchmarkLayerNorm32Par is swin_t's first LayerNormalization (3136 rows
// of 96) through layerNorm32Par at 1 and 2 workers.
func BenchmarkLayerNorm32Par(b *testing.B) {
	const R, D = 3136, 96
	x, sc, bs, y, mean, inv := layerNormBenchData(R, D)
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			p := parallel.New(w)
			defer p.Close()
			for b.Loop() {
				layerNorm32Par(p, vmath.Vector(true), x, sc, bs, nil, nil, D, 1e-5, y, mean, inv)
			}
		})
	}
}

// layerNormBenchData is R random rows of D, scale and bias, and the
// outputs of a LayerNormalization over them.
func layerNormBenchData(R, D int) (x, sc, bs, y, mean, inv []float32) {
	r := rand.New(rand.NewPCG(1, 2))
	x, sc, bs = make([]float32, R*D), make([]float32, D), make([]float32, D)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for i := range sc {
		sc[i], bs[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	return x, sc, bs, make([]float32, R*D), make([]float32, R), make([]float32, R)
}
