// Package sequence implements ONNX's sequence operators over sequence
// values (tensor.Sequence: a *tensor.Tensor whose Data is []*tensor.Tensor).
package sequence

import "github.com/vouchml/vouch/kernel"

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{}
}
