package image

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/kerneltest"
	"github.com/vouchml/vouch/tensor"
)

// TestSeparableTwins checks the separable float32 Resize, bit for bit,
// at every level (AVX-512 kernel, portable twin) and against interpInto
// (canonicalised), over linear and cubic modes, the coordinate modes,
// up- and downsampling, odd sizes, rank 3 to 5 and NaN/Inf/-0 inputs.
func TestSeparableTwins(t *testing.T) {
	r := rand.New(rand.NewSource(16))
	type tc struct {
		mode, ctm string
		in        []int
		scales    []float32
	}
	cases := []tc{
		{"linear", "half_pixel", []int{1, 3, 28, 28}, []float32{1, 1, 8, 8}},
		{"linear", "pytorch_half_pixel", []int{2, 2, 7, 9}, []float32{1, 1, 2.5, 3}},
		{"linear", "align_corners", []int{1, 2, 5, 6}, []float32{1, 1, 3, 2}},
		{"linear", "asymmetric", []int{1, 1, 17, 33}, []float32{1, 1, 0.5, 0.75}},
		{"cubic", "half_pixel", []int{1, 2, 6, 10}, []float32{1, 1, 2, 1.5}},
		{"cubic", "align_corners", []int{3, 9, 11}, []float32{1, 2, 2}},
		{"linear", "half_pixel", []int{1, 2, 2, 4, 5}, []float32{1, 1, 1, 4, 3}},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d_%s_%s_%v", i, c.mode, c.ctm, c.in), func(t *testing.T) {
			x := tensor.New(tensor.Float32, c.in...)
			d := x.Data.([]float32)
			for j := range d {
				d[j] = float32(r.NormFloat64())
			}
			d[1], d[len(d)/2], d[len(d)-1] = float32(math.NaN()), float32(math.Inf(-1)), float32(math.Copysign(0, -1))
			n := node("Resize", 13, str("mode", c.mode), str("coordinate_transformation_mode", c.ctm))
			in := []*tensor.Tensor{x, nil, tensor.From(c.scales, len(c.scales))}
			ref, err := kerneltest.Twins(t, "Resize", nil, func(kc *kernel.Ctx) ([]*tensor.Tensor, error) { return runResize(kc, n, in) })
			if err != nil {
				t.Fatal(err)
			}
			// The portable separable path against interpInto.
			a, _ := readResizeAttrs(n)
			g, err := resizeGeometry(n, a, x.Shape, nil, f64(c.scales), nil)
			if err != nil {
				t.Fatal(err)
			}
			w := walkerOf(&a, x, g)
			if !separableOK(w) {
				t.Fatal("not separable")
			}
			got := make([]float32, ref[0].Len())
			separable32(w, d, got, tapsGo)
			want := ref[0].Data.([]float32)
			for j := range want {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("element %d: portable separable %v, interpInto %v", j, got[j], want[j])
				}
			}
		})
	}
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestSeparableNegZero pins the outer axes' fma(1, v, +0): a chain of
// two halves of -denorm_min rounds to -0 (ties to even), which interpInto
// stores as +0, and so must every level of the separable path.
func TestSeparableNegZero(t *testing.T) {
	x := tensor.New(tensor.Float32, 1, 2, 2, 20)
	d := x.Data.([]float32)
	for i := range d {
		d[i] = -math.Float32frombits(1)
	}
	n := node("Resize", 13, str("mode", "linear"), str("coordinate_transformation_mode", "align_corners"))
	in := []*tensor.Tensor{x, nil, tensor.From([]float32{1, 1, 1.5, 1}, 4)}
	ref, err := kerneltest.Twins(t, "Resize", nil, func(kc *kernel.Ctx) ([]*tensor.Tensor, error) { return runResize(kc, n, in) })
	if err != nil {
		t.Fatal(err)
	}
	got := ref[0].Data.([]float32)
	for j, v := range got {
		if math.Float32bits(v) == 0x80000000 {
			t.Fatalf("element %d is -0", j)
		}
	}
	a, _ := readResizeAttrs(n)
	g, _ := resizeGeometry(n, a, x.Shape, nil, []float64{1, 1, 1.5, 1}, nil)
	w := walkerOf(&a, x, g)
	sep := make([]float32, len(got))
	separable32(w, d, sep, tapsGo)
	for j := range got {
		if math.Float32bits(sep[j]) != math.Float32bits(got[j]) {
			t.Fatalf("element %d: portable separable %#x, interpInto %#x", j, math.Float32bits(sep[j]), math.Float32bits(got[j]))
		}
	}
}
