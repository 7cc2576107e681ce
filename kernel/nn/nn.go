// Package nn implements ONNX's neural-network operators: MatMul, Gemm and
// convolutions (including their integer and quantized forms), pooling,
// normalization, quantize/dequantize and Einsum.
package nn

import "github.com/vouchml/vouch/kernel"

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{}
}
