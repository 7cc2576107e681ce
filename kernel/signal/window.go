package signal

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// cosineSum is a generalised cosine window a0 - a1·cos(2πn/N) + a2·cos(4πn/N).
type cosineSum struct{ a0, a1, a2 float64 }

var (
	hann     = cosineSum{0.5, 0.5, 0}
	hamming  = cosineSum{25.0 / 46, 21.0 / 46, 0}
	blackman = cosineSum{0.42, 0.5, 0.08}
)

// maxWindow bounds a window's length, so a hostile size input cannot ask
// for an absurd allocation.
const maxWindow = 1 << 30

// runWindow returns the kernel of a cosine-sum window. N is size when
// periodic (the default) and size-1 otherwise. Each value is evaluated in
// float64 left to right, a0 - a1·c1 + a2·c2, with c1 and c2 from twiddle
// (so the window is exactly symmetric), and rounded once to
// output_datatype (integer types truncate, as Cast does). A symmetric
// window of size 1 (N = 0, where the formula divides by zero) is [1].
func runWindow(w cosineSum) kernel.RunFunc {
	return func(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		op := n.OpType
		dt, err := numericOutput(op, n)
		if err != nil {
			return nil, err
		}
		size, err := scalarInt(op, "size", kernel.Input(in, 0))
		if err != nil {
			return nil, err
		}
		if size < 0 || size > maxWindow {
			return nil, fmt.Errorf("%s: size must be in [0, %d], got %d", op, maxWindow, size)
		}
		N := int(size)
		if n.Int("periodic", 1) == 0 {
			N--
		}
		vals := make([]float64, size)
		for i := range vals {
			if N <= 0 {
				vals[i] = 1
				continue
			}
			c1, _ := twiddle(i, N)
			c2, _ := twiddle(2*(i%N), N)
			vals[i] = w.a0 - w.a1*c1 + w.a2*c2
		}
		return []*tensor.Tensor{tensor.FromFloat64s(dt, []int{int(size)}, vals)}, nil
	}
}

func inferWindow(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	dt, err := numericOutput(n.OpType, n)
	if err != nil {
		return nil, err
	}
	d := ir.Unknown
	if v, ok := constScalar(inferInput(in, 0)); ok && v >= 0 {
		d = ir.Dim{Value: v}
	}
	return []ir.Type{{DType: dt, RankKnown: true, Shape: []ir.Dim{d}}}, nil
}

// runMel builds the [dft_length/2+1, num_mel_bins] matrix of triangular
// mel filters, following the ONNX reference: num_mel_bins+2 points evenly
// spaced in mel (mel = 2595·log10(1 + hz/700)) between the edges, each
// mapped back to hertz and to the spectrogram bin
// floor((dft_length+1)·hz / sample_rate); filter i rises linearly from
// point i to point i+1 and falls to point i+2. Everything is computed in
// float64 and rounded once to output_datatype.
func runMel(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	dt, err := numericOutput("MelWeightMatrix", n)
	if err != nil {
		return nil, err
	}
	var ints [3]int64
	for i, name := range []string{"num_mel_bins", "dft_length", "sample_rate"} {
		if ints[i], err = scalarInt("MelWeightMatrix", name, kernel.Input(in, i)); err != nil {
			return nil, err
		}
		if ints[i] <= 0 || ints[i] > maxWindow {
			return nil, fmt.Errorf("MelWeightMatrix: %s must be in [1, %d], got %d", name, maxWindow, ints[i])
		}
	}
	bins, dftLen, rate := int(ints[0]), ints[1], float64(ints[2])
	lo, err := scalarFloat("MelWeightMatrix", "lower_edge_hertz", kernel.Input(in, 3))
	if err != nil {
		return nil, err
	}
	hi, err := scalarFloat("MelWeightMatrix", "upper_edge_hertz", kernel.Input(in, 4))
	if err != nil {
		return nil, err
	}
	if !(lo >= 0 && hi >= lo) || math.IsInf(hi, 0) {
		return nil, fmt.Errorf("MelWeightMatrix: need 0 <= lower_edge_hertz <= upper_edge_hertz, got %v and %v", lo, hi)
	}
	spec := int(dftLen/2 + 1)
	if int64(spec)*int64(bins) > maxWindow {
		return nil, fmt.Errorf("MelWeightMatrix: output [%d, %d] is too large", spec, bins)
	}
	loMel := 2595 * math.Log10(1+lo/700)
	hiMel := 2595 * math.Log10(1+hi/700)
	step := (hiMel - loMel) / float64(bins+2)
	pts := make([]int, bins+2)
	for i := range pts {
		hz := 700 * (math.Pow(10, (float64(i)*step+loMel)/2595) - 1)
		b := floorDiv(float64(dftLen+1)*hz, rate)
		if b < 0 || b > float64(spec) || (i <= bins && b >= float64(spec)) {
			return nil, fmt.Errorf("MelWeightMatrix: mel point %d (%.6g Hz) falls in spectrogram bin %v, outside [0, %d): upper_edge_hertz too high for sample_rate %v", i, hz, b, spec, rate)
		}
		pts[i] = int(b)
	}
	out := make([]float64, spec*bins)
	for i := range bins {
		l, c, r := pts[i], pts[i+1], pts[i+2]
		if c == l {
			out[c*bins+i] = 1
		} else {
			for j := l; j <= c; j++ {
				out[j*bins+i] = float64(j-l) / float64(c-l)
			}
		}
		for j := c; j < r; j++ {
			out[j*bins+i] = float64(r-j) / float64(r-c)
		}
	}
	return []*tensor.Tensor{tensor.FromFloat64s(dt, []int{spec, bins}, out)}, nil
}

// floorDiv is Python's float floor division a // b (b > 0): the floor of
// the exact quotient, computed from fmod as CPython does.
func floorDiv(a, b float64) float64 {
	mod := math.Mod(a, b)
	div := (a - mod) / b
	if mod != 0 && mod < 0 {
		div--
	}
	if div == 0 {
		return 0
	}
	fd := math.Floor(div)
	if div-fd > 0.5 {
		fd++
	}
	return fd
}

func inferMel(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	dt, err := numericOutput("MelWeightMatrix", n)
	if err != nil {
		return nil, err
	}
	t := ir.Type{DType: dt, RankKnown: true, Shape: []ir.Dim{ir.Unknown, ir.Unknown}}
	if v, ok := constScalar(inferInput(in, 1)); ok && v > 0 {
		t.Shape[0] = ir.Dim{Value: v/2 + 1}
	}
	if v, ok := constScalar(inferInput(in, 0)); ok && v > 0 {
		t.Shape[1] = ir.Dim{Value: v}
	}
	return []ir.Type{t}, nil
}
