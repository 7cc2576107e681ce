package nn

import (
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

type convCase struct {
	x, w  []int
	attrs []*ir.Attr
}

func convCases(r *rand.Rand) []convCase {
	cs := []convCase{
		{[]int{1, 8, 16, 16}, []int{8, 1, 3, 3}, []*ir.Attr{intAttr("group", 8), ints("pads", 1, 1, 1, 1)}},
		{[]int{2, 5, 9, 30}, []int{5, 1, 3, 3}, []*ir.Attr{intAttr("group", 5), ints("pads", 0, 2, 1, 0)}},
		{[]int{1, 3, 4, 4}, []int{3, 1, 3, 3}, []*ir.Attr{intAttr("group", 3)}},
		{[]int{1, 4, 13, 13}, []int{4, 1, 3, 3}, []*ir.Attr{intAttr("group", 4), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1)}},
		{[]int{1, 16, 14, 14}, []int{24, 16, 1, 1}, nil},
		{[]int{2, 3, 17, 19}, []int{7, 3, 3, 3}, []*ir.Attr{ints("pads", 1, 1, 1, 1)}},
		{[]int{1, 3, 32, 32}, []int{16, 3, 7, 7}, []*ir.Attr{ints("strides", 2, 2), ints("pads", 3, 3, 3, 3)}},
		{[]int{1, 8, 10, 10}, []int{12, 4, 3, 3}, []*ir.Attr{intAttr("group", 2), ints("pads", 1, 1, 1, 1)}},
		{[]int{1, 16, 7, 7}, []int{40, 16, 1, 1}, []*ir.Attr{ints("strides", 2, 2)}},
	}
	for i := 0; i < 12; i++ {
		c := 1 + r.Intn(6)
		h, w := 1+r.Intn(40), 1+r.Intn(40)
		p := r.Intn(2)
		cs = append(cs, convCase{[]int{1 + r.Intn(2), c, h + 2 - 2*p, w + 2 - 2*p}, []int{c, 1, 3, 3},
			[]*ir.Attr{intAttr("group", int64(c)), ints("pads", int64(p), int64(r.Intn(2)), int64(p), int64(r.Intn(2)))}})
	}
	return cs
}

// TestConvTwin: Conv on the vector kernels (GEMM, depthwise 3x3) gives the
// portable twin's bits, with specials in the data, at 1, 2 and 8 workers,
// and Into gives Run's bits.
func TestConvTwin(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for i, c := range convCases(r) {
		n := node("Conv", c.attrs...)
		x := tensor.From(specialF32(r, prod(c.x), i%2 == 0), c.x...)
		w := tensor.From(specialF32(r, prod(c.w), i%3 == 0), c.w...)
		b := tensor.From(specialF32(r, c.w[0], false), c.w[0])
		in := []*tensor.Tensor{x, w, b}
		UsePortable(true)
		want, err := runConv(nil, n, in)
		UsePortable(false)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		for _, p := range pools {
			got, err := runConv(&kernel.Ctx{Pool: p}, n, in)
			if err != nil {
				t.Fatal(err)
			}
			if d := sameF32(got[0].Data.([]float32), want[0].Data.([]float32)); d >= 0 {
				t.Fatalf("case %d (%v * %v), %d workers: y[%d] = %g, portable %g", i, c.x, c.w, p.Workers(), d, got[0].Data.([]float32)[d], want[0].Data.([]float32)[d])
			}
			y := tensor.New(tensor.Float32, want[0].Shape...)
			if err := intoConv(&kernel.Ctx{Pool: p}, n, in, []*tensor.Tensor{y}); err != nil {
				t.Fatal(err)
			}
			if d := sameF32(y.Data.([]float32), want[0].Data.([]float32)); d >= 0 {
				t.Fatalf("case %d: Into y[%d] = %g, Run %g", i, d, y.Data.([]float32)[d], want[0].Data.([]float32)[d])
			}
		}
	}
}
