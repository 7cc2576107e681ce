package ml

import (
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// perFeature expands an attribute of one value or nfeat values to nfeat
// values (def when absent).
func perFeature(n *ir.Node, name string, v []float32, nfeat int, def float32) ([]float32, error) {
	out := make([]float32, nfeat)
	switch len(v) {
	case 0:
		for j := range out {
			out[j] = def
		}
	case 1:
		for j := range out {
			out[j] = v[0]
		}
	case nfeat:
		copy(out, v)
	default:
		return nil, errorf(n, "%s has %d values for %d features (want 1 or %d)", name, len(v), nfeat, nfeat)
	}
	return out, nil
}

// ScalerAffine returns per-feature (scale, offset) of a Scaler node so contributions can be mapped back to raw inputs.
//
// The Scaler computes y[j] = (x[j] - offset[j]) · scale[j], two float32
// roundings; a contribution c·y[j] of a linear model that follows is
// therefore c·scale[j]·x[j] - c·scale[j]·offset[j] in the raw feature.
func ScalerAffine(n *ir.Node, nfeat int) (scale, offset []float32, err error) {
	if n.OpType != "Scaler" {
		return nil, nil, errorf(n, "ScalerAffine needs a Scaler node")
	}
	if nfeat < 1 || nfeat > maxAttr {
		return nil, nil, errorf(n, "ScalerAffine: %d features", nfeat)
	}
	if scale, err = perFeature(n, "scale", n.Floats("scale", nil), nfeat, 1); err != nil {
		return nil, nil, err
	}
	if offset, err = perFeature(n, "offset", n.Floats("offset", nil), nfeat, 0); err != nil {
		return nil, nil, err
	}
	return scale, offset, nil
}

func runScaler(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, errorf(n, "missing input X")
	}
	y := tensor.New(tensor.Float32, x.Shape...)
	if err := intoScaler(c, n, in, []*tensor.Tensor{y}); err != nil {
		return nil, err
	}
	return []*tensor.Tensor{y}, nil
}

// intoScaler computes (x - offset) · scale, each a float32 rounding, with
// offset and scale given once or per feature.
func intoScaler(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	x, rows, cols, err := floatRows(n, kernel.Input(in, 0))
	if err != nil {
		return err
	}
	y, ok := out[0].Data.([]float32)
	if !ok || len(y) != len(x) {
		return errorf(n, "output is %v, want float32 of %d elements", out[0], len(x))
	}
	scale, offset := n.Floats("scale", nil), n.Floats("offset", nil)
	for _, a := range []struct {
		name string
		v    []float32
	}{{"scale", scale}, {"offset", offset}} {
		if len(a.v) > 1 && len(a.v) != cols {
			return errorf(n, "%s has %d values for %d features (want 1 or %d)", a.name, len(a.v), cols, cols)
		}
	}
	at := func(v []float32, j int, def float32) float32 {
		switch len(v) {
		case 0:
			return def
		case 1:
			return v[0]
		}
		return v[j]
	}
	for r := range rows {
		for j := range cols {
			i := r*cols + j
			y[i] = float32(x[i]-at(offset, j, 0)) * at(scale, j, 1)
		}
	}
	return nil
}

func inferScaler(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := checkNumericInput(n, in); err != nil {
		return nil, err
	}
	if d := featureDim(in[0].Type); d.Known() && d.Value > 0 {
		if _, _, err := ScalerAffine(n, int(d.Value)); err != nil {
			return nil, err
		}
	}
	return inferFloatSame(n, in)
}

// inferFloatSame: one float output of the input's shape.
func inferFloatSame(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := checkNumericInput(n, in); err != nil {
		return nil, err
	}
	t := in[0].Type
	t.DType = tensor.Float32
	return []ir.Type{t}, nil
}

// runNormalizer divides each row by its largest element (MAX), the sum of
// its absolute values (L1) or its Euclidean norm (L2); a row whose divisor
// is zero is copied unchanged (ONNX Runtime). Sums run in ascending order,
// the squares as one FMA chain.
func runNormalizer(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, errorf(n, "missing input X")
	}
	y := tensor.New(tensor.Float32, x.Shape...)
	if err := intoNormalizer(c, n, in, []*tensor.Tensor{y}); err != nil {
		return nil, err
	}
	return []*tensor.Tensor{y}, nil
}

func intoNormalizer(c *kernel.Ctx, n *ir.Node, in, outs []*tensor.Tensor) error {
	norm := n.String("norm", "MAX")
	switch norm {
	case "MAX", "L1", "L2":
	default:
		return errorf(n, "unknown norm %q (MAX, L1 or L2)", norm)
	}
	x, rows, cols, err := floatRows(n, kernel.Input(in, 0))
	if err != nil {
		return err
	}
	out, ok := outs[0].Data.([]float32)
	if !ok || len(out) != len(x) {
		return errorf(n, "output is %v, want float32 of %d elements", outs[0], len(x))
	}
	for r := range rows {
		row := x[r*cols : (r+1)*cols]
		var d float32
		switch norm {
		case "MAX":
			d = float32(math.Inf(-1))
			for _, v := range row {
				d = max(d, v)
			}
		case "L1":
			for _, v := range row {
				d += float32(math.Abs(float64(v)))
			}
		case "L2":
			for _, v := range row {
				d = vmath.FMA32(v, v, d)
			}
			d = sqrt32(d)
		}
		o := out[r*cols : (r+1)*cols]
		for j, v := range row {
			if d == 0 || cols == 0 {
				o[j] = v
			} else {
				o[j] = v / d
			}
		}
	}
	return nil
}

// runBinarizer maps each element to 1 where it is greater than threshold
// and 0 elsewhere (NaN included), in the input's dtype.
func runBinarizer(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, errorf(n, "missing input X")
	}
	th := float64(n.Float("threshold", 0))
	switch x.DType {
	case tensor.Float32, tensor.Float64, tensor.Int64, tensor.Int32:
	default:
		return nil, errorf(n, "input X has dtype %v (float, double, int64 or int32 only)", x.DType)
	}
	y := tensor.New(x.DType, x.Shape...)
	switch d := x.Data.(type) {
	case []float32:
		binarize(d, y.Data.([]float32), th)
	case []float64:
		binarize(d, y.Data.([]float64), th)
	case []int64:
		binarize(d, y.Data.([]int64), th)
	case []int32:
		binarize(d, y.Data.([]int32), th)
	}
	return []*tensor.Tensor{y}, nil
}

func binarize[T float32 | float64 | int64 | int32](x, y []T, th float64) {
	for i, v := range x {
		if float64(v) > th {
			y[i] = 1
		} else {
			y[i] = 0
		}
	}
}

func inferBinarizer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if !present(in, 0) {
		return nil, errorf(n, "missing input X")
	}
	switch in[0].Type.DType {
	case tensor.Float32, tensor.Float64, tensor.Int64, tensor.Int32, tensor.Undefined:
	default:
		return nil, errorf(n, "input X has dtype %v (float, double, int64 or int32 only)", in[0].Type.DType)
	}
	return []ir.Type{in[0].Type}, nil
}

// runImputer replaces each element equal to replaced_value_float (NaN:
// each NaN) or replaced_value_int64 by the imputed value of its feature
// (the last axis); one imputed value serves every feature.
func runImputer(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, errorf(n, "missing input X")
	}
	if len(x.Shape) == 0 {
		return nil, errorf(n, "input X is a scalar (need [C] or [N,C])")
	}
	cols := x.Shape[len(x.Shape)-1]
	y := x.Clone()
	switch d := y.Data.(type) {
	case []float32, []float64:
		vals := n.Floats("imputed_value_floats", nil)
		if len(vals) == 0 {
			return nil, errorf(n, "a float input needs imputed_value_floats")
		}
		if len(vals) != 1 && len(vals) != cols {
			return nil, errorf(n, "imputed_value_floats has %d values for %d features (want 1 or %d)", len(vals), cols, cols)
		}
		rep := n.Float("replaced_value_float", 0)
		if f, ok := d.([]float32); ok {
			impute(f, vals, cols, func(v float32) bool { return v == rep || (rep != rep && v != v) })
		} else {
			f64 := make([]float64, len(vals))
			for j, v := range vals {
				f64[j] = float64(v)
			}
			r := float64(rep)
			impute(d.([]float64), f64, cols, func(v float64) bool { return v == r || (r != r && v != v) })
		}
	case []int64, []int32:
		vals := n.Ints("imputed_value_int64s", nil)
		if len(vals) == 0 {
			return nil, errorf(n, "an integer input needs imputed_value_int64s")
		}
		if len(vals) != 1 && len(vals) != cols {
			return nil, errorf(n, "imputed_value_int64s has %d values for %d features (want 1 or %d)", len(vals), cols, cols)
		}
		rep := n.Int("replaced_value_int64", 0)
		if i64, ok := d.([]int64); ok {
			impute(i64, vals, cols, func(v int64) bool { return v == rep })
		} else {
			i32 := make([]int32, len(vals))
			for j, v := range vals {
				i32[j] = int32(v)
			}
			impute(d.([]int32), i32, cols, func(v int32) bool { return int64(v) == rep })
		}
	default:
		return nil, errorf(n, "input X has dtype %v (float, double, int64 or int32 only)", x.DType)
	}
	return []*tensor.Tensor{y}, nil
}

func impute[T any](y, vals []T, cols int, replace func(T) bool) {
	for i, v := range y {
		if replace(v) {
			if len(vals) == 1 {
				y[i] = vals[0]
			} else {
				y[i] = vals[i%cols]
			}
		}
	}
}

func inferImputer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) { return inferBinarizer(n, in) }
