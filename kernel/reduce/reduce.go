// Package reduce implements ONNX's reductions (ReduceSum and friends),
// Softmax, LogSoftmax, Hardmax and the loss operators.
package reduce

import "github.com/vouchml/vouch/kernel"

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{}
}
