package nn

import (
	"math/rand"

	"github.com/vouchml/vouch/ir"
)

// conv1DCases are 1-D convolutions for TestConvTwin: the vector kernels
// run them as one row of a 2-D convolution (conv1d.go), the portable twin
// through the 1-D im2col. Dilated (a TCN's 1-16), strided (a stem's),
// padded unevenly, several 16-channel panels and pixel chunks, grouped,
// pointwise, and random ones.
func conv1DCases(r *rand.Rand) []convCase {
	cs := []convCase{
		{[]int{1, 16, 300}, []int{20, 16, 3}, []*ir.Attr{ints("dilations", 4), ints("pads", 4, 4)}},
		{[]int{2, 5, 257}, []int{33, 5, 3}, []*ir.Attr{ints("dilations", 16), ints("pads", 16, 16)}},
		{[]int{1, 1, 1000}, []int{24, 1, 15}, []*ir.Attr{ints("strides", 4), ints("pads", 7, 7)}},
		{[]int{1, 12, 205}, []int{32, 12, 7}, []*ir.Attr{ints("pads", 3, 3)}},
		{[]int{1, 6, 50}, []int{10, 3, 5}, []*ir.Attr{intAttr("group", 2), ints("pads", 2, 1), ints("dilations", 2)}},
		{[]int{1, 8, 77}, []int{12, 8, 1}, nil},
		{[]int{1, 8, 77}, []int{12, 8, 1}, []*ir.Attr{ints("strides", 3)}},
		{[]int{1, 3, 9}, []int{5, 3, 4}, []*ir.Attr{ints("strides", 7), ints("pads", 20, 20)}},
	}
	for i := 0; i < 10; i++ {
		c, m, k, d := 1+r.Intn(20), 1+r.Intn(40), 1+r.Intn(7), 1+r.Intn(8)
		l := (k-1)*d + 1 + r.Intn(400)
		cs = append(cs, convCase{[]int{1 + r.Intn(2), c, l}, []int{m, c, k},
			[]*ir.Attr{ints("strides", int64(1+r.Intn(3))), ints("dilations", int64(d)),
				ints("pads", int64(r.Intn(k*d)), int64(r.Intn(k*d)))}})
	}
	return cs
}
