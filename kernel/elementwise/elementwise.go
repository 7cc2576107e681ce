// Package elementwise implements ONNX's elementwise operators: unary math
// and activations, broadcasting binary arithmetic, comparisons, logic and
// bit operations, Cast, Clip, Where and the variadic Sum/Mean/Max/Min.
package elementwise

import "github.com/vouchml/vouch/kernel"

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{}
}
