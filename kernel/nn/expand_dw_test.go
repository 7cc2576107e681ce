package nn

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// TestExpandDepthwiseKernelTwin: nn.ExpandDepthwise gives the bits of the
// 1x1 and depthwise convolutions run apart on the portable twins, with the
// stride-2 depthwise rows on AVX-512 (DwS2P1Z) and on AVX2 (noDwZ), the
// whole layer at ISAAVX2 (the expansion's Sgemm6x16RBN on any host),
// 1, 2 and 8 workers, widths around the vectors, clamps on both parts
// (and an activation on the expansion's).
func TestExpandDepthwiseKernelTwin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(41))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	ran := 0
	for i := 0; i < 40; i++ {
		n, cin, e := 1+r.Intn(2), 1+r.Intn(12), 1+r.Intn(40)
		h, w := 8+r.Intn(40), 17+r.Intn(50)
		s := int64(1 + i%2)
		x := tensor.From(specialF32(r, n*cin*h*w, i%2 == 0), n, cin, h, w)
		w1 := tensor.From(specialF32(r, e*cin, false), e, cin, 1, 1)
		b1 := tensor.From(specialF32(r, e, false), e)
		w2 := tensor.From(specialF32(r, e*9, i%3 == 0), e, 1, 3, 3)
		b2 := tensor.From(specialF32(r, e, false), e)
		clip := kernel.Epilogue{Lo: 0, Hi: 6, HasLo: true, HasHi: true}
		// The expansion's epilogue: the clamp, and on every fourth case an
		// activation too (one that shows a run missed or done twice).
		clip1 := clip
		if i%4 == 1 {
			clip1.Act = func(_ vmath.Vec, dst, src []float32) {
				for k, v := range src {
					dst[k] = v*0.75 - 1
				}
			}
		}
		a := node("Conv")
		b := node("Conv", intAttr("group", int64(e)), ints("strides", s, s), ints("pads", 1, 1, 1, 1))
		// The reference: the two convolutions apart, portable.
		mid := tensor.New(tensor.Float32, n, e, h, w)
		if err := intoConv(&kernel.Ctx{Pool: pools[0], ISA: kernel.ISAPortable, Epilogue: clip1}, a, []*tensor.Tensor{x, w1, b1}, []*tensor.Tensor{mid}); err != nil {
			t.Fatal(err)
		}
		st, err := setupConv(b, mid.Shape, w2.Shape)
		if err != nil {
			t.Fatal(err)
		}
		want := tensor.New(tensor.Float32, append([]int{n, e}, st.g.out...)...)
		if err := intoConv(&kernel.Ctx{Pool: pools[0], ISA: kernel.ISAPortable, Epilogue: clip}, b, []*tensor.Tensor{mid, w2, b2}, []*tensor.Tensor{want}); err != nil {
			t.Fatal(err)
		}
		for _, lv := range []struct {
			isa kernel.ISA
			noZ bool
		}{{kernel.ISABest, false}, {kernel.ISABest, true}, {kernel.ISAAVX2, false}} {
			noZ := lv.noZ
			for _, p := range pools {
				attrs := node("Conv", intAttr("group", int64(e)), ints("strides", s, s), ints("pads", 1, 1, 1, 1))
				y := tensor.New(tensor.Float32, want.Shape...)
				ok := ExpandDepthwise(ctxAt(p, lv.isa, &forced{noDwZ: noZ}), ExpandDW{X: x.Data.([]float32), XShape: x.Shape, W1: w1.Data.([]float32), W1Shape: w1.Shape,
					B1: b1.Data.([]float32), E1: clip1, W2: w2.Data.([]float32), W2Shape: w2.Shape, B2: b2.Data.([]float32), E2: clip,
					Attrs: attrs, Y: y.Data.([]float32), YShape: y.Shape})
				if !ok {
					t.Fatalf("case %d: the fast path refused x %v", i, x.Shape)
				}
				ran++
				if d := sameF32(y.Data.([]float32), want.Data.([]float32)); d >= 0 {
					t.Fatalf("%s: y[%d] = %g, apart %g", fmt.Sprintf("case %d (x %v, e %d, stride %d, ISA %v, AVX2 rows %v, %d workers)", i, x.Shape, e, s, lv.isa, noZ, p.Workers()),
						d, y.Data.([]float32)[d], want.Data.([]float32)[d])
				}
			}
		}
	}
	if ran == 0 {
		t.Fatal("nothing ran")
	}
}
