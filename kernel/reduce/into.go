package reduce

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// The Into forms (kernel.Op.Into) run the same loops as Run on float32 data
// without allocating; other element types run Run and copy its result.
//
// Softmax and LogSoftmax are marked InPlace: each line reads x[j] before it
// writes y[j] at the same offset, and reads only the line's own elements,
// so out may share storage with the input.

// maxRank is the largest input rank the allocation-free reductions take.
const maxRank = 8

func viaRun(run kernel.RunFunc, c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if err := kernel.ViaRun(run, c, n, in, out); err != nil {
		return fmt.Errorf("reduce: %w", err)
	}
	return nil
}

func softmaxInto(k smKind) kernel.IntoFunc {
	run := runSoftmax(k)
	return func(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
		x := kernel.Input(in, 0)
		if x == nil || len(out) == 0 || out[0] == nil {
			return fmt.Errorf("reduce: %s needs an input and an output", n.OpType)
		}
		xs, ok1 := x.Data.([]float32)
		ys, ok2 := out[0].Data.([]float32)
		if !ok1 || !ok2 || len(xs) != len(ys) {
			return viaRun(run, c, n, in, out)
		}
		outer, size, inner, err := softmaxGeometry(n, x.Shape)
		if err != nil {
			return err
		}
		softmaxPar(c.Workers(), c.Vec(), k, xs, ys, geom{outer, size, inner})
		return nil
	}
}

// reduceInto is the Into form of ReduceSum and ReduceMean: float32 inputs
// accumulate in input order into each output, as reduceFloat does.
func reduceInto(name string, k kind) kernel.IntoFunc {
	run := runReduce(name, k)
	return func(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
		x := kernel.Input(in, 0)
		if x == nil || len(out) == 0 || out[0] == nil {
			return fmt.Errorf("reduce: %s needs an input and an output", name)
		}
		xs, ok1 := x.Data.([]float32)
		ys, ok2 := out[0].Data.([]float32)
		rank := len(x.Shape)
		if !ok1 || !ok2 || rank > maxRank {
			return viaRun(run, c, n, in, out)
		}
		var reduced [maxRank]bool
		var axes []int64
		if !axesFromInput(n) {
			axes = n.Ints("axes", nil)
		} else if a := kernel.Input(in, 1); a != nil {
			v, ok := a.Data.([]int64)
			if !ok || len(a.Shape) > 1 {
				return viaRun(run, c, n, in, out) // Run reports the error
			}
			axes = v
		}
		if len(axes) == 0 {
			if axesFromInput(n) && n.Int("noop_with_empty_axes", 0) != 0 {
				if len(ys) != len(xs) {
					return fmt.Errorf("reduce: %s: output slot holds %d elements, input has %d", name, len(ys), len(xs))
				}
				copy(ys, xs)
				return nil
			}
			for i := 0; i < rank; i++ {
				reduced[i] = true
			}
		}
		for _, a := range axes {
			ax, err := kernel.NormAxis(a, rank)
			if err != nil {
				return fmt.Errorf("reduce: axes %v: %w", axes, err)
			}
			if reduced[ax] {
				return fmt.Errorf("reduce: axes %v name axis %d twice", axes, ax)
			}
			reduced[ax] = true
		}
		// Output strides over the input's dimensions: 0 on reduced axes.
		var ost [maxRank]int
		s, cnt := 1, 1
		for d := rank - 1; d >= 0; d-- {
			if reduced[d] {
				cnt *= x.Shape[d]
			} else {
				ost[d] = s
				s *= x.Shape[d]
			}
		}
		if s != len(ys) && len(xs) != 0 {
			return fmt.Errorf("reduce: %s: output slot holds %d elements, want %d", name, len(ys), s)
		}
		clear(ys)
		if a, b, inner, ok := blocks(x.Shape, reduced[:rank]); ok && len(xs) > 0 {
			if inner == 1 {
				c.Vec().SumRows32(ys, xs, b) // each row's chain, in order (vmath)
			} else {
				sumPlanes(xs, ys, a, b, inner)
			}
		} else if len(xs) > 0 {
			var idx [maxRank]int
			o := 0
			shape := x.Shape
			for i := range xs {
				ys[o] += xs[i]
				for d := rank - 1; d >= 0; d-- {
					idx[d]++
					o += ost[d]
					if idx[d] < shape[d] {
						break
					}
					o -= ost[d] * shape[d]
					idx[d] = 0
				}
			}
		}
		if k == kMean {
			c := float32(cnt)
			for o := range ys {
				ys[o] /= c
			}
		}
		return nil
	}
}

// addInto gives the table's hot operators their Into forms.
func addInto(t kernel.Table) {
	t["Softmax"].Into, t["Softmax"].InPlace = softmaxInto(softmaxKind), true
	t["LogSoftmax"].Into, t["LogSoftmax"].InPlace = softmaxInto(logSoftmaxKind), true
	t["ReduceSum"].Into = reduceInto("ReduceSum", kSum)
	t["ReduceMean"].Into = reduceInto("ReduceMean", kMean)
}

// blocks views shape as [a, b, inner] with the b axes the reduced ones,
// when the reduced axes are consecutive (after merging axes of size 1):
// a outer rows, b reduced values each, inner values apart.
func blocks(shape []int, reduced []bool) (a, b, inner int, ok bool) {
	a, b, inner = 1, 1, 1
	state := 0 // 0: outer, 1: reduced, 2: inner
	for d, n := range shape {
		if n == 1 {
			continue
		}
		switch {
		case reduced[d] && state <= 1:
			state, b = 1, b*n
		case !reduced[d] && state == 0:
			a *= n
		case !reduced[d]:
			state, inner = 2, inner*n
		default: // a reduced axis after an inner one
			return 0, 0, 0, false
		}
	}
	return a, b, inner, true
}

// sumPlanes adds, for each of a outer blocks, its b planes of inner
// values into the block's inner outputs, plane after plane: each output
// gets its b values in the walk's order.
func sumPlanes(x, y []float32, a, b, inner int) {
	for o := range a {
		yo := y[o*inner : (o+1)*inner]
		for k := range b {
			xk := x[(o*b+k)*inner : (o*b+k+1)*inner]
			for i, v := range xk {
				yo[i] += v
			}
		}
	}
}
