package nn

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// BenchmarkDwAny is EfficientNet-B0's and MobileNetV3's depthwise
// layers that dwAny runs (5x5 at strides 1 and 2, bias, one worker).
func BenchmarkDwAny(b *testing.B) {
	for _, c := range []struct{ ch, hw, k, s int }{
		{144, 56, 5, 2}, {240, 28, 5, 1}, {672, 14, 5, 1}, {672, 14, 5, 2}, {1152, 7, 5, 1}, {480, 14, 3, 1},
	} {
		b.Run(fmt.Sprintf("c%dhw%dk%ds%d", c.ch, c.hw, c.k, c.s), func(b *testing.B) {
			r := rand.New(rand.NewSource(1))
			p := int64(c.k / 2)
			n := node("Conv", ints("strides", int64(c.s), int64(c.s)), ints("pads", p, p, p, p), intAttr("group", int64(c.ch)))
			oh := (c.hw+2*int(p)-c.k)/c.s + 1
			x := tensor.From(randF32(r, c.ch*c.hw*c.hw), 1, c.ch, c.hw, c.hw)
			w := tensor.From(randF32(r, c.ch*c.k*c.k), c.ch, 1, c.k, c.k)
			bias := tensor.From(randF32(r, c.ch), c.ch)
			y := tensor.New(tensor.Float32, 1, c.ch, oh, oh)
			pl := parallel.New(1)
			defer pl.Close()
			ctx := ctxAt(pl, kernel.ISABest, nil)
			for b.Loop() {
				if err := intoConv(ctx, n, []*tensor.Tensor{x, w, bias}, []*tensor.Tensor{y}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(2*c.k*c.k*c.ch*oh*oh)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
