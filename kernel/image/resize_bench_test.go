package image

import (
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// BenchmarkResizeFCN is fcn_resnet50's head upsample: 21 planes of 20x20
// to 160x160, bilinear half_pixel, from sizes; Run allocates its output,
// Into writes a plan's arena slot (the plan's way).
func BenchmarkResizeFCN(b *testing.B) {
	x := tensor.New(tensor.Float32, 1, 21, 20, 20)
	d := x.Data.([]float32)
	for i := range d {
		d[i] = float32(i%97) / 97
	}
	n := node("Resize", 13, str("mode", "linear"), str("coordinate_transformation_mode", "half_pixel"), str("nearest_mode", "floor"))
	in := []*tensor.Tensor{x, nil, nil, tensor.From([]int64{1, 21, 160, 160}, 4)}
	b.Run("Run", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := runResize(nil, n, in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Into", func(b *testing.B) {
		kc := &kernel.Ctx{State: &kernel.State{}}
		out := []*tensor.Tensor{tensor.New(tensor.Float32, 1, 21, 160, 160)}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := intoResize(kc, n, in, out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
