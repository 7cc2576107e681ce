// Package image implements ONNX's spatial and detection operators: Resize,
// Upsample, GridSample, RoiAlign and NonMaxSuppression.
//
// Interpolation geometry (source coordinates and weights) is computed in
// float64 with IEEE basic operations only, so it is exact-reproducible;
// weighted sums over float32 data are fused multiply-add chains in a fixed,
// documented order (see interpolate, gridSample and roiAlign).
package image

import "github.com/vouchml/vouch/kernel"

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{
		"Resize":            {Run: runResize, Infer: inferResize, Into: intoResize},
		"Upsample":          {Run: runResize, Infer: inferResize, Into: intoResize},
		"GridSample":        {Run: runGridSample, Infer: inferGridSample},
		"RoiAlign":          {Run: runRoiAlign, Infer: inferRoiAlign},
		"NonMaxSuppression": {Run: runNMS, Infer: inferNMS},
	}
}
