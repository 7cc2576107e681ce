package shape

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// inType returns input i's type, or an error when the input is absent.
func inType(in []ir.InferInput, i int, what string) (ir.Type, error) {
	if i >= len(in) || !in[i].Present {
		return ir.Type{}, fmt.Errorf("missing input %d (%s)", i, what)
	}
	return in[i].Type, nil
}

// inAt returns input i, or an absent input past the end.
func inAt(in []ir.InferInput, i int) ir.InferInput {
	if i < len(in) {
		return in[i]
	}
	return ir.InferInput{}
}

// present reports whether optional input i is given.
func present(in []ir.InferInput, i int) bool { return i < len(in) && in[i].Present }

// unknownDims returns a Type of rank r with every dimension unknown.
func unknownDims(dt tensor.DType, r int) ir.Type {
	s := make([]ir.Dim, r)
	for i := range s {
		s[i] = ir.Unknown
	}
	return ir.Type{DType: dt, Shape: s, RankKnown: true}
}

// known1DLen returns the length of a rank-1 input whose length is known
// (for a shape-like input that is not constant).
func known1DLen(x ir.InferInput) (int, bool) {
	if !x.Present || !x.Type.RankKnown || len(x.Type.Shape) != 1 || !x.Type.Shape[0].Known() {
		return 0, false
	}
	return int(x.Type.Shape[0].Value), true
}

// constInts returns optional input i's constant integer values.
func constInts(in []ir.InferInput, i int) ([]int64, bool) {
	if i >= len(in) {
		return nil, false
	}
	return kernel.ConstInts(in[i])
}

// dimProduct multiplies dims: known when all are known; a single
// non-unit symbolic dim passes through.
func dimProduct(ds []ir.Dim) ir.Dim {
	p := int64(1)
	var sym *ir.Dim
	for i, d := range ds {
		switch {
		case d.Known():
			p *= d.Value
		case sym == nil && d.Param != "":
			sym = &ds[i]
		default:
			return ir.Unknown
		}
	}
	if sym != nil {
		if p == 1 {
			return *sym
		}
		return ir.Unknown
	}
	return ir.Dim{Value: p}
}

// fixedDims converts concrete sizes to Dims.
func fixedDims(shape []int) []ir.Dim {
	out := make([]ir.Dim, len(shape))
	for i, d := range shape {
		out[i] = ir.Fixed(d)
	}
	return out
}

// copyDims returns a copy of ds.
func copyDims(ds []ir.Dim) []ir.Dim { return append([]ir.Dim{}, ds...) }

// inferNormAxis maps an axis for inference (same rules as kernel.NormAxis).
func inferNormAxis(axis int64, t ir.Type) (int, bool, error) {
	if !t.RankKnown {
		return 0, false, nil
	}
	a, err := kernel.NormAxis(axis, len(t.Shape))
	return a, true, err
}
