// Package shape implements ONNX's data-movement operators: reshaping,
// transposition, concatenation and splitting, slicing, gathering and
// scattering, padding, tiling, and the small shape-producing ops.
package shape

import "github.com/vouchml/vouch/kernel"

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{}
}
