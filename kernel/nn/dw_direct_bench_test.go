package nn

import (
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// BenchmarkDepthwise is mobilenet_v2's depthwise 3x3 layers (bias, Relu6), one
// worker, and stride 2 layers small enough to stay in cache (c8hw112s2,
// c24hw56s2: the kernels' speed rather than memory's).
func BenchmarkDepthwise(b *testing.B) {
	benchDepthwise(b, nil)
}

// BenchmarkDepthwiseAVX2 is BenchmarkDepthwise with the AVX-512 kernels
// switched off (the AVX2 row kernels).
func BenchmarkDepthwiseAVX2(b *testing.B) {
	benchDepthwise(b, &forced{noDwFlat: true, noDwZ: true})
}

func benchDepthwise(b *testing.B, f *forced) {
	for _, c := range []struct {
		name      string
		ch, hw, s int
	}{
		{"c32hw112", 32, 112, 1}, {"c96hw112s2", 96, 112, 2}, {"c144hw56", 144, 56, 1}, {"c144hw56s2", 144, 56, 2},
		{"c192hw28", 192, 28, 1}, {"c384hw14", 384, 14, 1}, {"c576hw14s2", 576, 14, 2}, {"c960hw7", 960, 7, 1},
		{"c192hw28s2", 192, 28, 2}, {"c8hw112s2", 8, 112, 2}, {"c24hw56s2", 24, 56, 2},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := rand.New(rand.NewSource(1))
			n := node("Conv", ints("strides", int64(c.s), int64(c.s)), ints("pads", 1, 1, 1, 1), intAttr("group", int64(c.ch)))
			oh := (c.hw+2-3)/c.s + 1
			x := tensor.From(randF32(r, c.ch*c.hw*c.hw), 1, c.ch, c.hw, c.hw)
			w := tensor.From(randF32(r, c.ch*9), c.ch, 1, 3, 3)
			bias := tensor.From(randF32(r, c.ch), c.ch)
			y := tensor.New(tensor.Float32, 1, c.ch, oh, oh)
			pl := parallel.New(1)
			defer pl.Close()
			ctx := ctxAt(pl, kernel.ISABest, f)
			for i := 0; i < b.N; i++ {
				ctx.Epilogue = kernel.Epilogue{Lo: 0, Hi: 6, HasLo: true, HasHi: true}
				if err := intoConv(ctx, n, []*tensor.Tensor{x, w, bias}, []*tensor.Tensor{y}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(18*float64(c.ch*oh*oh)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
