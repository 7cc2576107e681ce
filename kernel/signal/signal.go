// Package signal implements ONNX's signal-processing operators: DFT, STFT,
// the cosine-sum windows (HannWindow, HammingWindow, BlackmanWindow),
// MelWeightMatrix and Col2Im.
//
// Transforms are direct O(n²) sums, never a fast plan, so each output
// element has one documented operation order: for output bin k the
// samples are visited n = 0, 1, ..., n-1 and folded into the real and
// imaginary accumulators by fused multiply-adds (vmath.FMA32 for float32
// data, math.FMA for float64; float16 and bfloat16 compute in float32).
// Twiddle factors cos(2πm/N) and sin(2πm/N) are computed once per transform
// length in float64 with the math package, after reducing m/N exactly (in
// integers) to the first octant, and rounded once to the data's type; see
// twiddles. Window and mel-filter coefficients are computed in float64 and
// rounded once to the output type.
package signal

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{
		"DFT":             {Run: runDFT, Infer: inferDFT},
		"STFT":            {Run: runSTFT, Infer: inferSTFT},
		"HannWindow":      {Run: runWindow(hann), Infer: inferWindow},
		"HammingWindow":   {Run: runWindow(hamming), Infer: inferWindow},
		"BlackmanWindow":  {Run: runWindow(blackman), Infer: inferWindow},
		"MelWeightMatrix": {Run: runMel, Infer: inferMel},
		"Col2Im":          {Run: runCol2Im, Infer: inferCol2Im},
	}
}

// scalarInt reads a one-element integer tensor (a scalar or shape [1]).
func scalarInt(op, name string, t *tensor.Tensor) (int64, error) {
	if t == nil {
		return 0, fmt.Errorf("%s: missing input %s", op, name)
	}
	if !t.DType.IsInt() {
		return 0, fmt.Errorf("%s: %s must be an integer tensor, got %v", op, name, t.DType)
	}
	if t.Len() != 1 || t.Rank() > 1 {
		return 0, fmt.Errorf("%s: %s must be a scalar, got shape %s", op, name, tensor.ShapeString(t.Shape))
	}
	v, err := t.Int64s()
	if err != nil {
		return 0, fmt.Errorf("%s: %s: %w", op, name, err)
	}
	return v[0], nil
}

// scalarFloat reads a one-element float tensor.
func scalarFloat(op, name string, t *tensor.Tensor) (float64, error) {
	if t == nil {
		return 0, fmt.Errorf("%s: missing input %s", op, name)
	}
	if t.Len() != 1 || t.Rank() > 1 {
		return 0, fmt.Errorf("%s: %s must be a scalar, got shape %s", op, name, tensor.ShapeString(t.Shape))
	}
	v, err := t.Float64s()
	if err != nil {
		return 0, fmt.Errorf("%s: %s: %w", op, name, err)
	}
	return v[0], nil
}

// constScalar returns a constant one-element integer input's value.
func constScalar(x ir.InferInput) (int64, bool) {
	v, ok := kernel.ConstInts(x)
	if !ok || len(v) != 1 {
		return 0, false
	}
	return v[0], true
}

// numericOutput checks an output_datatype attribute: any numeric type.
func numericOutput(op string, n *ir.Node) (tensor.DType, error) {
	dt := tensor.DType(n.Int("output_datatype", int64(tensor.Float32)))
	if !dt.Supported() || dt == tensor.String || dt == tensor.Bool {
		return 0, fmt.Errorf("%s: output_datatype %v is not a numeric type", op, dt)
	}
	return dt, nil
}

func inferInput(in []ir.InferInput, i int) ir.InferInput {
	if i < len(in) {
		return in[i]
	}
	return ir.InferInput{}
}
