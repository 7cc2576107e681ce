package image

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// Stencil is one axis of a linear or cubic Resize as the float32 kernel
// runs it: output index o reads input indices Idx[Off[o]:Off[o+1]] with
// weights W[...] (rounded to float32 as interpInto rounds them); Outside[o]
// marks an output that tf_crop_and_resize puts outside the input.
type Stencil struct {
	Off, Idx []int
	W        []float32
	Outside  []bool
}

// ResizeStencils computes, with the CPU kernel's own code (the attributes,
// the geometry and the per-axis taps runResize and interpolate use), the
// output shape and per-axis stencils of a float32 linear or cubic Resize
// (or Upsample) n of an input of shape x; in are n's inputs with X's data
// absent (in[0] is ignored: only the constants roi, scales and sizes are
// read). separable reports whether interpolate takes its separable path,
// which stores NaNs as 0x7fc00000. It is for the GPU's Resize, which runs
// the same chains over the same weights (cuda/engine).
func ResizeStencils(n *ir.Node, x []int, in []*tensor.Tensor) (out []int, st []Stencil, separable bool, err error) {
	a, g, err := resizeOf(n, x, in)
	if err != nil {
		return nil, nil, false, err
	}
	if a.mode == "nearest" {
		return nil, nil, false, fmt.Errorf("%s: nearest mode has no stencils here (it copies values)", n.OpType)
	}
	for d := range x {
		if g.out[d] > 0 && x[d] == 0 {
			return nil, nil, false, fmt.Errorf("%s: cannot resize an empty axis %d to %d", n.OpType, d, g.out[d])
		}
	}
	if tensor.NumElems(g.out) == 0 {
		return g.out, nil, false, nil
	}
	w := walkerOf(&a, &tensor.Tensor{DType: tensor.Float32, Shape: x}, g)
	st = make([]Stencil, len(w.tp))
	for d, t := range w.tp {
		st[d] = Stencil{Off: t.off, Idx: t.idx, W: f32s(t.w), Outside: t.outside}
	}
	return g.out, st, separableOK(w), nil
}

// resizeOf reads a Resize's (or Upsample's) attributes and constant inputs
// (roi, scales, sizes; in[0], the data, is not read) and derives its
// geometry for an input of shape x: runResize's and ResizeStencils'
// common first step.
func resizeOf(n *ir.Node, x []int, in []*tensor.Tensor) (resizeAttrs, *geometry, error) {
	a, err := readResizeAttrs(n)
	if err != nil {
		return a, nil, fmt.Errorf("%s: %w", n.OpType, err)
	}
	roiT, scalesT, sizesT := resizeInputs(n, in, func(t *tensor.Tensor) bool { return t != nil && t.Len() > 0 })
	var roiV, scalesV []float64
	var sizesV []int64
	if roiT != nil {
		if roiV, err = roiT.Float64s(); err != nil {
			return a, nil, fmt.Errorf("%s: roi: %w", n.OpType, err)
		}
	}
	if scalesT != nil {
		if !scalesT.DType.IsFloat() {
			return a, nil, fmt.Errorf("%s: scales must be float, got %v", n.OpType, scalesT.DType)
		}
		scalesV, _ = scalesT.Float64s()
	}
	if n.OpType == "Upsample" && n.Version > 0 && n.Version < 9 {
		for _, s := range n.Floats("scales", nil) {
			scalesV = append(scalesV, float64(s))
		}
	}
	if sizesT != nil {
		if sizesT.DType != tensor.Int64 {
			return a, nil, fmt.Errorf("%s: sizes must be int64, got %v", n.OpType, sizesT.DType)
		}
		sizesV, _ = sizesT.Int64s()
	}
	g, err := resizeGeometry(n, a, x, roiV, scalesV, sizesV)
	if err != nil {
		return a, nil, fmt.Errorf("%s: %w", n.OpType, err)
	}
	return a, g, nil
}
