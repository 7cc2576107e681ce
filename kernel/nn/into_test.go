package nn

import (
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

func floatAttr(name string, v float32) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrFloat, F: v}
}

// TestIntoMatchesRun runs each op with an Into form through Run and Into
// (on fresh, garbage-filled outputs), compares bits, and checks that warm
// Into calls on float32 data do not allocate.
func TestIntoMatchesRun(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	f := func(shape ...int) *tensor.Tensor { return tensor.From(specialF32(r, prod(shape), true), shape...) }
	cases := []struct {
		op    string
		attrs []*ir.Attr
		in    []*tensor.Tensor
		outs  int
	}{
		{"MatMul", nil, []*tensor.Tensor{f(2, 3, 7, 33), f(33, 17)}, 1},
		{"MatMul", nil, []*tensor.Tensor{f(2, 3, 7, 33), f(2, 3, 33, 17)}, 1},
		{"MatMul", nil, []*tensor.Tensor{f(3, 7, 33), f(2, 1, 33, 17)}, 1},
		{"MatMul", nil, []*tensor.Tensor{f(33), f(33, 9)}, 1},
		{"Gemm", []*ir.Attr{intAttr("transB", 1), floatAttr("alpha", 0.5), floatAttr("beta", 2)}, []*tensor.Tensor{f(5, 40), f(19, 40), f(19)}, 1},
		{"Gemm", []*ir.Attr{intAttr("transA", 1)}, []*tensor.Tensor{f(40, 5), f(40, 19), f(5, 1)}, 1},
		{"Gemm", nil, []*tensor.Tensor{f(64, 130), f(130, 70)}, 1},
		{"Conv", []*ir.Attr{ints("pads", 1, 1, 1, 1)}, []*tensor.Tensor{f(1, 6, 12, 12), f(8, 6, 3, 3), f(8)}, 1},
		{"Conv", []*ir.Attr{intAttr("group", 6), ints("pads", 1, 1, 1, 1)}, []*tensor.Tensor{f(1, 6, 20, 20), f(6, 1, 3, 3), f(6)}, 1},
		{"Conv", nil, []*tensor.Tensor{f(1, 6, 5, 5), f(8, 6, 1, 1)}, 1},
		{"MaxPool", []*ir.Attr{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1)}, []*tensor.Tensor{f(1, 4, 11, 11)}, 2},
		{"MaxPool", []*ir.Attr{ints("kernel_shape", 2, 2), intAttr("ceil_mode", 1), ints("strides", 2, 2)}, []*tensor.Tensor{f(2, 3, 7, 7)}, 1},
		{"AveragePool", []*ir.Attr{ints("kernel_shape", 3, 3), ints("pads", 1, 1, 1, 1), intAttr("count_include_pad", 1)}, []*tensor.Tensor{f(1, 4, 9, 9)}, 1},
		{"AveragePool", []*ir.Attr{ints("kernel_shape", 2, 2), ints("strides", 2, 2)}, []*tensor.Tensor{f(1, 4, 9, 9)}, 1},
		{"GlobalAveragePool", nil, []*tensor.Tensor{f(2, 5, 7, 7)}, 1},
		{"GlobalMaxPool", nil, []*tensor.Tensor{f(2, 5, 7, 7)}, 1},
		{"LayerNormalization", nil, []*tensor.Tensor{f(2, 5, 33), f(33), f(33)}, 1},
		{"LayerNormalization", []*ir.Attr{intAttr("axis", 1), floatAttr("epsilon", 1e-3)}, []*tensor.Tensor{f(3, 4, 9), f(4, 9)}, 3},
	}
	ops := Ops()
	for i, c := range cases {
		n := node(c.op, c.attrs...)
		switch c.outs {
		case 2:
			n.Outputs = []string{"y", "idx"}
		case 3:
			n.Outputs = []string{"y", "mean", "inv"}
		}
		op := ops[c.op]
		want, err := op.Run(nil, n, c.in)
		if err != nil {
			t.Fatalf("case %d %s: Run: %v", i, c.op, err)
		}
		out := make([]*tensor.Tensor, c.outs)
		for k := range out {
			out[k] = tensor.New(want[k].DType, want[k].Shape...)
		}
		if d, ok := out[0].Data.([]float32); ok {
			for k := range d {
				d[k] = 42
			}
		}
		ctx := &kernel.Ctx{State: new(kernel.State)}
		if err := op.Into(ctx, n, c.in, out); err != nil {
			t.Fatalf("case %d %s: Into: %v", i, c.op, err)
		}
		if d := sameF32(out[0].Data.([]float32), want[0].Data.([]float32)); d >= 0 {
			t.Fatalf("case %d %s: Into y[%d] = %g, Run %g", i, c.op, d, out[0].Data.([]float32)[d], want[0].Data.([]float32)[d])
		}
		for k := 1; k < c.outs; k++ {
			if d, ok := out[k].Data.([]float32); ok {
				if j := sameF32(d, want[k].Data.([]float32)); j >= 0 {
					t.Fatalf("case %d %s: Into output %d [%d] = %g, Run %g", i, c.op, k, j, d[j], want[k].Data.([]float32)[j])
				}
			}
		}
		if c.outs == 2 && c.op == "MaxPool" {
			gi, wi := out[1].Data.([]int64), want[1].Data.([]int64)
			for k := range wi {
				if gi[k] != wi[k] {
					t.Fatalf("case %d %s: Into index %d = %d, Run %d", i, c.op, k, gi[k], wi[k])
				}
			}
		}
		allocs := testing.AllocsPerRun(5, func() {
			if err := op.Into(ctx, n, c.in, out); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 0 && !raceEnabled {
			t.Errorf("case %d %s: Into allocates %.1f times per warm call", i, c.op, allocs)
		}
	}
}
