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
// layers that dwAny runs (5x5 at strides 1 and 2, bias, one worker), and
// MnasNet's 5x5 stride-2 ones; thread CPU time (cpuLoop) besides the
// wall time, which a loaded machine inflates.
func BenchmarkDwAny(b *testing.B) {
	for _, c := range []struct{ ch, hw, k, s int }{
		{144, 56, 5, 2}, {72, 56, 5, 2}, {240, 28, 5, 2}, {240, 28, 5, 1}, {672, 14, 5, 1}, {672, 14, 5, 2}, {1152, 7, 5, 1}, {480, 14, 3, 1},
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
			cpuLoop(b, func() {
				if err := intoConv(ctx, n, []*tensor.Tensor{x, w, bias}, []*tensor.Tensor{y}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkGroupTaps is RegNetY-400MF's grouped 3x3 layers (8 channels a
// group; groupTaps) at strides 2 and 1, one worker, in thread CPU time.
func BenchmarkGroupTaps(b *testing.B) {
	for _, c := range []struct{ ch, hw, s int }{
		{48, 112, 2}, {104, 28, 1}, {208, 28, 2}, {440, 7, 1},
	} {
		b.Run(fmt.Sprintf("c%dhw%ds%d", c.ch, c.hw, c.s), func(b *testing.B) {
			r := rand.New(rand.NewSource(1))
			n := node("Conv", ints("strides", int64(c.s), int64(c.s)), ints("pads", 1, 1, 1, 1), intAttr("group", int64(c.ch/8)))
			oh := (c.hw+2-3)/c.s + 1
			x := tensor.From(randF32(r, c.ch*c.hw*c.hw), 1, c.ch, c.hw, c.hw)
			w := tensor.From(randF32(r, c.ch*8*9), c.ch, 8, 3, 3)
			y := tensor.New(tensor.Float32, 1, c.ch, oh, oh)
			pl := parallel.New(1)
			defer pl.Close()
			ctx := ctxAt(pl, kernel.ISABest, nil)
			cpuLoop(b, func() {
				if err := intoConv(ctx, n, []*tensor.Tensor{x, w}, []*tensor.Tensor{y}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
