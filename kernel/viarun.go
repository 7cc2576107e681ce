package kernel

import (
	"fmt"
	"reflect"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// CopyInto copies src's elements into dst, an output slot of the same
// element type and element count (the shapes may differ, as a reshape's
// slot does).
func CopyInto(dst, src *tensor.Tensor) error {
	if dst.DType != src.DType || dst.Len() != src.Len() {
		return fmt.Errorf("cannot copy %v%v into an output slot of %v%v", src.DType, src.Shape, dst.DType, dst.Shape)
	}
	switch d := dst.Data.(type) {
	case []float32:
		copy(d, src.Data.([]float32))
	case []int64:
		copy(d, src.Data.([]int64))
	default:
		if reflect.TypeOf(dst.Data) != reflect.TypeOf(src.Data) {
			return fmt.Errorf("cannot copy %T into an output slot of %T", src.Data, dst.Data)
		}
		reflect.Copy(reflect.ValueOf(dst.Data), reflect.ValueOf(src.Data))
	}
	return nil
}

// ViaRun is the Into of a kernel for inputs its allocation-free path does
// not take (an element type, a rank): it runs run, then copies each result
// into its output slot (a nil slot is skipped).
func ViaRun(run RunFunc, c *Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	res, err := run(c, n, in)
	if err != nil {
		return err
	}
	for i, o := range out {
		if o == nil {
			continue
		}
		if i >= len(res) || res[i] == nil {
			return fmt.Errorf("%s: %d results, no result for output %d", n.OpType, len(res), i)
		}
		if err := CopyInto(o, res[i]); err != nil {
			return fmt.Errorf("%s: output %d: %w", n.OpType, i, err)
		}
	}
	return nil
}
