package nn

import (
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/kernel/vmath"
)

// BenchmarkLayerNorm32 is tiny_bert's LayerNormalization: 64 rows of 128.
func BenchmarkLayerNorm32(b *testing.B) {
	const R, D = 64, 128
	r := rand.New(rand.NewPCG(1, 2))
	x, sc, bs := make([]float32, R*D), make([]float32, D), make([]float32, D)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for i := range sc {
		sc[i], bs[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	y, mean, inv := make([]float32, R*D), make([]float32, R), make([]float32, R)
	for b.Loop() {
		layerNorm32(vmath.Vector(true), x, sc, bs, nil, nil, D, 1e-5, y, mean, inv)
	}
}
