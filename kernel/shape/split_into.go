package shape

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// splitInto is Split's Into: output i receives, for each index of the
// dimensions before axis, the next out[i].Shape[axis] slices along axis,
// exactly Run's copies. The split sizes are the output slots' own (the
// executor allocates them at the inferred shapes, which come from the same
// split attribute or constant input); they must cover the axis and agree
// with the input on every other dimension. Slots of a rank beyond maxRank,
// or a missing slot, run Run and copy.
func splitInto(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	x, err := checkIn(in, 0, "input")
	if err != nil {
		return err
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), x.Rank())
	if err != nil {
		return err
	}
	if len(out) != len(n.Outputs) || x.Rank() > maxRank {
		return viaRun(runSplit, c, n, in, out)
	}
	total := 0
	for i, o := range out {
		if o == nil {
			return viaRun(runSplit, c, n, in, out)
		}
		if o.DType != x.DType || len(o.Shape) != len(x.Shape) {
			return fmt.Errorf("output slot %d is %v%v for input %v%v", i, o.DType, o.Shape, x.DType, x.Shape)
		}
		for d, v := range o.Shape {
			if d != axis && v != x.Shape[d] {
				return fmt.Errorf("output slot %d has shape %v, input %v (axis %d)", i, o.Shape, x.Shape, axis)
			}
		}
		total += o.Shape[axis]
	}
	if total != x.Shape[axis] {
		return fmt.Errorf("output slots take %d along axis %d, input has %d", total, axis, x.Shape[axis])
	}
	outer := tensor.NumElems(x.Shape[:axis])
	inner := tensor.NumElems(x.Shape[axis+1:])
	row := x.Shape[axis] * inner
	switch s := x.Data.(type) {
	case []float32:
		splitCopy(s, out, axis, outer, inner, row)
	case []int64:
		splitCopy(s, out, axis, outer, inner, row)
	case []float64:
		splitCopy(s, out, axis, outer, inner, row)
	case []int32:
		splitCopy(s, out, axis, outer, inner, row)
	default:
		e := wrap(x.Data)
		off := 0
		for _, o := range out {
			blk := o.Shape[axis] * inner
			for k := 0; k < outer; k++ {
				e.copyTo(o.Data, k*blk, k*row+off, blk)
			}
			off += blk
		}
	}
	return nil
}

func splitCopy[T any](s []T, out []*tensor.Tensor, axis, outer, inner, row int) {
	off := 0
	for _, o := range out {
		d := o.Data.([]T)
		blk := o.Shape[axis] * inner
		for k := 0; k < outer; k++ {
			copy(d[k*blk:(k+1)*blk], s[k*row+off:k*row+off+blk])
		}
		off += blk
	}
}
