package nn

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// Normalizations compute in float32 (float16 and bfloat16 widened, then
// rounded back) or float64. Every statistic is a sequential sum in
// row-major element order: mean = (x0 + x1 + ...) / n, variance =
// FMA-chain of (x - mean)^2 / n (two passes). Square roots are correctly
// rounded; powers use vmath.Exp32/Log32.

// fmaF is vmath.FMA32 for float32 and math.FMA for float64.
func fmaF[F kernel.Float](a, b, c F) F {
	if a32, ok := any(a).(float32); ok {
		return F(vmath.FMA32(a32, float32(b), float32(c)))
	}
	return F(math.FMA(float64(a), float64(b), float64(c)))
}

// sqrtF is the correctly rounded square root.
func sqrtF[F kernel.Float](x F) F { return F(math.Sqrt(float64(x))) }

// powF is x**y: math.Pow for float64, exp(y*log x) with vmath for float32.
func powF[F kernel.Float](x, y F) F {
	if x32, ok := any(x).(float32); ok {
		if x32 == 0 {
			return 0
		}
		return F(vmath.Exp32(float32(float32(y) * vmath.Log32(x32))))
	}
	return F(math.Pow(float64(x), float64(y)))
}

// floatOp runs f on a float tensor's data in its compute precision and
// returns the results converted back to the input type.
func floatOp(x *tensor.Tensor, what string, f32 func([]float32) ([][]float32, error), f64 func([]float64) ([][]float64, error), shapes [][]int) ([]*tensor.Tensor, error) {
	xf, xd, err := floatIn(x, what)
	if err != nil {
		return nil, err
	}
	var out []*tensor.Tensor
	if xd != nil {
		ys, err := f64(xd)
		if err != nil {
			return nil, err
		}
		for i, y := range ys {
			out = append(out, tensor.From(y, shapes[i]...))
		}
		return out, nil
	}
	ys, err := f32(xf)
	if err != nil {
		return nil, err
	}
	for i, y := range ys {
		out = append(out, f32As(x.DType, shapes[i], y))
	}
	return out, nil
}

// params widens per-channel parameter tensors of the input's float type.
func params32(ts []*tensor.Tensor, what string) ([][]float32, error) {
	out := make([][]float32, len(ts))
	for i, t := range ts {
		if t == nil {
			continue
		}
		v, d, err := floatIn(t, what)
		if err != nil {
			return nil, err
		}
		if d != nil {
			v = make([]float32, len(d))
			for j, x := range d {
				v[j] = float32(x)
			}
		}
		out[i] = v
	}
	return out, nil
}

func params64(ts []*tensor.Tensor, what string) ([][]float64, error) {
	out := make([][]float64, len(ts))
	for i, t := range ts {
		if t == nil {
			continue
		}
		v, err := t.Float64s()
		if err != nil {
			return nil, fmt.Errorf("nn: %s: %w", what, err)
		}
		out[i] = v
	}
	return out, nil
}

// BatchNormalization, inference: per channel a = scale / sqrt(var + eps)
// and b = B - float(mean*a); y = float(x*a) + b. Training mode uses the
// batch statistics (biased variance) and also returns the updated running
// mean and variance: running*momentum + batch*(1-momentum).
func runBatchNorm(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 5, "BatchNormalization"); err != nil {
		return nil, err
	}
	x := in[0]
	if len(x.Shape) < 2 {
		return nil, fmt.Errorf("nn: BatchNormalization: X must have rank >= 2, got %v", x.Shape)
	}
	C := x.Shape[1]
	for i := 1; i < 5; i++ {
		if in[i].Len() != C {
			return nil, fmt.Errorf("nn: BatchNormalization: input %d has shape %v, want [%d]", i, in[i].Shape, C)
		}
	}
	N, S := x.Shape[0], prod(x.Shape[2:])
	training := n.Int("training_mode", 0) != 0 && n.Version >= 14
	eps, mom := n.Float("epsilon", 1e-5), n.Float("momentum", 0.9)
	shapes := [][]int{x.Shape}
	if training {
		shapes = append(shapes, []int{C}, []int{C})
	}
	p32 := func(xv []float32) ([][]float32, error) {
		p, err := params32(in[1:5], "BatchNormalization parameters")
		if err != nil {
			return nil, err
		}
		return batchNorm(xv, p[0], p[1], p[2], p[3], N, C, S, eps, mom, training), nil
	}
	p64 := func(xv []float64) ([][]float64, error) {
		p, err := params64(in[1:5], "BatchNormalization parameters")
		if err != nil {
			return nil, err
		}
		return batchNorm(xv, p[0], p[1], p[2], p[3], N, C, S, float64(eps), float64(mom), training), nil
	}
	out, err := floatOp(x, "BatchNormalization X", p32, p64, shapes)
	if err != nil {
		return nil, err
	}
	if training {
		// Running statistics keep the parameters' type.
		for i := 1; i < 3; i++ {
			v, _ := out[i].Float64s()
			out[i] = tensor.FromFloat64s(in[3+i-1].DType, []int{C}, v)
		}
	}
	return out, nil
}

func batchNorm[F kernel.Float](x, scale, bias, mean, vr []F, N, C, S int, eps, mom F, training bool) [][]F {
	y := make([]F, len(x))
	var rm, rv []F
	if training {
		bm, bv := make([]F, C), make([]F, C)
		cnt := F(N * S)
		for c := 0; c < C; c++ {
			var s F
			for ni := 0; ni < N; ni++ {
				for _, v := range x[(ni*C+c)*S : (ni*C+c+1)*S] {
					s += v
				}
			}
			m := s / cnt
			var q F
			for ni := 0; ni < N; ni++ {
				for _, v := range x[(ni*C+c)*S : (ni*C+c+1)*S] {
					q = fmaF(v-m, v-m, q)
				}
			}
			bm[c], bv[c] = m, q/cnt
		}
		rm, rv = make([]F, C), make([]F, C)
		for c := range rm {
			rm[c] = F(mean[c]*mom) + F(bm[c]*(1-mom))
			rv[c] = F(vr[c]*mom) + F(bv[c]*(1-mom))
		}
		mean, vr = bm, bv
	}
	a, b := make([]F, C), make([]F, C)
	for c := range a {
		a[c] = scale[c] / sqrtF(vr[c]+eps)
		b[c] = bias[c] - F(mean[c]*a[c])
	}
	for i := 0; i < N*C; i++ {
		c := i % C
		ac, bc := a[c], b[c]
		row, yr := x[i*S:(i+1)*S], y[i*S:(i+1)*S]
		for j, v := range row {
			yr[j] = F(v*ac) + bc
		}
	}
	if training {
		return [][]F{y, rm, rv}
	}
	return [][]F{y}
}

func inferBatchNorm(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := needT(in, 5, "BatchNormalization"); err != nil {
		return nil, err
	}
	out := []ir.Type{in[0].Type}
	for i := 1; i < len(n.Outputs); i++ {
		out = append(out, in[min(i+2, 4)].Type)
	}
	return out, nil
}

// InstanceNormalization: per (n, c) mean and biased variance, then
// y = float(float(x-mean) * float(scale/sqrt(var+eps))) + B.
func runInstanceNorm(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 3, "InstanceNormalization"); err != nil {
		return nil, err
	}
	x := in[0]
	if len(x.Shape) < 3 {
		return nil, fmt.Errorf("nn: InstanceNormalization: X must have rank >= 3, got %v", x.Shape)
	}
	C, S := x.Shape[1], prod(x.Shape[2:])
	if in[1].Len() != C || in[2].Len() != C {
		return nil, fmt.Errorf("nn: InstanceNormalization: scale %v and B %v must have %d elements", in[1].Shape, in[2].Shape, C)
	}
	eps := n.Float("epsilon", 1e-5)
	return floatOp(x, "InstanceNormalization X", func(xv []float32) ([][]float32, error) {
		p, err := params32(in[1:3], "InstanceNormalization parameters")
		if err != nil {
			return nil, err
		}
		return [][]float32{instanceNorm(xv, p[0], p[1], C, S, eps)}, nil
	}, func(xv []float64) ([][]float64, error) {
		p, err := params64(in[1:3], "InstanceNormalization parameters")
		if err != nil {
			return nil, err
		}
		return [][]float64{instanceNorm(xv, p[0], p[1], C, S, float64(eps))}, nil
	}, [][]int{x.Shape})
}

// meanVar is the two-pass mean and biased variance of row.
func meanVar[F kernel.Float](row []F) (m, v F) {
	var s F
	for _, x := range row {
		s += x
	}
	m = s / F(len(row))
	var q F
	for _, x := range row {
		q = fmaF(x-m, x-m, q)
	}
	return m, q / F(len(row))
}

func instanceNorm[F kernel.Float](x, scale, bias []F, C, S int, eps F) []F {
	y := make([]F, len(x))
	for i := 0; i < len(x)/max(S, 1); i++ {
		row, yr := x[i*S:(i+1)*S], y[i*S:(i+1)*S]
		m, v := meanVar(row)
		a := scale[i%C] / sqrtF(v+eps)
		for j, xv := range row {
			yr[j] = F((xv-m)*a) + bias[i%C]
		}
	}
	return y
}

// LayerNormalization: per row of the trailing dims from axis, mean and
// biased variance; inv = 1/sqrt(var+eps); y = float(float((x-mean)*inv) *
// scale) + B. Mean and InvStdDev are returned with the normalized dims
// kept as 1.
func runLayerNorm(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 2, "LayerNormalization"); err != nil {
		return nil, err
	}
	x := in[0]
	axis, err := kernel.NormAxis(n.Int("axis", -1), len(x.Shape))
	if err != nil {
		return nil, fmt.Errorf("nn: LayerNormalization: %w", err)
	}
	norm := x.Shape[axis:]
	D := prod(norm)
	idx := make([][]int, 2)
	for i, t := range []*tensor.Tensor{in[1], kernel.Input(in, 2)} {
		if t == nil {
			continue
		}
		b, err := kernel.BroadcastShapes(t.Shape, norm)
		if err != nil || !equalInts(b, norm) {
			return nil, fmt.Errorf("nn: LayerNormalization: input %d shape %v does not broadcast to normalized shape %v", i+1, t.Shape, norm)
		}
		idx[i] = make([]int, D)
		kernel.Broadcast2(norm, norm, t.Shape, func(j, _, k int) { idx[i][j] = k })
	}
	stat := append([]int{}, x.Shape...)
	for i := axis; i < len(stat); i++ {
		stat[i] = 1
	}
	eps := n.Float("epsilon", 1e-5)
	shapes := [][]int{x.Shape, stat, stat}
	out, err := floatOp(x, "LayerNormalization X", func(xv []float32) ([][]float32, error) {
		p, err := params32([]*tensor.Tensor{in[1], kernel.Input(in, 2)}, "LayerNormalization parameters")
		if err != nil {
			return nil, err
		}
		R := len(xv) / max(D, 1)
		y, mean, inv := make([]float32, len(xv)), make([]float32, R), make([]float32, R)
		layerNorm32Par(c.Workers(), c.Vec(), xv, p[0], p[1], idx[0], idx[1], D, eps, y, mean, inv)
		return [][]float32{y, mean, inv}, nil
	}, func(xv []float64) ([][]float64, error) {
		p, err := params64([]*tensor.Tensor{in[1], kernel.Input(in, 2)}, "LayerNormalization parameters")
		if err != nil {
			return nil, err
		}
		return layerNorm(xv, p[0], p[1], idx, D, float64(eps)), nil
	}, shapes)
	if err != nil {
		return nil, err
	}
	// Mean and InvStdDev are of the stash type (float32 unless float64).
	for i := 1; i < 3; i++ {
		if out[i].DType != tensor.Float64 {
			v, _ := out[i].Float64s()
			out[i] = tensor.FromFloat64s(tensor.Float32, stat, v)
		}
	}
	return out[:max(1, min(3, len(n.Outputs)))], nil
}

func layerNorm[F kernel.Float](x, scale, bias []F, idx [][]int, D int, eps F) [][]F {
	R := len(x) / max(D, 1)
	y, mean, inv := make([]F, len(x)), make([]F, R), make([]F, R)
	for r := 0; r < R; r++ {
		row, yr := x[r*D:(r+1)*D], y[r*D:(r+1)*D]
		m, v := meanVar(row)
		iv := 1 / sqrtF(v+eps)
		mean[r], inv[r] = m, iv
		for j, xv := range row {
			t := F(F((xv-m)*iv) * scale[idx[0][j]])
			if bias != nil {
				t += bias[idx[1][j]]
			}
			yr[j] = t
		}
	}
	return [][]F{y, mean, inv}
}

func inferLayerNorm(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := needT(in, 2, "LayerNormalization"); err != nil {
		return nil, err
	}
	t := in[0].Type
	sdt := tensor.Float32
	if t.DType == tensor.Float64 {
		sdt = tensor.Float64
	}
	x, ok := dimsOf(t)
	if !ok {
		return []ir.Type{t, kernel.UnknownRank(sdt), kernel.UnknownRank(sdt)}, nil
	}
	axis, err := kernel.NormAxis(n.Int("axis", -1), len(x))
	if err != nil {
		return nil, fmt.Errorf("nn: LayerNormalization: %w", err)
	}
	st := append([]ir.Dim{}, x...)
	for i := axis; i < len(st); i++ {
		st[i] = ir.Fixed(1)
	}
	s := ir.Type{DType: sdt, Shape: st, RankKnown: true}
	return []ir.Type{t, s, s}, nil
}

// layerNorm32 is layerNorm for float32 into y (and mean, inv when not
// nil), with the same operations in the same order: the sequential sum,
// m = s/D, the sequential chain q = FMA32(x-m, x-m, q), v = q/D,
// inv = 1/sqrt(v+eps), y = float32(float32((x-m)*inv) * scale) + bias.
// si and bi map a normalized index to scale's and bias's; nil is the
// identity.
func layerNorm32(vec vmath.Vec, x, scale, bias []float32, si, bi []int, D int, eps float32, y, mean, inv []float32) {
	R := len(x) / max(D, 1)
	// The row statistics run 8 rows at a time through vmath's row
	// reductions (the same sequential chains, vectorised across rows).
	var sums, qs, ms [8]float32
	for r0 := 0; r0 < R; r0 += 8 {
		k := min(8, R-r0)
		xs := x[r0*D : (r0+k)*D]
		vec.SumRows32(sums[:k], xs, D)
		for l := range k {
			ms[l] = sums[l] / float32(D)
		}
		vec.SqDevRows32(qs[:k], xs, D, ms[:k])
		for l := range k {
			r := r0 + l
			m := ms[l]
			iv := 1 / float32(math.Sqrt(float64(qs[l]/float32(D)+eps)))
			if mean != nil {
				mean[r], inv[r] = canonNaN(m), canonNaN(iv)
			}
			layerNormRow(vec, x[r*D:(r+1)*D], scale, bias, si, bi, m, iv, y[r*D:(r+1)*D])
		}
	}
}

// layerNormRow sets yr[j] = float32(float32((row[j]-m)*iv) * scale) + bias.
// Which NaN a NaN-producing float operation returns (sign, payload) is not
// fixed by Go or by the hardware's operand order, so NaN results are
// written as the canonical NaN, as the dot-product kernels do
// (vmath.NormAffine32 does so itself).
func layerNormRow(vec vmath.Vec, row, scale, bias []float32, si, bi []int, m, iv float32, yr []float32) {
	if si == nil && (bias == nil || bi == nil) {
		vec.NormAffine32(yr, row, m, iv, scale, bias)
		return
	}
	for j, v := range row {
		t := float32(float32((v-m)*iv) * scale[at(si, j)])
		if bias != nil {
			t += bias[at(bi, j)]
		}
		if t != t {
			t = canonNaN(t)
		}
		yr[j] = t
	}
}

func at(idx []int, j int) int {
	if idx == nil {
		return j
	}
	return idx[j]
}

// intoLayerNorm is LayerNormalization's Into for float32 with scale and
// bias of the normalized shape (others go through Run).
func intoLayerNorm(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if err := need(in, 2, "LayerNormalization"); err != nil {
		return err
	}
	x, sc, b := in[0], in[1], kernel.Input(in, 2)
	ok := allF32(x, sc, b, out[0])
	for i := 1; i < len(out); i++ {
		ok = ok && allF32(out[i])
	}
	axis, err := kernel.NormAxis(n.Int("axis", -1), len(x.Shape))
	if err != nil {
		return fmt.Errorf("nn: LayerNormalization: %w", err)
	}
	norm := x.Shape[axis:]
	if !ok || !equalInts(sc.Shape, norm) || (b != nil && !equalInts(b.Shape, norm)) {
		return viaRun(runLayerNorm)(c, n, in, out)
	}
	D := prod(norm)
	R := x.Len() / max(D, 1)
	if out[0].Len() != x.Len() {
		return fmt.Errorf("nn: LayerNormalization: preallocated output has %d elements, want %d", out[0].Len(), x.Len())
	}
	var mean, inv []float32
	if len(out) > 2 && out[1] != nil && out[2] != nil {
		mean, inv = out[1].Data.([]float32), out[2].Data.([]float32)
		if len(mean) != R || len(inv) != R {
			return fmt.Errorf("nn: LayerNormalization: preallocated Mean/InvStdDev do not hold %d values", R)
		}
	} else if len(out) > 1 && (out[1] != nil || (len(out) > 2 && out[2] != nil)) {
		return viaRun(runLayerNorm)(c, n, in, out)
	}
	var bf []float32
	if b != nil {
		bf = b.Data.([]float32)
	}
	layerNorm32Par(c.Workers(), c.Vec(), x.Data.([]float32), sc.Data.([]float32), bf, nil, nil, D, n.Float("epsilon", 1e-5), out[0].Data.([]float32), mean, inv)
	return nil
}
