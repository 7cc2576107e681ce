package nn

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestDepthwiseStaysInBounds: depthwise 3x3 convolutions on small planes
// (rows of 1 to 9 outputs, strides 1 and 2, pads 0 to 2, 1 to 3 workers,
// every kernel path: the flat AVX-512 ones, the AVX2 rows, the padded
// planes) write nothing outside their
// output: guard floats on both sides of it keep their bits. Rows narrower
// than a vector store whole vectors; the lanes past a plane must be
// masked, or they land in another worker's plane or past the tensor.
func TestDepthwiseStaysInBounds(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(31))
	const G = 64
	const guard = 0x7f811111
	pools := []*parallel.Pool{parallel.New(1), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for i := 0; i < 300; i++ {
		c, nb := 1+r.Intn(19), 1+r.Intn(2)
		h, w := 1+r.Intn(20), 1+r.Intn(9)
		s := int64(1 + i%2)
		// Pads of 1 (the row kernels), else 0 or 2 (the padded-plane
		// kernel, DwRows9).
		pd := int64(1)
		if i%4 == 3 {
			pd = int64(r.Intn(2) * 2)
		}
		if h+2*int(pd) < 3 || w+2*int(pd) < 3 {
			pd = 1
		}
		xs, ws := []int{nb, c, h, w}, []int{c, 1, 3, 3}
		n := node("Conv", intAttr("group", int64(c)), ints("strides", s, s), ints("pads", pd, pd, pd, pd))
		st, err := setupConv(n, xs, ws)
		if err != nil {
			t.Fatal(err)
		}
		ny := nb * c * prod(st.g.out)
		in := []*tensor.Tensor{tensor.From(specialF32(r, prod(xs), i%2 == 0), xs...),
			tensor.From(specialF32(r, prod(ws), false), ws...), tensor.From(specialF32(r, c, false), c)}
		for _, off := range []bool{false, true} {
			for _, p := range pools {
				buf := make([]float32, ny+2*G)
				for k := range buf {
					buf[k] = math.Float32frombits(guard)
				}
				y := tensor.From(buf[G:G+ny], append([]int{nb, c}, st.g.out...)...)
				ctx := ctxAt(p, kernel.ISABest, &forced{noDwFlat: off})
				if i%3 == 1 {
					ctx.Epilogue = kernel.Epilogue{Lo: 0, Hi: 6, HasLo: true, HasHi: true}
				}
				if err := intoConv(ctx, n, in, []*tensor.Tensor{y}); err != nil {
					t.Fatal(err)
				}
				for k := 0; k < G; k++ {
					if math.Float32bits(buf[k]) != guard || math.Float32bits(buf[G+ny+k]) != guard {
						t.Fatalf("case %d (x %v, stride %d, flat off %v, %d workers): wrote outside the output", i, xs, s, off, p.Workers())
					}
				}
			}
		}
	}
}
