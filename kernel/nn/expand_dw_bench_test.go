package nn

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// BenchmarkExpandDepthwise is MnasNet's, MobileNetV3's and EfficientNet's
// first expansion + 3x3 depthwise layers (ReLU clamps on both parts, one
// worker) through ExpandDepthwise ("fused") and as the two convolutions
// apart ("apart"), in thread CPU time.
func BenchmarkExpandDepthwise(b *testing.B) {
	for _, c := range []struct{ cin, e, hw, s int }{
		{16, 48, 112, 2}, {16, 64, 112, 2}, {16, 96, 112, 2}, {24, 72, 56, 1}, {24, 144, 56, 2},
	} {
		r := rand.New(rand.NewSource(1))
		x := tensor.From(randF32(r, c.cin*c.hw*c.hw), 1, c.cin, c.hw, c.hw)
		w1 := tensor.From(randF32(r, c.e*c.cin), c.e, c.cin, 1, 1)
		b1 := tensor.From(randF32(r, c.e), c.e)
		w2 := tensor.From(randF32(r, c.e*9), c.e, 1, 3, 3)
		b2 := tensor.From(randF32(r, c.e), c.e)
		clip := kernel.Epilogue{Lo: 0, HasLo: true}
		oh := (c.hw-1)/c.s + 1
		mid := tensor.New(tensor.Float32, 1, c.e, c.hw, c.hw)
		y := tensor.New(tensor.Float32, 1, c.e, oh, oh)
		pl := parallel.New(1)
		a := node("Conv")
		dw := node("Conv", intAttr("group", int64(c.e)), ints("strides", int64(c.s), int64(c.s)), ints("pads", 1, 1, 1, 1))
		name := fmt.Sprintf("c%de%dhw%ds%d", c.cin, c.e, c.hw, c.s)
		b.Run(name+"/fused", func(b *testing.B) {
			ctx := ctxAt(pl, kernel.ISABest, nil)
			cpuLoop(b, func() {
				ok := ExpandDepthwise(ctx, ExpandDW{X: x.Data.([]float32), XShape: x.Shape, W1: w1.Data.([]float32), W1Shape: w1.Shape,
					B1: b1.Data.([]float32), E1: clip, W2: w2.Data.([]float32), W2Shape: w2.Shape, B2: b2.Data.([]float32), E2: clip,
					Attrs: dw, Y: y.Data.([]float32), YShape: y.Shape})
				if !ok {
					b.Fatal("refused")
				}
			})
		})
		b.Run(name+"/expand", func(b *testing.B) {
			ctx := &kernel.Ctx{Pool: pl, ISA: kernel.ISABest, Epilogue: clip}
			cpuLoop(b, func() {
				if err := intoConv(ctx, a, []*tensor.Tensor{x, w1, b1}, []*tensor.Tensor{mid}); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(name+"/dw", func(b *testing.B) {
			ctx := &kernel.Ctx{Pool: pl, ISA: kernel.ISABest, Epilogue: clip}
			cpuLoop(b, func() {
				if err := intoConv(ctx, dw, []*tensor.Tensor{mid, w2, b2}, []*tensor.Tensor{y}); err != nil {
					b.Fatal(err)
				}
			})
		})
		pl.Close()
	}
}
