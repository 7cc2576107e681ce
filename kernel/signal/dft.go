package signal

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// twiddle returns cos(2πm/N) and sin(2πm/N) in float64. The fraction m/N
// is first reduced exactly, in integers, to [0, 1/8] with the symmetries
// of the circle, so angles that are multiples of π/2 give exact zeros and
// ones, and cos/sin of mirrored angles are bit-identical.
func twiddle(m, n int) (c, s float64) {
	a, b := int64(m%n), int64(n) // the angle is 2π·a/b
	sinSign, cosSign, swap := 1.0, 1.0, false
	if 2*a > b { // f -> 1-f
		a, sinSign = b-a, -1
	}
	if 4*a > b { // f -> 1/2-f
		a, b, cosSign = b-2*a, 2*b, -1
	}
	if 8*a > b { // f -> 1/4-f
		a, b, swap = b-4*a, 4*b, true
	}
	s, c = math.Sincos(2 * math.Pi * float64(a) / float64(b))
	if swap {
		c, s = s, c
	}
	return cosSign * c, sinSign * s
}

// twiddles returns the cosine and sine tables of length n, each value
// computed in float64 and rounded once to T.
func twiddles[T kernel.Float](n int) (cs, sn []T) {
	cs, sn = make([]T, n), make([]T, n)
	for m := range n {
		c, s := twiddle(m, n)
		cs[m], sn[m] = T(c), T(s)
	}
	return cs, sn
}

// lineTransform computes transforms of length nfft over one line of samples
// at a time, with the twiddle tables of that length.
type lineTransform[T kernel.Float] struct {
	nfft    int
	cs, sn  []T
	fma     func(a, b, c T) T
	inverse bool
}

// transform computes bins k = 0..outLen-1 of one line and calls put with
// each. For bin k the samples n = 0..len(xr)-1 are visited in order; with
// θ = 2πkn/N (taken from the table at kn mod N) and σ = -1 forward, +1
// inverse, each sample updates
//
//	re = fma(xr, cos θ, re); re = fma(-σ·xi, sin θ, re)
//	im = fma(xi, cos θ, im); im = fma(σ·xr, sin θ, im)
//
// (the xi steps are skipped for real input), starting from zero. The
// inverse then divides both sums by N.
func (t *lineTransform[T]) transform(xr, xi []T, outLen int, put func(k int, re, im T)) {
	n := t.nfft
	for k := range outLen {
		var re, im T
		m := 0
		for j, a := range xr {
			c, s := t.cs[m], t.sn[m]
			if xi == nil {
				re = t.fma(a, c, re)
				if t.inverse {
					im = t.fma(a, s, im)
				} else {
					im = t.fma(-a, s, im)
				}
			} else {
				b := xi[j]
				if t.inverse {
					re = t.fma(a, c, re)
					re = t.fma(-b, s, re)
					im = t.fma(b, c, im)
					im = t.fma(a, s, im)
				} else {
					re = t.fma(a, c, re)
					re = t.fma(b, s, re)
					im = t.fma(b, c, im)
					im = t.fma(-a, s, im)
				}
			}
			if m += k; m >= n {
				m -= n
			}
		}
		if t.inverse {
			re /= T(n)
			im /= T(n)
		}
		put(k, re, im)
	}
}

// irfft computes the real signal n = 0..N-1 of a one-sided spectrum
// (yr, yi: bins 0..len-1, missing bins are zero), extended to N bins by
// conjugate symmetry Y[N-k] = conj(Y[k]). Each output is
// re = fma(Yr[k], cos θ, re); re = fma(-Yi[k], sin θ, re) over k = 0..N-1
// in order, divided by N.
func (t *lineTransform[T]) irfft(yr, yi []T, put func(k int, re T)) {
	n := t.nfft
	half := n / 2
	for j := range n {
		var re T
		m := 0
		for k := range n {
			var a, b T
			switch {
			case k <= half && k < len(yr):
				a, b = yr[k], yi[k]
			case k > half && n-k < len(yr):
				a, b = yr[n-k], -yi[n-k]
			}
			re = t.fma(a, t.cs[m], re)
			re = t.fma(-b, t.sn[m], re)
			if m += j; m >= n {
				m -= n
			}
		}
		put(j, re/T(n))
	}
}

// dftPlan is the geometry of a DFT node: the input viewed as
// [outer, inLen, inner, inLast], the output as [outer, outLen, inner, outLast].
type dftPlan struct {
	outer, inLen, inner, inLast int
	nfft, outLen, outLast       int
	inverse, irfft              bool
}

func runDFT(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, fmt.Errorf("DFT: missing input")
	}
	r := x.Rank()
	if r < 2 {
		return nil, fmt.Errorf("DFT: input must have rank >= 2 ([..., signal, 1 or 2]), got shape %s", tensor.ShapeString(x.Shape))
	}
	if last := x.Shape[r-1]; last != 1 && last != 2 {
		return nil, fmt.Errorf("DFT: last dimension must be 1 (real) or 2 (complex), got %d", last)
	}
	axis := n.Int("axis", 1)
	if n.Version >= 20 {
		axis = -2
		if a := kernel.Input(in, 2); a != nil {
			v, err := scalarInt("DFT", "axis", a)
			if err != nil {
				return nil, err
			}
			axis = v
		}
	}
	ax, err := dftAxis(axis, r)
	if err != nil {
		return nil, err
	}
	length := int64(-1)
	if l := kernel.Input(in, 1); l != nil {
		if length, err = scalarInt("DFT", "dft_length", l); err != nil {
			return nil, err
		}
	}
	p, err := planDFT(x.Shape, ax, length, n.Int("inverse", 0) != 0, n.Int("onesided", 0) != 0)
	if err != nil {
		return nil, err
	}
	shape := append([]int(nil), x.Shape...)
	shape[ax], shape[r-1] = p.outLen, p.outLast
	return floatOp("DFT", x, shape, func(x []float32) []float32 { return dftCore(p, x, vmath.FMA32) },
		func(x []float64) []float64 { return dftCore(p, x, math.FMA) })
}

// dftAxis normalises a DFT axis: [-r, -2] or [0, r-2].
func dftAxis(axis int64, r int) (int, error) {
	a := axis
	if a < 0 {
		a += int64(r)
	}
	if a < 0 || a > int64(r-2) {
		return 0, fmt.Errorf("DFT: axis %d out of range for rank %d (the last dimension holds real/imaginary parts)", axis, r)
	}
	return int(a), nil
}

// planDFT checks the attributes against the input shape. length < 0 means
// no dft_length input.
func planDFT(shape []int, ax int, length int64, inverse, onesided bool) (dftPlan, error) {
	r := len(shape)
	p := dftPlan{outer: 1, inner: 1, inLen: shape[ax], inLast: shape[r-1], inverse: inverse}
	for _, d := range shape[:ax] {
		p.outer *= d
	}
	for _, d := range shape[ax+1 : r-1] {
		p.inner *= d
	}
	p.irfft = inverse && onesided
	switch {
	case length >= 0:
		if length == 0 || length > math.MaxInt32 {
			return p, fmt.Errorf("DFT: dft_length must be in [1, 2^31), got %d", length)
		}
		p.nfft = int(length)
	case p.irfft:
		p.nfft = 2 * (p.inLen - 1)
	default:
		p.nfft = p.inLen
	}
	if p.nfft <= 0 {
		return p, fmt.Errorf("DFT: transform length is %d (signal axis has %d elements)", p.nfft, p.inLen)
	}
	p.outLen, p.outLast = p.nfft, 2
	switch {
	case p.irfft:
		if p.inLast != 2 {
			return p, fmt.Errorf("DFT: onesided inverse (IRFFT) needs complex input (last dimension 2), got %d", p.inLast)
		}
		p.outLast = 1
	case onesided:
		if p.inLast != 1 {
			return p, fmt.Errorf("DFT: onesided forward transform needs real input (last dimension 1), got %d", p.inLast)
		}
		p.outLen = p.nfft/2 + 1
	}
	return p, nil
}

func dftCore[T kernel.Float](p dftPlan, x []T, fma func(a, b, c T) T) []T {
	cs, sn := twiddles[T](p.nfft)
	lt := &lineTransform[T]{nfft: p.nfft, cs: cs, sn: sn, fma: fma, inverse: p.inverse}
	out := make([]T, p.outer*p.outLen*p.inner*p.outLast)
	nUse := min(p.inLen, p.nfft)
	if p.irfft {
		nUse = min(p.inLen, p.nfft/2+1)
	}
	xr := make([]T, nUse)
	var xi []T
	if p.inLast == 2 {
		xi = make([]T, nUse)
	}
	for o := range p.outer {
		for i := range p.inner {
			for j := range nUse {
				off := ((o*p.inLen+j)*p.inner + i) * p.inLast
				xr[j] = x[off]
				if xi != nil {
					xi[j] = x[off+1]
				}
			}
			base := o * p.outLen * p.inner
			if p.irfft {
				lt.irfft(xr, xi, func(k int, re T) { out[base+k*p.inner+i] = re })
				continue
			}
			lt.transform(xr, xi, p.outLen, func(k int, re, im T) {
				off := ((base + k*p.inner) + i) * 2
				out[off], out[off+1] = re, im
			})
		}
	}
	return out
}

// floatOp runs a float kernel on x (float32 and float64 natively, float16
// and bfloat16 through float32) and returns a tensor of x's type.
func floatOp(op string, x *tensor.Tensor, shape []int, f32 func([]float32) []float32, f64 func([]float64) []float64) ([]*tensor.Tensor, error) {
	switch d := x.Data.(type) {
	case []float32:
		return []*tensor.Tensor{tensor.From(f32(d), shape...)}, nil
	case []float64:
		return []*tensor.Tensor{tensor.From(f64(d), shape...)}, nil
	case []tensor.Half, []tensor.BHalf:
		out := f32(toF32(x))
		v := make([]float64, len(out))
		for i, f := range out {
			v[i] = float64(f)
		}
		return []*tensor.Tensor{tensor.FromFloat64s(x.DType, shape, v)}, nil
	}
	return nil, fmt.Errorf("%s: input must be float16, float32, float64 or bfloat16, got %v", op, x.DType)
}

func toF32(x *tensor.Tensor) []float32 {
	v, _ := x.Float64s()
	out := make([]float32, len(v))
	for i, f := range v {
		out[i] = float32(f)
	}
	return out
}

func inferDFT(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x := inferInput(in, 0)
	if !x.Present {
		return nil, fmt.Errorf("DFT: missing input")
	}
	t := ir.Type{DType: x.Type.DType}
	if !x.Type.RankKnown {
		return []ir.Type{t}, nil
	}
	r := len(x.Type.Shape)
	if r < 2 {
		return nil, fmt.Errorf("DFT: input must have rank >= 2, got %d", r)
	}
	t.RankKnown = true
	t.Shape = append([]ir.Dim(nil), x.Type.Shape...)
	inverse, onesided := n.Int("inverse", 0) != 0, n.Int("onesided", 0) != 0
	if inverse && onesided {
		t.Shape[r-1] = ir.Fixed(1)
	} else {
		t.Shape[r-1] = ir.Fixed(2)
	}
	axis, axisKnown := n.Int("axis", 1), true
	if n.Version >= 20 {
		axis = -2
		if a := inferInput(in, 2); a.Present {
			axis, axisKnown = constScalar(a)
		}
	}
	length, lengthKnown := int64(-1), true
	if l := inferInput(in, 1); l.Present {
		length, lengthKnown = constScalar(l)
	}
	if !axisKnown {
		if length < 0 && lengthKnown && !onesided {
			return []ir.Type{t}, nil
		}
		for i := range r - 1 {
			t.Shape[i] = ir.Unknown
		}
		return []ir.Type{t}, nil
	}
	ax, err := dftAxis(axis, r)
	if err != nil {
		return nil, err
	}
	d := x.Type.Shape[ax]
	switch {
	case !lengthKnown:
		t.Shape[ax] = ir.Unknown
	case length < 0 && !onesided:
		t.Shape[ax] = d
	case length < 0 && !d.Known():
		t.Shape[ax] = ir.Unknown
	default:
		nfft := length
		if length < 0 {
			nfft = d.Value
			if inverse {
				nfft = 2 * (d.Value - 1)
			}
		}
		if onesided && !inverse {
			nfft = nfft/2 + 1
		}
		t.Shape[ax] = ir.Dim{Value: nfft}
	}
	return []ir.Type{t}, nil
}
