package mma

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// ConvGeom is a batch-folded 2-D convolution as the fast kernels take it
// (cuda/kernels fast.cu's vf_geom): N images of C×H×W, M filters of
// C×KH×KW, one group. A Gemm is the 1×1 convolution of N images of K
// channels and one pixel.
type ConvGeom struct {
	N, C, H, W, M, KH, KW, SH, SW, PH, PW, DH, DW int
}

// Out returns the output height and width.
func (g ConvGeom) Out() (oh, ow int) {
	oh = (g.H+2*g.PH-((g.KH-1)*g.DH+1))/g.SH + 1
	ow = (g.W+2*g.PW-((g.KW-1)*g.DW+1))/g.SW + 1
	return oh, ow
}

// maxConvElems bounds the tensors a ConvGeom may describe.
const maxConvElems = 1 << 31

func (g ConvGeom) check() error {
	for _, v := range []int{g.N, g.C, g.H, g.W, g.M, g.KH, g.KW, g.SH, g.SW, g.DH, g.DW} {
		if v < 1 {
			return fmt.Errorf("mma: conv geometry %+v: sizes, strides and dilations must be ≥ 1", g)
		}
	}
	if g.PH < 0 || g.PW < 0 {
		return fmt.Errorf("mma: conv geometry %+v: negative padding", g)
	}
	oh, ow := g.Out()
	if oh < 1 || ow < 1 {
		return fmt.Errorf("mma: conv geometry %+v: the kernel is larger than the padded input", g)
	}
	for _, n := range []float64{float64(g.N) * float64(g.C) * float64(g.H) * float64(g.W),
		float64(g.M) * float64(g.C) * float64(g.KH) * float64(g.KW), float64(g.N) * float64(g.M) * float64(oh) * float64(ow)} {
		if n > maxConvElems {
			return fmt.Errorf("mma: conv geometry %+v: a tensor of %.0f elements (at most %d)", g, n, maxConvElems)
		}
	}
	return nil
}

// Epilogue is what the fast kernels do to a chain's FP32 result, in this
// order: a NaN becomes the canonical quiet NaN, then + Bias[m] (one
// rounded float32 addition), then + Res (same layout as the output), then
// Relu (v < 0 becomes +0) and the clip bounds (v < Lo becomes Lo, v > Hi
// becomes Hi).
type Epilogue struct {
	Bias         []float32 // M values, or nil
	Res          []float32 // the output's size, or nil
	Relu         bool
	HasLo, HasHi bool
	Lo, Hi       float32
}

func (e Epilogue) apply(v float32, m int, o int) float32 {
	if v != v {
		v = math.Float32frombits(0x7fc00000)
	}
	if e.Bias != nil {
		v = v + e.Bias[m]
	}
	if e.Res != nil {
		v = v + e.Res[o]
	}
	if e.Relu && v < 0 {
		v = 0
	}
	if e.HasLo && v < e.Lo {
		v = e.Lo
	}
	if e.HasHi && v > e.Hi {
		v = e.Hi
	}
	return v
}

// operand is a decoded 16-bit input: its exact value v, ref its exponent
// for alignment (the exponent field's value; a subnormal's is the least
// normal one; zeros have v 0); special marks an infinity or a NaN.
type operand struct {
	v       float64
	ref     int32
	special bool
}

func decodeOperand(f Format, h uint16) operand {
	t, ok := decode16(f, h)
	if !ok {
		return operand{v: Value(f, h), special: true}
	}
	mbits := 10
	if f == BF16 {
		mbits = 7
	}
	return operand{v: Value(f, h), ref: int32(t.exp + mbits)}
}

// chain is Dot for decoded operands of the fitted model family (block 16,
// exponent-sum alignment, magnitudes truncated, the sum truncated): c plus
// the k16 steps over a and b in order.
func (m Model) chain(a, b []operand, c float32) float32 {
	acc := c
	for k := 0; k < len(a); k += 16 {
		acc = m.chainStep((*[16]operand)(a[k:k+16]), (*[16]operand)(b[k:k+16]), acc)
	}
	return acc
}

// chainStep is one step in float64, exactly: a product of two 16-bit
// values is exact in a float64, so is its scaling by a power of two and
// the truncation to the alignment grid, and the sum of 17 truncated terms
// of at most Frac+2 bits (Frac ≤ 45) stays below 2^53.
func (m Model) chainStep(a, b *[16]operand, c float32) float32 {
	const none = math.MinInt32
	emax := int32(none)
	for i := 0; i < 16; i++ {
		x, y := &a[i], &b[i]
		if x.special || y.special {
			return specialStep(a[:], b[:], c)
		}
		if x.v != 0 && y.v != 0 {
			emax = max(emax, x.ref+y.ref)
		}
	}
	cv := float64(c)
	if cv != 0 {
		if math.IsInf(cv, 0) || cv != cv {
			return specialStep(a[:], b[:], c)
		}
		emax = max(emax, int32(math.Ilogb(cv)))
	} else if emax == none {
		return c
	}
	lsb := int(emax) - m.Frac
	scale := math.Ldexp(1, -lsb)
	sum := math.Trunc(cv * scale)
	for i := 0; i < 16; i++ {
		sum += math.Trunc(a[i].v * b[i].v * scale)
	}
	v := math.Ldexp(sum, lsb)
	r := float32(v) // to nearest; then toward zero
	if math.Abs(float64(r)) > math.Abs(v) {
		r = math.Nextafter32(r, 0)
	}
	if r == 0 {
		return 0 // a sum that underflows is +0, whatever its sign
	}
	return r
}

// specialStep is a step with an infinite or NaN operand or accumulator:
// IEEE 754's rules for the exact sum (a NaN operand, ∞·0 or ∞ − ∞ give
// NaN; otherwise the infinities' sign), the finite terms not mattering.
func specialStep(a, b []operand, c float32) float32 {
	s := float64(c)
	if !math.IsInf(s, 0) && s == s {
		s = 0
	}
	for i := range a {
		p := a[i].v * b[i].v
		if math.IsInf(p, 0) || p != p {
			s += p
		}
	}
	if s != s {
		return float32(math.NaN())
	}
	return float32(s)
}

// fastChain reports whether m is of the family chain implements.
func (m Model) fastChain() bool {
	return m.Block == 16 && m.ExponentSum && m.TruncateMagnitude && m.Round == TowardZero && m.Check() == nil
}

// Conv2D computes on the CPU what the fast kernels compute on a GPU whose
// MMA arithmetic m models: y (N×M×OH×OW) from x (N×C×H×W, float32) and
// the float32 weights w (M×C×KH×KW), converted to the format with round
// to nearest even as the kernels convert them; every output the chain of
// k16 steps over k = c·KH·KW + kh·KW + kw from +0 (zeros beyond the
// reduction and in the padding contribute nothing), then the epilogue.
// It runs on up to GOMAXPROCS goroutines; the bits do not depend on it.
func (m Model) Conv2D(f Format, g ConvGeom, x, w []float32, e Epilogue, y []float32) error {
	return m.conv2D(f, g, x, w, e, y, m.fastChain())
}

// conv2D is Conv2D through chain (fastPath) or through Dot.
func (m Model) conv2D(f Format, g ConvGeom, x, w []float32, e Epilogue, y []float32, fastPath bool) error {
	if err := m.Check(); err != nil {
		return err
	}
	if err := g.check(); err != nil {
		return err
	}
	oh, ow := g.Out()
	K := g.C * g.KH * g.KW
	P := oh * ow
	if len(x) != g.N*g.C*g.H*g.W || len(w) != g.M*K || len(y) != g.N*g.M*P {
		return fmt.Errorf("mma: conv %+v: x of %d, w of %d, y of %d elements (want %d, %d, %d)", g, len(x), len(w), len(y), g.N*g.C*g.H*g.W, g.M*K, g.N*g.M*P)
	}
	if e.Bias != nil && len(e.Bias) != g.M || e.Res != nil && len(e.Res) != len(y) {
		return fmt.Errorf("mma: conv %+v: bias of %d, residual of %d elements (want %d, %d)", g, len(e.Bias), len(e.Res), g.M, len(y))
	}
	Kp := (K + 15) / 16 * 16
	wd := make([]operand, g.M*Kp)
	wh := make([]uint16, g.M*Kp)
	for mm := 0; mm < g.M; mm++ {
		for k := 0; k < K; k++ {
			h := FromFloat32(f, w[mm*K+k])
			wh[mm*Kp+k] = h
			wd[mm*Kp+k] = decodeOperand(f, h)
		}
	}
	cols := g.N * P
	workers := min(runtime.GOMAXPROCS(0), cols)
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for wk := 0; wk < workers; wk++ {
		wg.Add(1)
		go func(wk int) {
			defer wg.Done()
			col := make([]operand, Kp)
			colh := make([]uint16, Kp)
			for j := wk; j < cols; j += workers {
				n, p := j/P, j%P
				ohh, oww := p/ow, p%ow
				for k := range col {
					col[k], colh[k] = operand{}, 0
				}
				for c := 0; c < g.C; c++ {
					for kh := 0; kh < g.KH; kh++ {
						ih := ohh*g.SH - g.PH + kh*g.DH
						if ih < 0 || ih >= g.H {
							continue
						}
						for kw := 0; kw < g.KW; kw++ {
							iw := oww*g.SW - g.PW + kw*g.DW
							if iw < 0 || iw >= g.W {
								continue
							}
							k := (c*g.KH+kh)*g.KW + kw
							h := FromFloat32(f, x[((n*g.C+c)*g.H+ih)*g.W+iw])
							colh[k], col[k] = h, decodeOperand(f, h)
						}
					}
				}
				for mm := 0; mm < g.M; mm++ {
					var v float32
					if fastPath {
						v = m.chain(wd[mm*Kp:mm*Kp+Kp], col, 0)
					} else {
						var err error
						if v, err = m.Dot(f, wh[mm*Kp:mm*Kp+Kp], colh, 0); err != nil {
							errs[wk] = fmt.Errorf("output channel %d, image %d, pixel %d: %w", mm, n, p, err)
							return
						}
					}
					o := (n*g.M+mm)*P + p
					y[o] = e.apply(v, mm, o)
				}
			}
		}(wk)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
