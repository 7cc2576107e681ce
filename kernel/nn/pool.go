package nn

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// Pooling visits each window's taps in row-major kernel order. Sums
// (AveragePool, GlobalAveragePool, LpPool) are sequential float32 (or
// float64) additions in that order, then one division; maxima keep the
// first largest tap.

// windows calls f for every output position p of one channel with the
// in-channel offsets of the taps that read the input (tap order) and the
// number of taps inside the padded extent (count_include_pad's divisor).
func (g *geom) windows(f func(p int, offs []int, nPad int)) {
	nd := len(g.in)
	P, kn := prod(g.out), prod(g.k)
	inStr := tensor.Strides(g.in)
	var obuf, kbuf [4]int
	var offBuf [64]int
	oidx, kidx, offs := obuf[:nd], kbuf[:nd], offBuf[:0]
	if nd > len(obuf) {
		oidx, kidx = make([]int, nd), make([]int, nd)
	}
	if kn > len(offBuf) {
		offs = make([]int, 0, kn)
	}
	for p := 0; p < P; p++ {
		r := p
		for d := nd - 1; d >= 0; d-- {
			oidx[d] = r % g.out[d]
			r /= g.out[d]
		}
		offs = offs[:0]
		nPad := 0
		for kp := 0; kp < kn; kp++ {
			r := kp
			for d := nd - 1; d >= 0; d-- {
				kidx[d] = r % g.k[d]
				r /= g.k[d]
			}
			off, valid, padded := 0, true, true
			for d := 0; d < nd; d++ {
				i := oidx[d]*g.stride[d] + kidx[d]*g.dil[d] - g.padB[d]
				if i < -g.padB[d] || i >= g.in[d]+g.padE[d] {
					padded = false
				}
				if i < 0 || i >= g.in[d] {
					valid = false
				}
				off += i * inStr[d]
			}
			if padded {
				nPad++
			}
			if valid {
				offs = append(offs, off)
			}
		}
		f(p, offs, nPad)
	}
}

// poolSetup validates X [N, C, spatial...] and the window attributes.
func poolSetup(n *ir.Node, x []int) (*geom, error) {
	if len(x) < 3 {
		return nil, fmt.Errorf("nn: %s: X must have rank >= 3, got %v", n.OpType, x)
	}
	ks := n.Ints("kernel_shape", nil)
	if len(ks) != len(x)-2 {
		return nil, fmt.Errorf("nn: %s: kernel_shape %v must have %d values", n.OpType, ks, len(x)-2)
	}
	g, err := convGeom(n, x[2:], intsOf(ks), n.Int("ceil_mode", 0) != 0)
	if err == nil && len(g.in) == 1 {
		g.row = &geom{in: []int{1, g.in[0]}, k: []int{1, g.k[0]}, out: []int{1, g.out[0]}, stride: []int{1, g.stride[0]},
			dil: []int{1, g.dil[0]}, padB: []int{0, g.padB[0]}, padE: []int{0, g.padE[0]}}
	}
	return g, err
}

func runAveragePool(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return runSumPool(c, n, in, false)
}

func runLpPool(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return runSumPool(c, n, in, true)
}

// runSumPool is AveragePool (sum / count) and LpPool ((sum |x|^p)^(1/p)).
func runSumPool(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor, lp bool) ([]*tensor.Tensor, error) {
	if err := need(in, 1, n.OpType); err != nil {
		return nil, err
	}
	x := in[0]
	g, err := poolSetup(n, x.Shape)
	if err != nil {
		return nil, err
	}
	out := append([]int{x.Shape[0], x.Shape[1]}, g.out...)
	inclPad := n.Int("count_include_pad", 0) != 0
	p := n.Int("p", 2)
	xf, xd, err := floatIn(x, n.OpType+" X")
	if err != nil {
		return nil, err
	}
	NC, inSz, P := x.Shape[0]*x.Shape[1], prod(g.in), prod(g.out)
	if xd != nil {
		y := make([]float64, NC*P)
		pf := float64(p)
		for c := 0; c < NC; c++ {
			xc, yc := xd[c*inSz:(c+1)*inSz], y[c*P:(c+1)*P]
			g.windows(func(o int, offs []int, nPad int) {
				var s float64
				for _, off := range offs {
					if lp {
						s += math.Pow(math.Abs(xc[off]), pf)
					} else {
						s += xc[off]
					}
				}
				switch {
				case lp:
					yc[o] = math.Pow(s, 1/pf)
				case inclPad:
					yc[o] = s / float64(nPad)
				default:
					yc[o] = s / float64(len(offs))
				}
			})
		}
		return []*tensor.Tensor{tensor.From(y, out...)}, nil
	}
	y := make([]float32, NC*P)
	if !lp && (avgPoolS1OK(g) || avgPoolSOK(g)) {
		avgPoolPlanes(machineOf(c), g, NC, xf, y, inclPad)
		return []*tensor.Tensor{f32As(x.DType, out, y)}, nil
	}
	sumPoolF32(xf, windowTable(g), NC, y, inclPad, lp, float32(p))
	return []*tensor.Tensor{f32As(x.DType, out, y)}, nil
}

// sumPoolF32 is the float32 AveragePool / LpPool into y.
func sumPoolF32(xf []float32, pw *poolWindows, NC int, y []float32, inclPad, lp bool, pf float32) {
	inSz, P := prod(pw.g.in), prod(pw.g.out)
	for c := 0; c < NC; c++ {
		xc, yc := xf[c*inSz:(c+1)*inSz], y[c*P:(c+1)*P]
		for o := range yc {
			offs := pw.offs[pw.start[o]:pw.start[o+1]]
			var s float32
			for _, off := range offs {
				if lp {
					s += powAbs32(xc[off], pf)
				} else {
					s += xc[off]
				}
			}
			switch {
			case lp:
				yc[o] = root32(s, pf)
			case inclPad:
				yc[o] = s / float32(pw.nPad[o])
			default:
				yc[o] = s / float32(len(offs))
			}
		}
	}
}

// powAbs32 is |x|^p in float32: exact products for p = 1, 2, otherwise
// exp(p*log|x|) with vmath.
func powAbs32(x, p float32) float32 {
	a := float32(math.Abs(float64(x)))
	switch p {
	case 1:
		return a
	case 2:
		return float32(a * a)
	}
	if a == 0 {
		return 0
	}
	return vmath.Exp32(float32(p * vmath.Log32(a)))
}

// root32 is s^(1/p): sqrt (correctly rounded) for p = 2.
func root32(s, p float32) float32 {
	switch {
	case p == 1:
		return s
	case p == 2:
		return float32(math.Sqrt(float64(s)))
	case s == 0:
		return 0
	}
	return vmath.Exp32(vmath.Log32(s) / p)
}

func runMaxPool(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 1, "MaxPool"); err != nil {
		return nil, err
	}
	x := in[0]
	g, err := poolSetup(n, x.Shape)
	if err != nil {
		return nil, err
	}
	out := append([]int{x.Shape[0], x.Shape[1]}, g.out...)
	colMajor := n.Int("storage_order", 0) != 0
	NC, inSz, P := x.Shape[0]*x.Shape[1], prod(g.in), prod(g.out)
	wantIdx := len(n.Outputs) > 1 && n.Outputs[1] != ""
	if xf, ok := x.Data.([]float32); ok && !wantIdx && maxPool2DOK(g) {
		y := make([]float32, NC*P)
		maxPool2D(machineOf(c), g, NC, xf, y)
		return []*tensor.Tensor{tensor.From(y, out...)}, nil
	}
	idx := make([]int64, NC*P)
	var y *tensor.Tensor
	switch d := x.Data.(type) {
	case []float32:
		y = tensor.From(maxPool(d, g, NC, idx), out...)
	case []float64:
		y = tensor.From(maxPool(d, g, NC, idx), out...)
	case []int8:
		y = tensor.From(maxPool(d, g, NC, idx), out...)
	case []uint8:
		y = tensor.From(maxPool(d, g, NC, idx), out...)
	case []tensor.Half, []tensor.BHalf:
		xf, _, _ := floatIn(x, "MaxPool X")
		y = f32As(x.DType, out, maxPool(xf, g, NC, idx))
	default:
		return nil, fmt.Errorf("nn: MaxPool: unsupported type %v", x.DType)
	}
	res := []*tensor.Tensor{y}
	if wantIdx {
		if colMajor {
			// Re-express each in-channel row-major offset column-major.
			inStr := tensor.Strides(g.in)
			for i, v := range idx {
				c := v / int64(inSz)
				r := v % int64(inSz)
				var cm, mul int64 = 0, 1
				for d := 0; d < len(g.in); d++ {
					coord := r / int64(inStr[d]) % int64(g.in[d])
					cm += coord * mul
					mul *= int64(g.in[d])
				}
				idx[i] = c*int64(inSz) + cm
			}
		}
		res = append(res, tensor.From(idx, out...))
	}
	_ = P
	return res, nil
}

// maxPool writes each window's maximum (the first largest tap; -inf or
// the type's minimum for a window of padding only) and its flat index
// into the whole input.
func maxPool[T kernel.Number](x []T, g *geom, NC int, idx []int64) []T {
	y := make([]T, NC*prod(g.out))
	maxPoolInto(x, windowTable(g), NC, y, idx)
	return y
}

// maxPoolInto is maxPool into y; idx may be nil.
func maxPoolInto[T kernel.Number](x []T, pw *poolWindows, NC int, y []T, idx []int64) {
	inSz, P := prod(pw.g.in), prod(pw.g.out)
	lowest := lowestOf[T]()
	for c := 0; c < NC; c++ {
		xc, yc := x[c*inSz:(c+1)*inSz], y[c*P:(c+1)*P]
		base := int64(c * inSz)
		for o := range yc {
			best, bi := lowest, -1
			for _, off := range pw.offs[pw.start[o]:pw.start[o+1]] {
				if v := xc[off]; bi < 0 || v > best {
					best, bi = v, off
				}
			}
			yc[o] = best
			if idx != nil {
				idx[c*P+o] = base + int64(max(bi, 0))
			}
		}
	}
}

func lowestOf[T kernel.Number]() T {
	var z T
	switch any(z).(type) {
	case float32:
		return T(math.Inf(-1))
	case float64:
		return T(math.Inf(-1))
	case int8:
		v := int64(math.MinInt8)
		return T(v)
	}
	return 0
}

func inferPool(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := needT(in, 1, n.OpType); err != nil {
		return nil, err
	}
	t := in[0].Type
	x, ok := dimsOf(t)
	if !ok {
		return []ir.Type{t, kernel.UnknownRank(tensor.Int64)}, nil
	}
	if len(x) < 3 {
		return nil, fmt.Errorf("nn: %s: X must have rank >= 3, got %d", n.OpType, len(x))
	}
	ks := n.Ints("kernel_shape", nil)
	if len(ks) != len(x)-2 {
		return nil, fmt.Errorf("nn: %s: kernel_shape %v must have %d values", n.OpType, ks, len(x)-2)
	}
	sp, err := inferSpatial(n, x[2:], intsOf(ks), n.Int("ceil_mode", 0) != 0)
	if err != nil {
		return nil, err
	}
	out := ir.Type{DType: t.DType, Shape: append([]ir.Dim{x[0], x[1]}, sp...), RankKnown: true}
	return []ir.Type{out, {DType: tensor.Int64, Shape: out.Shape, RankKnown: true}}, nil
}

func runGlobalPool(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 1, n.OpType); err != nil {
		return nil, err
	}
	x := in[0]
	if len(x.Shape) < 2 {
		return nil, fmt.Errorf("nn: %s: X must have rank >= 2, got %v", n.OpType, x.Shape)
	}
	out := []int{x.Shape[0], x.Shape[1]}
	for range x.Shape[2:] {
		out = append(out, 1)
	}
	isMax := n.OpType == "GlobalMaxPool"
	NC, S := x.Shape[0]*x.Shape[1], prod(x.Shape[2:])
	xf, xd, err := floatIn(x, n.OpType+" X")
	if err != nil {
		return nil, err
	}
	if xd != nil {
		return []*tensor.Tensor{tensor.From(globalPool(xd, NC, S, isMax), out...)}, nil
	}
	y := make([]float32, NC)
	globalPool32(c, xf, S, isMax, y)
	return []*tensor.Tensor{f32As(x.DType, out, y)}, nil
}

// globalPool: sequential sum then one division, or the maximum.
func globalPool[F kernel.Float](x []F, NC, S int, isMax bool) []F {
	y := make([]F, NC)
	globalPoolInto(x, S, isMax, y)
	return y
}

// globalPoolInto is globalPool into y (one value per channel). Sums run
// eight channels at a time, each channel's sequential chain in its own
// accumulator (the same additions in the same order, interleaved), so the
// chains' latencies overlap.
func globalPoolInto[F kernel.Float](x []F, S int, isMax bool, y []F) {
	c0 := 0
	if !isMax && S > 0 {
		c0 = len(y) &^ 7
		globalSum8(x, S, y[:c0])
	}
	for c := c0; c < len(y); c++ {
		row := x[c*S : (c+1)*S]
		if isMax {
			m := F(math.Inf(-1))
			for _, v := range row {
				m = max(m, v)
			}
			y[c] = m
			continue
		}
		var s F
		for _, v := range row {
			s += v
		}
		y[c] = s / F(S)
	}
}

// globalSum8 is globalPoolInto's sums for len(y) a multiple of 8.
func globalSum8[F kernel.Float](x []F, S int, y []F) {
	for c := 0; c+8 <= len(y); c += 8 {
		r0 := x[c*S : c*S+S]
		r1 := x[(c+1)*S : (c+1)*S+S]
		r2 := x[(c+2)*S : (c+2)*S+S]
		r3 := x[(c+3)*S : (c+3)*S+S]
		r4 := x[(c+4)*S : (c+4)*S+S]
		r5 := x[(c+5)*S : (c+5)*S+S]
		r6 := x[(c+6)*S : (c+6)*S+S]
		r7 := x[(c+7)*S : (c+7)*S+S]
		var s0, s1, s2, s3, s4, s5, s6, s7 F
		for i := range r0 {
			s0 += r0[i]
			s1 += r1[i]
			s2 += r2[i]
			s3 += r3[i]
			s4 += r4[i]
			s5 += r5[i]
			s6 += r6[i]
			s7 += r7[i]
		}
		n := F(S)
		y[c], y[c+1], y[c+2], y[c+3] = s0/n, s1/n, s2/n, s3/n
		y[c+4], y[c+5], y[c+6], y[c+7] = s4/n, s5/n, s6/n, s7/n
	}
}

func inferGlobalPool(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := needT(in, 1, n.OpType); err != nil {
		return nil, err
	}
	t := in[0].Type
	x, ok := dimsOf(t)
	if !ok {
		return []ir.Type{t}, nil
	}
	out := append([]ir.Dim{}, x...)
	for i := 2; i < len(out); i++ {
		out[i] = ir.Fixed(1)
	}
	return []ir.Type{{DType: t.DType, Shape: out, RankKnown: true}}, nil
}
