package nn

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// LRN: sq = FMA chain of x[c']^2 over the channel window ascending;
// y = x / (bias + float(alpha/size) * sq) ** beta.
func runLRN(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 1, "LRN"); err != nil {
		return nil, err
	}
	x := in[0]
	if len(x.Shape) < 3 {
		return nil, fmt.Errorf("nn: LRN: X must have rank >= 3, got %v", x.Shape)
	}
	size := int(n.Int("size", 0))
	if size < 1 {
		return nil, fmt.Errorf("nn: LRN: size must be positive, got %d", size)
	}
	alpha, beta, bias := n.Float("alpha", 1e-4), n.Float("beta", 0.75), n.Float("bias", 1)
	C, S := x.Shape[1], prod(x.Shape[2:])
	return floatOp(x, "LRN X", func(xv []float32) ([][]float32, error) {
		return [][]float32{lrn(xv, C, S, size, alpha, beta, bias)}, nil
	}, func(xv []float64) ([][]float64, error) {
		return [][]float64{lrn(xv, C, S, size, float64(alpha), float64(beta), float64(bias))}, nil
	}, [][]int{x.Shape})
}

func lrn[F kernel.Float](x []F, C, S, size int, alpha, beta, bias F) []F {
	y := make([]F, len(x))
	lo, hi := (size-1)/2, (size-1)-(size-1)/2
	k := alpha / F(size)
	for i := range x {
		c := (i / S) % C
		base := i - c*S
		var sq F
		for cc := max(0, c-lo); cc <= min(C-1, c+hi); cc++ {
			v := x[base+cc*S]
			sq = fmaF(v, v, sq)
		}
		y[i] = x[i] / powF(bias+F(k*sq), beta)
	}
	return y
}

// LpNormalization: y = x / norm along axis, norm = sum |x| (p = 1) or
// sqrt(FMA chain of x^2) (p = 2), ascending along the axis.
func runLpNorm(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 1, "LpNormalization"); err != nil {
		return nil, err
	}
	x := in[0]
	axis, err := kernel.NormAxis(n.Int("axis", -1), len(x.Shape))
	if err != nil {
		return nil, fmt.Errorf("nn: LpNormalization: %w", err)
	}
	p := n.Int("p", 2)
	if p != 1 && p != 2 {
		return nil, fmt.Errorf("nn: LpNormalization: p must be 1 or 2, got %d", p)
	}
	D, inner := x.Shape[axis], prod(x.Shape[axis+1:])
	return floatOp(x, "LpNormalization X", func(xv []float32) ([][]float32, error) {
		return [][]float32{lpNorm(xv, D, inner, p)}, nil
	}, func(xv []float64) ([][]float64, error) {
		return [][]float64{lpNorm(xv, D, inner, p)}, nil
	}, [][]int{x.Shape})
}

func lpNorm[F kernel.Float](x []F, D, inner int, p int64) []F {
	y := make([]F, len(x))
	for o := 0; o < len(x)/max(1, D*inner); o++ {
		for r := 0; r < inner; r++ {
			base := o*D*inner + r
			var s F
			for d := 0; d < D; d++ {
				v := x[base+d*inner]
				if p == 1 {
					s += max(v, -v)
				} else {
					s = fmaF(v, v, s)
				}
			}
			if p == 2 {
				s = sqrtF(s)
			}
			for d := 0; d < D; d++ {
				y[base+d*inner] = x[base+d*inner] / s
			}
		}
	}
	return y
}

// MeanVarianceNormalization: over axes (default [0, 2, 3]) mean and
// biased variance (two passes, elements in row-major order);
// y = (x - mean) / (sqrt(var) + 1e-9), ONNX's function body's epsilon.
func runMVN(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 1, "MeanVarianceNormalization"); err != nil {
		return nil, err
	}
	x := in[0]
	axes := n.Ints("axes", []int64{0, 2, 3})
	red := make([]bool, len(x.Shape))
	for _, a := range axes {
		ax, err := kernel.NormAxis(a, len(x.Shape))
		if err != nil {
			return nil, fmt.Errorf("nn: MeanVarianceNormalization: %w", err)
		}
		red[ax] = true
	}
	// group[i] is the index of element i's statistics.
	gshape := make([]int, len(x.Shape))
	for i, d := range x.Shape {
		gshape[i] = d
		if red[i] {
			gshape[i] = 1
		}
	}
	group := make([]int, x.Len())
	kernel.Broadcast2(x.Shape, x.Shape, gshape, func(i, _, g int) { group[i] = g })
	G := prod(gshape)
	return floatOp(x, "MeanVarianceNormalization X", func(xv []float32) ([][]float32, error) {
		return [][]float32{mvn(xv, group, G, float32(1e-9))}, nil
	}, func(xv []float64) ([][]float64, error) {
		return [][]float64{mvn(xv, group, G, 1e-9)}, nil
	}, [][]int{x.Shape})
}

func mvn[F kernel.Float](x []F, group []int, G int, eps F) []F {
	sum, cnt, q := make([]F, G), make([]int, G), make([]F, G)
	for i, v := range x {
		sum[group[i]] += v
		cnt[group[i]]++
	}
	for g := range sum {
		sum[g] /= F(max(cnt[g], 1))
	}
	for i, v := range x {
		d := v - sum[group[i]]
		q[group[i]] = fmaF(d, d, q[group[i]])
	}
	y := make([]F, len(x))
	for i, v := range x {
		g := group[i]
		y[i] = (v - sum[g]) / (sqrtF(q[g]/F(max(cnt[g], 1))) + eps)
	}
	return y
}

func inferSameFloat(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := needT(in, 1, n.OpType); err != nil {
		return nil, err
	}
	if !isFloatType(in[0].Type.DType) && in[0].Type.DType != tensor.Undefined {
		return nil, fmt.Errorf("nn: %s: X must be a float tensor, got %v", n.OpType, in[0].Type.DType)
	}
	return []ir.Type{in[0].Type}, nil
}
