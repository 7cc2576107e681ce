package nn

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// Quantization arithmetic, fixed here once: quantize computes
// float32(x / scale) (one float32 division), rounds it half to even, adds
// the zero point in exact integer arithmetic and saturates to the output
// type; dequantize computes float32(x - zero_point) * scale.

// qRange returns the representable range of an integer quantized type.
func qRange(dt tensor.DType) (lo, hi int64, err error) {
	switch dt {
	case tensor.Uint8:
		return 0, 255, nil
	case tensor.Int8:
		return -128, 127, nil
	case tensor.Uint16:
		return 0, 65535, nil
	case tensor.Int16:
		return -32768, 32767, nil
	case tensor.Int32:
		return math.MinInt32, math.MaxInt32, nil
	}
	return 0, 0, fmt.Errorf("unsupported quantized type %v", dt)
}

// ints64 returns an integer tensor's values.
func ints64(t *tensor.Tensor, what string) ([]int64, error) {
	if !t.DType.IsInt() {
		return nil, fmt.Errorf("nn: %s must be an integer tensor, got %v", what, t.DType)
	}
	return t.Int64s()
}

// qparams maps each element of a tensor of shape xs to the index of its
// scale / zero point: per tensor (scale of one element), per axis (1-D
// scale along axis) or blocked (scale of x's rank, axis dimension divided
// into blocks of blockSize).
func qparams(xs, ss []int, axis int64, blockSize int) (func(i int) int, error) {
	ns := prod(ss)
	if ns == 1 && len(ss) <= 1 {
		return func(int) int { return 0 }, nil
	}
	if len(xs) == 0 {
		return nil, fmt.Errorf("scale %v does not fit a scalar input", ss)
	}
	a, err := kernel.NormAxis(axis, len(xs))
	if err != nil {
		return nil, err
	}
	inner := prod(xs[a+1:])
	d := xs[a]
	if blockSize > 0 {
		if len(ss) != len(xs) {
			return nil, fmt.Errorf("blocked scale %v must have the rank of input %v", ss, xs)
		}
		for i := range ss {
			want := xs[i]
			if i == a {
				want = (xs[i] + blockSize - 1) / blockSize
			}
			if ss[i] != want {
				return nil, fmt.Errorf("blocked scale %v does not match input %v with block_size %d on axis %d", ss, xs, blockSize, a)
			}
		}
		nb := ss[a]
		return func(i int) int {
			outer := i / (inner * d)
			j := (i / inner) % d
			r := i % inner
			return (outer*nb+j/blockSize)*inner + r
		}, nil
	}
	if len(ss) != 1 || ss[0] != d {
		return nil, fmt.Errorf("per-axis scale %v must be 1-D of size %d (input %v, axis %d)", ss, d, xs, a)
	}
	return func(i int) int { return (i / inner) % d }, nil
}

func runQuantize(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 2, "QuantizeLinear"); err != nil {
		return nil, err
	}
	x, sc, zp := in[0], in[1], kernel.Input(in, 2)
	odt := tensor.Uint8
	if zp != nil {
		odt = zp.DType
	} else if v := n.Int("output_dtype", 0); v != 0 {
		odt = tensor.DType(v)
	}
	lo, hi, err := qRange(odt)
	if err != nil {
		return nil, fmt.Errorf("nn: QuantizeLinear: %w", err)
	}
	idx, err := qparams(x.Shape, sc.Shape, n.Int("axis", 1), int(n.Int("block_size", 0)))
	if err != nil {
		return nil, fmt.Errorf("nn: QuantizeLinear: %w", err)
	}
	var zpv []int64
	if zp != nil {
		if zpv, err = ints64(zp, "QuantizeLinear y_zero_point"); err != nil {
			return nil, err
		}
		if len(zpv) != sc.Len() {
			return nil, fmt.Errorf("nn: QuantizeLinear: zero point %v and scale %v differ in shape", zp.Shape, sc.Shape)
		}
	}
	out := make([]float64, x.Len())
	if x.DType == tensor.Float64 {
		xv := x.Data.([]float64)
		sv, err := sc.Float64s()
		if err != nil {
			return nil, err
		}
		for i, v := range xv {
			j := idx(i)
			q := math.RoundToEven(v / sv[j])
			out[i] = satAdd(q, zpv, j, lo, hi)
		}
	} else {
		var xv []float32
		if x.DType == tensor.Int32 {
			xi := x.Data.([]int32)
			xv = make([]float32, len(xi))
			for i, v := range xi {
				xv[i] = float32(v)
			}
		} else if xv, _, err = floatIn(x, "QuantizeLinear x"); err != nil || xv == nil {
			return nil, fmt.Errorf("nn: QuantizeLinear: unsupported input type %v", x.DType)
		}
		sv, _, err := floatIn(sc, "QuantizeLinear y_scale")
		if err != nil || sv == nil {
			return nil, fmt.Errorf("nn: QuantizeLinear: unsupported scale type %v", sc.DType)
		}
		for i, v := range xv {
			j := idx(i)
			q := vmath.RoundEven32(v / sv[j])
			out[i] = satAdd(float64(q), zpv, j, lo, hi)
		}
	}
	return []*tensor.Tensor{tensor.FromFloat64s(odt, x.Shape, out)}, nil
}

// satAdd adds the zero point to a rounded quotient and saturates.
func satAdd(q float64, zp []int64, j int, lo, hi int64) float64 {
	if zp != nil {
		q += float64(zp[j])
	}
	if math.IsNaN(q) {
		return 0
	}
	return math.Min(math.Max(q, float64(lo)), float64(hi))
}

func runDequantize(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 2, "DequantizeLinear"); err != nil {
		return nil, err
	}
	x, sc, zp := in[0], in[1], kernel.Input(in, 2)
	xv, err := ints64(x, "DequantizeLinear x")
	if err != nil {
		return nil, err
	}
	idx, err := qparams(x.Shape, sc.Shape, n.Int("axis", 1), int(n.Int("block_size", 0)))
	if err != nil {
		return nil, fmt.Errorf("nn: DequantizeLinear: %w", err)
	}
	var zpv []int64
	if zp != nil {
		if zp.DType != x.DType {
			return nil, fmt.Errorf("nn: DequantizeLinear: zero point type %v differs from x type %v", zp.DType, x.DType)
		}
		zpv, _ = zp.Int64s()
		if len(zpv) != sc.Len() {
			return nil, fmt.Errorf("nn: DequantizeLinear: zero point %v and scale %v differ in shape", zp.Shape, sc.Shape)
		}
	}
	if sc.DType == tensor.Float64 {
		sv := sc.Data.([]float64)
		out := make([]float64, len(xv))
		for i, v := range xv {
			j := idx(i)
			if zpv != nil {
				v -= zpv[j]
			}
			out[i] = float64(v) * sv[j]
		}
		return []*tensor.Tensor{tensor.From(out, x.Shape...)}, nil
	}
	sv, _, err := floatIn(sc, "DequantizeLinear x_scale")
	if err != nil || sv == nil {
		return nil, fmt.Errorf("nn: DequantizeLinear: unsupported scale type %v", sc.DType)
	}
	out := make([]float32, len(xv))
	for i, v := range xv {
		j := idx(i)
		if zpv != nil {
			v -= zpv[j]
		}
		out[i] = float32(v) * sv[j]
	}
	return []*tensor.Tensor{f32As(sc.DType, x.Shape, out)}, nil
}

func inferQuantize(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := needT(in, 2, "QuantizeLinear"); err != nil {
		return nil, err
	}
	t := in[0].Type
	t.DType = tensor.Uint8
	if len(in) > 2 && in[2].Present {
		t.DType = in[2].Type.DType
	} else if v := n.Int("output_dtype", 0); v != 0 {
		t.DType = tensor.DType(v)
	}
	return []ir.Type{t}, nil
}

func inferDequantize(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := needT(in, 2, "DequantizeLinear"); err != nil {
		return nil, err
	}
	t := in[0].Type
	t.DType = in[1].Type.DType
	return []ir.Type{t}, nil
}

// DynamicQuantizeLinear: scale = (max(0, max x) - min(0, min x)) / 255
// in float32; zero point = saturate(round(-min / scale)); y as
// QuantizeLinear. Min and max are order-independent.
func runDynamicQuantize(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 1, "DynamicQuantizeLinear"); err != nil {
		return nil, err
	}
	x, ok := in[0].Data.([]float32)
	if !ok {
		return nil, fmt.Errorf("nn: DynamicQuantizeLinear: x must be float32, got %v", in[0].DType)
	}
	var lo, hi float32
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	scale := (hi - lo) / 255
	var zp float32
	if scale != 0 {
		zp = min(max(vmath.RoundEven32(-lo/scale), 0), 255)
	}
	y := make([]uint8, len(x))
	if scale != 0 {
		for i, v := range x {
			q := vmath.RoundEven32(v/scale) + zp
			y[i] = uint8(min(max(q, 0), 255))
		}
	}
	return []*tensor.Tensor{
		tensor.From(y, in[0].Shape...),
		tensor.From([]float32{scale}),
		tensor.From([]uint8{uint8(zp)}),
	}, nil
}

func inferDynamicQuantize(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := needT(in, 1, "DynamicQuantizeLinear"); err != nil {
		return nil, err
	}
	t := in[0].Type
	t.DType = tensor.Uint8
	return []ir.Type{t, ir.StaticType(tensor.Float32, nil), ir.StaticType(tensor.Uint8, nil)}, nil
}
