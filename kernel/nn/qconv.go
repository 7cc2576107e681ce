package nn

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Integer convolutions and matrix products accumulate exactly in int32
// (wrapping on overflow, as two's-complement hardware does). QLinear*
// requantize each int32 result r (bias included) as
// round_half_even(float64(r) * float64(m)) + y_zero_point, saturated, with
// the float32 multiplier m = float32(float32(a_scale*b_scale) / y_scale).

// q8 returns an 8-bit tensor's values as int32 minus a zero point looked
// up per element.
func q8(t *tensor.Tensor, what string, zp []int32, zpIdx func(i int) int) ([]int32, error) {
	out := make([]int32, t.Len())
	switch d := t.Data.(type) {
	case []uint8:
		for i, v := range d {
			out[i] = int32(v)
		}
	case []int8:
		for i, v := range d {
			out[i] = int32(v)
		}
	default:
		return nil, fmt.Errorf("nn: %s must be int8 or uint8, got %v", what, t.DType)
	}
	if zp != nil {
		for i := range out {
			out[i] -= zp[zpIdx(i)]
		}
	}
	return out, nil
}

// zeroPoint reads an optional zero point that must have 1 or want
// elements.
func zeroPoint(t *tensor.Tensor, what string, want int) ([]int32, error) {
	if t == nil {
		return nil, nil
	}
	v, err := ints64(t, what)
	if err != nil {
		return nil, err
	}
	if len(v) != 1 && len(v) != want {
		return nil, fmt.Errorf("nn: %s has %d elements, want 1 or %d", what, len(v), want)
	}
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out, nil
}

// pick returns index i of a per-tensor (length 1) or per-channel vector.
func pick[T any](v []T, i int) T {
	if len(v) == 1 {
		return v[0]
	}
	return v[i]
}

// igemm32 is an exact int32 GEMM on strided views (see sgemm).
func igemm32(pool machine, m, n, k int, a []int32, ars, acs int, b []int32, brs, bcs int, c []int32, ldc int) {
	pool.For(m, m*n*k, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := c[i*ldc : i*ldc+n]
			clear(row)
			for kk := 0; kk < k; kk++ {
				av := a[i*ars+kk*acs]
				if av == 0 {
					continue
				}
				for j := range row {
					row[j] += av * b[kk*brs+j*bcs]
				}
			}
		}
	})
}

// convInt computes the int32 convolution of x and w (zero points already
// subtracted), padding reading zero (that is, the zero point).
func convInt(pool machine, n *ir.Node, x, w *tensor.Tensor, xzp, wzp *tensor.Tensor) (*convSetup, []int32, error) {
	s, err := setupConv(n, x.Shape, w.Shape)
	if err != nil {
		return nil, nil, err
	}
	xz, err := zeroPoint(xzp, n.OpType+" x_zero_point", 1)
	if err != nil {
		return nil, nil, err
	}
	wz, err := zeroPoint(wzp, n.OpType+" w_zero_point", s.M)
	if err != nil {
		return nil, nil, err
	}
	xi, err := q8(x, n.OpType+" x", xz, func(int) int { return 0 })
	if err != nil {
		return nil, nil, err
	}
	per := w.Len() / max(1, s.M)
	wi, err := q8(w, n.OpType+" w", wz, func(i int) int {
		if len(wz) == 1 {
			return 0
		}
		return i / per
	})
	if err != nil {
		return nil, nil, err
	}
	return s, convGEMM(pool, s, xi, wi, false, igemm32), nil
}

func runConvInteger(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 2, "ConvInteger"); err != nil {
		return nil, err
	}
	s, y, err := convInt(machineOf(c), n, in[0], in[1], kernel.Input(in, 2), kernel.Input(in, 3))
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{tensor.From(y, s.outShape()...)}, nil
}

// requant maps int32 results to the output type (see the file comment).
func requant(y []int32, mult []float32, chan_ func(i int) int, zp *tensor.Tensor, odt tensor.DType) (*tensor.Tensor, error) {
	lo, hi, err := qRange(odt)
	if err != nil {
		return nil, err
	}
	var z int64
	if zp != nil {
		v, err := zp.Int64s()
		if err != nil || len(v) != 1 {
			return nil, fmt.Errorf("nn: y_zero_point must be a scalar")
		}
		z = v[0]
	}
	out := make([]float64, len(y))
	for i, r := range y {
		q := math.RoundToEven(float64(r)*float64(pick(mult, chan_(i)))) + float64(z)
		out[i] = math.Min(math.Max(q, float64(lo)), float64(hi))
	}
	return tensor.FromFloat64s(odt, []int{len(y)}, out), nil
}

// multipliers returns float32(float32(as*bs[i]) / ys) per channel.
func multipliers(as, bs, ys *tensor.Tensor, want int) ([]float32, error) {
	a, _, err := floatIn(as, "scale")
	if err != nil || len(a) != 1 {
		return nil, fmt.Errorf("nn: input scale must be a float32 scalar")
	}
	b, _, err := floatIn(bs, "scale")
	if err != nil || (len(b) != 1 && len(b) != want) {
		return nil, fmt.Errorf("nn: weight scale must have 1 or %d float32 elements", want)
	}
	y, _, err := floatIn(ys, "scale")
	if err != nil || len(y) != 1 {
		return nil, fmt.Errorf("nn: y_scale must be a float32 scalar")
	}
	m := make([]float32, len(b))
	for i, v := range b {
		m[i] = float32(a[0]*v) / y[0]
	}
	return m, nil
}

func runQLinearConv(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 8, "QLinearConv"); err != nil {
		return nil, err
	}
	s, y, err := convInt(machineOf(c), n, in[0], in[3], in[2], in[5])
	if err != nil {
		return nil, err
	}
	P := prod(s.g.out)
	if b := kernel.Input(in, 8); b != nil {
		bv, ok := b.Data.([]int32)
		if !ok || len(bv) != s.M {
			return nil, fmt.Errorf("nn: QLinearConv: B must be int32 [%d], got %v %v", s.M, b.DType, b.Shape)
		}
		addIntBias(y, bv, s.M, P)
	}
	mult, err := multipliers(in[1], in[4], in[6], s.M)
	if err != nil {
		return nil, err
	}
	out, err := requant(y, mult, func(i int) int { return (i / P) % s.M }, in[7], in[7].DType)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out.Reshaped(s.outShape()...)}, nil
}

func addIntBias(y, b []int32, M, P int) {
	for i := range y {
		y[i] += b[(i/P)%M]
	}
}

// matmulInt computes the int32 matrix product of a and b with per-tensor,
// per-row (a) or per-column (b) zero points subtracted.
func matmulInt(op string, a, azp, b, bzp *tensor.Tensor) (*mmShape, []int32, error) {
	s, err := matmulShape(a.Shape, b.Shape)
	if err != nil {
		return nil, nil, err
	}
	az, err := zeroPoint(azp, op+" a_zero_point", s.m)
	if err != nil {
		return nil, nil, err
	}
	bz, err := zeroPoint(bzp, op+" b_zero_point", s.n)
	if err != nil {
		return nil, nil, err
	}
	k, nn := s.k, s.n
	ai, err := q8(a, op+" A", az, func(i int) int { return (i / k) % max(1, len(az)) })
	if err != nil {
		return nil, nil, err
	}
	bi, err := q8(b, op+" B", bz, func(i int) int { return i % nn % max(1, len(bz)) })
	if err != nil {
		return nil, nil, err
	}
	return s, imatmul(s, ai, bi), nil
}

func runMatMulInteger(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 2, "MatMulInteger"); err != nil {
		return nil, err
	}
	s, y, err := matmulInt("MatMulInteger", in[0], kernel.Input(in, 2), in[1], kernel.Input(in, 3))
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{tensor.From(y, s.out...)}, nil
}

func runQLinearMatMul(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 8, "QLinearMatMul"); err != nil {
		return nil, err
	}
	s, y, err := matmulInt("QLinearMatMul", in[0], in[2], in[3], in[5])
	if err != nil {
		return nil, err
	}
	mult, err := multipliers(in[1], in[4], in[6], s.n)
	if err != nil {
		return nil, err
	}
	nn := s.n
	out, err := requant(y, mult, func(i int) int { return i % nn }, in[7], in[7].DType)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out.Reshaped(s.out...)}, nil
}
