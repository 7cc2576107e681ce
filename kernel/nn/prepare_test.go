package nn

import (
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// TestPrepareKeepsState: each Op.Prepare of the package builds, from the
// inputs' shapes (and constant weights) alone, the very state its Into
// then finds in the node's kernel.State: Into keeps the same value, and
// gives the bits of a call without any State.
func TestPrepareKeepsState(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(5))
	f := func(shape ...int) *tensor.Tensor { return tensor.From(randF32(r, prod(shape)), shape...) }
	x, w, b := f(2, 8, 9, 9), f(16, 8, 3, 3), f(16)
	ops := Ops()
	cases := []struct {
		n      string
		in     []*tensor.Tensor
		consts []int
		out    []int
	}{
		{"Conv", []*tensor.Tensor{x, w, b}, []int{1, 2}, []int{2, 16, 7, 7}},
		{"MaxPool", []*tensor.Tensor{x}, nil, []int{2, 8, 8, 8}},
		{"MatMul", []*tensor.Tensor{f(7, 9), f(9, 5)}, []int{1}, []int{7, 5}},
	}
	for _, c := range cases {
		n := node(c.n)
		if c.n == "MaxPool" {
			n = node(c.n, ints("kernel_shape", 2, 2))
		}
		op := ops[c.n]
		k := &kernel.Ctx{State: new(kernel.State)}
		in := make([]*tensor.Tensor, len(c.in))
		for i, t := range c.in {
			in[i] = &tensor.Tensor{DType: t.DType, Shape: t.Shape}
		}
		for _, i := range c.consts {
			in[i] = c.in[i]
		}
		if err := op.Prepare(k, n, in); err != nil {
			t.Fatalf("%s: Prepare: %v", c.n, err)
		}
		kept := func() any {
			v, _ := kernel.Prepared(k, setupKey{n}, func(any) bool { return true }, func() (any, error) {
				t.Fatalf("%s: nothing kept under the setup key", c.n)
				return nil, nil
			})
			return v
		}
		before, kept0 := kept(), k.State.Len()
		got, want := tensor.New(tensor.Float32, c.out...), tensor.New(tensor.Float32, c.out...)
		if err := op.Into(k, n, c.in, []*tensor.Tensor{got}); err != nil {
			t.Fatal(err)
		}
		if kept() != before || k.State.Len() != kept0 {
			t.Fatalf("%s: Into built its state again (%d values kept)", c.n, k.State.Len())
		}
		if err := op.Into(&kernel.Ctx{}, n, c.in, []*tensor.Tensor{want}); err != nil {
			t.Fatal(err)
		}
		if d := sameF32(got.Data.([]float32), want.Data.([]float32)); d >= 0 {
			t.Fatalf("%s: y[%d] differs with prepared state", c.n, d)
		}
	}
}
