package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// TestConvStemTwin checks convStem against the portable im2col GEMM, bit
// for bit, at every vector level and 1, 2 and 3 workers: 1-4 input
// channels, 3x3, 2x2, 3x1 and 5x5 kernels (C*kh*kw up to stemMaxK), strides
// 1 and 2 (and 2x1), pads 0-2, output channels 4-16 (the last ones
// through DwTapsA), batch 1-2, with and without a bias, inputs with NaNs,
// infinities and zeros of both signs, and the epilogues: a clamp, an
// activation (one that shows a run missed or done twice), a residual.
func TestConvStemTwin(t *testing.T) {
	if !fastOK() {
		t.Skip("no AVX2+FMA")
	}
	r := rand.New(rand.NewSource(57))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	act := func(_ vmath.Vec, dst, src []float32) {
		for k, v := range src {
			dst[k] = v*0.75 - 1
		}
	}
	ran := 0
	for i := 0; i < 48; i++ {
		ks := [][2]int{{3, 3}, {2, 2}, {3, 1}, {5, 5}}[i%4]
		c := 1 + r.Intn(3)
		if ks[0]*ks[1] <= 8 {
			c = 1 + r.Intn(4)
		}
		if ks == [2]int{5, 5} {
			c = 1
		}
		n, m := 1+r.Intn(2), 4+r.Intn(stemMaxM-3)
		h, w := 5+r.Intn(40), 3+r.Intn(60)
		sh, sw := int64(1+i%2), int64(1+(i/2)%2)
		p := int64(r.Intn(3))
		node := node("Conv", ints("strides", sh, sw), ints("pads", p, p, p, p))
		x := tensor.From(specialF32(r, n*c*h*w, i%3 == 0), n, c, h, w)
		wt := tensor.From(specialF32(r, m*c*ks[0]*ks[1], i%5 == 0), m, c, ks[0], ks[1])
		in := []*tensor.Tensor{x, wt}
		if i%4 != 3 {
			in = append(in, tensor.From(specialF32(r, m, false), m))
		}
		st, err := setupConv(node, x.Shape, wt.Shape)
		if err != nil {
			t.Fatal(err)
		}
		if prod(st.g.out) <= 0 {
			continue
		}
		shape := append([]int{n, m}, st.g.out...)
		var ep kernel.Epilogue
		switch i % 3 {
		case 1:
			ep = kernel.Epilogue{Lo: 0, Hi: 6, HasLo: true, HasHi: true, Act: act}
		case 2:
			ep = kernel.Epilogue{Residual: randF32(r, prod(shape)), Lo: -1, HasLo: true}
		}
		if !stemOK(mach(nil, kernel.ISAAVX2, nil), st) {
			t.Fatalf("case %d: convStem refuses x %v w %v", i, x.Shape, wt.Shape)
		}
		want := tensor.New(tensor.Float32, shape...)
		if err := intoConv(&kernel.Ctx{Pool: pools[0], ISA: kernel.ISAPortable, Epilogue: ep}, node, in, []*tensor.Tensor{want}); err != nil {
			t.Fatal(err)
		}
		for _, isa := range vectorLevels() {
			for _, pl := range pools {
				y := tensor.New(tensor.Float32, shape...)
				for k := range y.Data.([]float32) {
					y.Data.([]float32)[k] = float32(math.NaN())
				}
				if err := intoConv(&kernel.Ctx{Pool: pl, ISA: isa, Epilogue: ep}, node, in, []*tensor.Tensor{y}); err != nil {
					t.Fatal(err)
				}
				ran++
				if d := sameF32(y.Data.([]float32), want.Data.([]float32)); d >= 0 {
					t.Fatalf("%s: y[%d] = %#x, want %#x", fmt.Sprintf("case %d (x %v, w %v, strides %d,%d, pad %d, ISA %v, %d workers)", i, x.Shape, wt.Shape, sh, sw, p, isa, pl.Workers()),
						d, math.Float32bits(y.Data.([]float32)[d]), math.Float32bits(want.Data.([]float32)[d]))
				}
			}
		}
	}
	if ran == 0 {
		t.Fatal("nothing ran")
	}
}
