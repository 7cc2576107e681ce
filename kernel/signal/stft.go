package signal

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// stftPlan is the geometry of an STFT node.
type stftPlan struct {
	batch, sigLen, inLast  int
	step, frameLen, frames int
	outLen                 int
	window                 []float64 // nil: rectangular
}

// runSTFT computes Y[b, f, k] = Σ_n w[n]·x[b, f·step+n]·e^{-2πikn/L}. Each
// windowed sample w[n]·x is one multiplication rounded to the working type;
// the sum over n is the forward transform of lineTransform.transform.
func runSTFT(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, fmt.Errorf("STFT: missing input signal")
	}
	if x.Rank() != 3 || (x.Shape[2] != 1 && x.Shape[2] != 2) {
		return nil, fmt.Errorf("STFT: signal must have shape [batch, length, 1 or 2], got %s", tensor.ShapeString(x.Shape))
	}
	p := stftPlan{batch: x.Shape[0], sigLen: x.Shape[1], inLast: x.Shape[2]}
	step, err := scalarInt("STFT", "frame_step", kernel.Input(in, 1))
	if err != nil {
		return nil, err
	}
	if step <= 0 || step > math.MaxInt32 {
		return nil, fmt.Errorf("STFT: frame_step must be positive, got %d", step)
	}
	p.step = int(step)
	p.frameLen = p.sigLen
	if w := kernel.Input(in, 2); w != nil {
		if w.Rank() != 1 || !w.DType.IsFloat() {
			return nil, fmt.Errorf("STFT: window must be a 1-D float tensor, got %v %s", w.DType, tensor.ShapeString(w.Shape))
		}
		p.window, _ = w.Float64s()
		p.frameLen = len(p.window)
	}
	if l := kernel.Input(in, 3); l != nil {
		fl, err := scalarInt("STFT", "frame_length", l)
		if err != nil {
			return nil, err
		}
		if p.window != nil && fl != int64(len(p.window)) {
			return nil, fmt.Errorf("STFT: frame_length %d does not match the window length %d", fl, len(p.window))
		}
		if fl <= 0 || fl > math.MaxInt32 {
			return nil, fmt.Errorf("STFT: frame_length must be positive, got %d", fl)
		}
		p.frameLen = int(fl)
	}
	if p.frameLen <= 0 || p.frameLen > p.sigLen {
		return nil, fmt.Errorf("STFT: frame length %d must be in [1, signal length %d]", p.frameLen, p.sigLen)
	}
	p.frames = 1 + (p.sigLen-p.frameLen)/p.step
	p.outLen = p.frameLen
	if n.Int("onesided", 1) != 0 {
		if p.inLast != 1 {
			return nil, fmt.Errorf("STFT: onesided output needs a real signal (last dimension 1), got %d", p.inLast)
		}
		p.outLen = p.frameLen/2 + 1
	}
	shape := []int{p.batch, p.frames, p.outLen, 2}
	return floatOp("STFT", x, shape, func(x []float32) []float32 { return stftCore(p, x, vmath.FMA32) },
		func(x []float64) []float64 { return stftCore(p, x, math.FMA) })
}

func stftCore[T kernel.Float](p stftPlan, x []T, fma func(a, b, c T) T) []T {
	cs, sn := twiddles[T](p.frameLen)
	lt := &lineTransform[T]{nfft: p.frameLen, cs: cs, sn: sn, fma: fma}
	var w []T
	if p.window != nil {
		w = make([]T, len(p.window))
		for i, v := range p.window {
			w[i] = T(v)
		}
	}
	out := make([]T, p.batch*p.frames*p.outLen*2)
	xr := make([]T, p.frameLen)
	var xi []T
	if p.inLast == 2 {
		xi = make([]T, p.frameLen)
	}
	for b := range p.batch {
		for f := range p.frames {
			for j := range p.frameLen {
				off := (b*p.sigLen + f*p.step + j) * p.inLast
				xr[j] = x[off]
				if xi != nil {
					xi[j] = x[off+1]
				}
				if w != nil {
					xr[j] *= w[j]
					if xi != nil {
						xi[j] *= w[j]
					}
				}
			}
			base := (b*p.frames + f) * p.outLen * 2
			lt.transform(xr, xi, p.outLen, func(k int, re, im T) {
				out[base+2*k], out[base+2*k+1] = re, im
			})
		}
	}
	return out
}

func inferSTFT(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x := inferInput(in, 0)
	if !x.Present {
		return nil, fmt.Errorf("STFT: missing input signal")
	}
	t := ir.Type{DType: x.Type.DType, RankKnown: true, Shape: []ir.Dim{ir.Unknown, ir.Unknown, ir.Unknown, ir.Fixed(2)}}
	var sig ir.Dim = ir.Unknown
	if x.Type.RankKnown {
		if len(x.Type.Shape) != 3 {
			return nil, fmt.Errorf("STFT: signal must have rank 3, got %d", len(x.Type.Shape))
		}
		t.Shape[0] = x.Type.Shape[0]
		sig = x.Type.Shape[1]
	}
	frameLen, ok := int64(-1), false
	if l := inferInput(in, 3); l.Present {
		frameLen, ok = constScalar(l)
	} else if w := inferInput(in, 2); w.Present {
		if w.Type.RankKnown && len(w.Type.Shape) == 1 && w.Type.Shape[0].Known() {
			frameLen, ok = w.Type.Shape[0].Value, true
		}
	} else if sig.Known() {
		frameLen, ok = sig.Value, true
	}
	if !ok || frameLen <= 0 {
		return []ir.Type{t}, nil
	}
	if n.Int("onesided", 1) != 0 {
		t.Shape[2] = ir.Dim{Value: frameLen/2 + 1}
	} else {
		t.Shape[2] = ir.Dim{Value: frameLen}
	}
	if step, ok := constScalar(inferInput(in, 1)); ok && step > 0 && sig.Known() && sig.Value >= frameLen {
		t.Shape[1] = ir.Dim{Value: 1 + (sig.Value-frameLen)/step}
	}
	return []ir.Type{t}, nil
}
