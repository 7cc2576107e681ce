package signal

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// col2imPlan is the geometry of a Col2Im node with s spatial dimensions.
type col2imPlan struct {
	n, c                          int
	image, block, grid            []int
	dil, padBegin, stride         []int
	kernelSize, blocks, imageSize int
}

// runCol2Im rearranges column blocks [N, C·∏block, L] into an image
// [N, C, image...], summing overlapping values. For each (n, c) the
// contributions are added in this fixed order: kernel offset outer (row-major
// over block_shape), block index inner (row-major over the block grid); each
// output element is therefore a sequential sum, in the element type, over
// its contributions in that order, starting from zero.
func runCol2Im(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, fmt.Errorf("Col2Im: missing input")
	}
	p, err := planCol2Im(n, x.Shape, kernel.Input(in, 1), kernel.Input(in, 2))
	if err != nil {
		return nil, err
	}
	shape := append([]int{p.n, p.c}, p.image...)
	switch d := x.Data.(type) {
	case []float32:
		return []*tensor.Tensor{tensor.From(col2im(p, d), shape...)}, nil
	case []float64:
		return []*tensor.Tensor{tensor.From(col2im(p, d), shape...)}, nil
	case []int8:
		return []*tensor.Tensor{tensor.From(col2im(p, d), shape...)}, nil
	case []int16:
		return []*tensor.Tensor{tensor.From(col2im(p, d), shape...)}, nil
	case []int32:
		return []*tensor.Tensor{tensor.From(col2im(p, d), shape...)}, nil
	case []int64:
		return []*tensor.Tensor{tensor.From(col2im(p, d), shape...)}, nil
	case []uint8:
		return []*tensor.Tensor{tensor.From(col2im(p, d), shape...)}, nil
	case []uint16:
		return []*tensor.Tensor{tensor.From(col2im(p, d), shape...)}, nil
	case []uint32:
		return []*tensor.Tensor{tensor.From(col2im(p, d), shape...)}, nil
	case []uint64:
		return []*tensor.Tensor{tensor.From(col2im(p, d), shape...)}, nil
	case []tensor.Half, []tensor.BHalf:
		out := col2im(p, toF32(x))
		v := make([]float64, len(out))
		for i, f := range out {
			v[i] = float64(f)
		}
		return []*tensor.Tensor{tensor.FromFloat64s(x.DType, shape, v)}, nil
	}
	return nil, fmt.Errorf("Col2Im: input must be numeric, got %v", x.DType)
}

func planCol2Im(n *ir.Node, xs []int, imageT, blockT *tensor.Tensor) (col2imPlan, error) {
	var p col2imPlan
	if imageT == nil || blockT == nil {
		return p, fmt.Errorf("Col2Im: needs inputs image_shape and block_shape")
	}
	image, err1 := imageT.Int64s()
	block, err2 := blockT.Int64s()
	if err1 != nil || err2 != nil || imageT.Rank() != 1 || blockT.Rank() != 1 {
		return p, fmt.Errorf("Col2Im: image_shape and block_shape must be 1-D integer tensors")
	}
	s := len(image)
	if s == 0 || len(block) != s {
		return p, fmt.Errorf("Col2Im: image_shape (%d values) and block_shape (%d values) must have the same non-zero length", s, len(block))
	}
	if len(xs) != 3 {
		return p, fmt.Errorf("Col2Im: input must have shape [N, C*prod(block_shape), L], got %s", tensor.ShapeString(xs))
	}
	dil := n.Ints("dilations", nil)
	pads := n.Ints("pads", nil)
	strides := n.Ints("strides", nil)
	if dil == nil {
		dil = ones(s)
	}
	if strides == nil {
		strides = ones(s)
	}
	if pads == nil {
		pads = make([]int64, 2*s)
	}
	if len(dil) != s || len(strides) != s || len(pads) != 2*s {
		return p, fmt.Errorf("Col2Im: dilations and strides need %d values and pads %d, got %d, %d and %d", s, 2*s, len(dil), len(strides), len(pads))
	}
	p.kernelSize, p.blocks, p.imageSize = 1, 1, 1
	for i := range s {
		if image[i] <= 0 || block[i] <= 0 || dil[i] <= 0 || strides[i] <= 0 || pads[i] < 0 || pads[s+i] < 0 ||
			image[i] > 1<<30 || block[i] > 1<<30 || dil[i] > 1<<30 || strides[i] > 1<<30 || pads[i] > 1<<30 || pads[s+i] > 1<<30 {
			return p, fmt.Errorf("Col2Im: dimension %d: image %d, block %d, dilation %d, stride %d, pads %d/%d must be positive (pads non-negative)", i, image[i], block[i], dil[i], strides[i], pads[i], pads[s+i])
		}
		ext := dil[i]*(block[i]-1) + 1
		span := image[i] + pads[i] + pads[s+i] - ext
		if span < 0 {
			return p, fmt.Errorf("Col2Im: dimension %d: the dilated block (%d) is larger than the padded image (%d)", i, ext, image[i]+pads[i]+pads[s+i])
		}
		g := int(span/strides[i] + 1)
		p.image = append(p.image, int(image[i]))
		p.block = append(p.block, int(block[i]))
		p.grid = append(p.grid, g)
		p.dil = append(p.dil, int(dil[i]))
		p.stride = append(p.stride, int(strides[i]))
		p.padBegin = append(p.padBegin, int(pads[i]))
		p.kernelSize *= int(block[i])
		p.blocks *= g
		p.imageSize *= int(image[i])
		if p.kernelSize > 1<<30 || p.blocks > 1<<30 || p.imageSize > 1<<30 {
			return p, fmt.Errorf("Col2Im: sizes too large")
		}
	}
	if xs[1]%p.kernelSize != 0 {
		return p, fmt.Errorf("Col2Im: input dimension 1 (%d) is not a multiple of prod(block_shape) = %d", xs[1], p.kernelSize)
	}
	if xs[2] != p.blocks {
		return p, fmt.Errorf("Col2Im: input dimension 2 is %d, but the image, block, pads, dilations and strides give %d blocks", xs[2], p.blocks)
	}
	p.n, p.c = xs[0], xs[1]/p.kernelSize
	return p, nil
}

func ones(n int) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

func col2im[T kernel.Number](p col2imPlan, x []T) []T {
	s := len(p.image)
	out := make([]T, p.n*p.c*p.imageSize)
	imgSt := tensor.Strides(p.image)
	kidx := make([]int, s)
	gidx := make([]int, s)
	for b := range p.n * p.c {
		src := x[b*p.kernelSize*p.blocks:]
		dst := out[b*p.imageSize:]
		clear(kidx)
		for k := range p.kernelSize {
			clear(gidx)
			for l := range p.blocks {
				off, inside := 0, true
				for d := range s {
					pos := gidx[d]*p.stride[d] - p.padBegin[d] + kidx[d]*p.dil[d]
					if pos < 0 || pos >= p.image[d] {
						inside = false
						break
					}
					off += pos * imgSt[d]
				}
				if inside {
					dst[off] += src[k*p.blocks+l]
				}
				next(gidx, p.grid)
			}
			next(kidx, p.block)
		}
	}
	return out
}

// next advances a row-major multi-index.
func next(idx, shape []int) {
	for d := len(idx) - 1; d >= 0; d-- {
		if idx[d]++; idx[d] < shape[d] {
			return
		}
		idx[d] = 0
	}
}

func inferCol2Im(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x := inferInput(in, 0)
	if !x.Present {
		return nil, fmt.Errorf("Col2Im: missing input")
	}
	image, ok1 := kernel.ConstInts(inferInput(in, 1))
	block, ok2 := kernel.ConstInts(inferInput(in, 2))
	if !ok1 {
		return []ir.Type{kernel.UnknownRank(x.Type.DType)}, nil
	}
	t := ir.Type{DType: x.Type.DType, RankKnown: true, Shape: []ir.Dim{ir.Unknown, ir.Unknown}}
	for _, v := range image {
		t.Shape = append(t.Shape, ir.Dim{Value: v})
	}
	if x.Type.RankKnown && len(x.Type.Shape) == 3 {
		t.Shape[0] = x.Type.Shape[0]
		if c := x.Type.Shape[1]; c.Known() && ok2 {
			k := int64(1)
			for _, b := range block {
				k *= b
			}
			if k > 0 && c.Value%k == 0 {
				t.Shape[1] = ir.Dim{Value: c.Value / k}
			}
		}
	}
	return []ir.Type{t}, nil
}
