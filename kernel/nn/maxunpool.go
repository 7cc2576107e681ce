package nn

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// unpoolShape is MaxUnpool's default output shape: per spatial dimension
// (in-1)*stride + kernel - padB - padE.
func unpoolShape(n *ir.Node, x []int) ([]int, error) {
	if len(x) < 3 {
		return nil, fmt.Errorf("nn: MaxUnpool: X must have rank >= 3, got %v", x)
	}
	nd := len(x) - 2
	ks := n.Ints("kernel_shape", nil)
	if len(ks) != nd {
		return nil, fmt.Errorf("nn: MaxUnpool: kernel_shape %v must have %d values", ks, nd)
	}
	st, err := attrInts(n, "strides", nd, 1)
	if err != nil {
		return nil, err
	}
	pads, err := attrInts(n, "pads", 2*nd, 0)
	if err != nil {
		return nil, err
	}
	out := []int{x[0], x[1]}
	for i := 0; i < nd; i++ {
		out = append(out, (x[i+2]-1)*st[i]+int(ks[i])-pads[i]-pads[nd+i])
	}
	return out, nil
}

func runMaxUnpool(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 2, "MaxUnpool"); err != nil {
		return nil, err
	}
	x, ix := in[0], in[1]
	out, err := unpoolShape(n, x.Shape)
	if err != nil {
		return nil, err
	}
	def := out
	if os := kernel.Input(in, 2); os != nil {
		v, err := os.Int64s()
		if err != nil || len(v) != len(out) {
			return nil, fmt.Errorf("nn: MaxUnpool: output_shape must hold %d integers", len(out))
		}
		out = intsOf(v)
	}
	idx, err := ix.Int64s()
	if err != nil || len(idx) != x.Len() {
		return nil, fmt.Errorf("nn: MaxUnpool: I %v must be integer with the shape of X %v", ix.Shape, x.Shape)
	}
	y := tensor.New(x.DType, out...)
	total := int64(prod(def))
	// Indices address the default output shape; a given output_shape
	// places each element at the same coordinates.
	remap := !equalInts(def, out)
	defStr, outStr := tensor.Strides(def), tensor.Strides(out)
	for i, v := range idx {
		if v < 0 || v >= total {
			return nil, fmt.Errorf("nn: MaxUnpool: index %d at %d is outside the output of %d elements", v, i, total)
		}
		if remap {
			var o int64
			for d := range def {
				c := v / int64(defStr[d]) % int64(def[d])
				if c >= int64(out[d]) {
					return nil, fmt.Errorf("nn: MaxUnpool: index %d does not fit output_shape %v", v, out)
				}
				o += c * int64(outStr[d])
			}
			idx[i] = o
		}
	}
	if err := scatter(y.Data, x.Data, idx); err != nil {
		return nil, err
	}
	return []*tensor.Tensor{y}, nil
}

func scatter(dst, src any, idx []int64) error {
	switch d := dst.(type) {
	case []float32:
		scatterT(d, src.([]float32), idx)
	case []float64:
		scatterT(d, src.([]float64), idx)
	case []tensor.Half:
		scatterT(d, src.([]tensor.Half), idx)
	case []tensor.BHalf:
		scatterT(d, src.([]tensor.BHalf), idx)
	default:
		return fmt.Errorf("nn: MaxUnpool: unsupported type")
	}
	return nil
}

func scatterT[T any](dst, src []T, idx []int64) {
	for i, v := range idx {
		dst[v] = src[i]
	}
}

func inferMaxUnpool(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := needT(in, 2, "MaxUnpool"); err != nil {
		return nil, err
	}
	t := in[0].Type
	if len(in) > 2 && in[2].Present {
		if v, ok := kernel.ConstInts(in[2]); ok {
			return []ir.Type{ir.StaticType(t.DType, intsOf(v))}, nil
		}
		if s, ok := in[2].Type.Static(); ok && len(s) == 1 {
			return []ir.Type{{DType: t.DType, Shape: unknownDims(s[0]), RankKnown: true}}, nil
		}
		return []ir.Type{kernel.UnknownRank(t.DType)}, nil
	}
	x, ok := t.Static()
	if !ok {
		if d, ok := dimsOf(t); ok {
			return []ir.Type{{DType: t.DType, Shape: append([]ir.Dim{d[0], d[1]}, unknownDims(len(d)-2)...), RankKnown: true}}, nil
		}
		return []ir.Type{t}, nil
	}
	out, err := unpoolShape(n, x)
	if err != nil {
		return nil, err
	}
	return []ir.Type{ir.StaticType(t.DType, out)}, nil
}
