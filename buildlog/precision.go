package buildlog

import "github.com/vouchml/vouch/quant"

// PrecisionReport is the reduced-precision part of the build report: what
// was quantized, from what calibration, and what it cost in accuracy.
type PrecisionReport struct {
	Precision          string           `json:"precision"`
	Calibrator         string           `json:"calibrator,omitempty"`
	CalibrationSamples int              `json:"calibration_samples,omitempty"`
	CalibrationCache   string           `json:"calibration_cache_sha256,omitempty"`
	Tensors            []TensorRange    `json:"tensors,omitempty"`
	Layers             []LayerPrecision `json:"layers,omitempty"`
	Fallbacks          []Fallback       `json:"fallbacks,omitempty"`
	// Accuracy compares the plan with the FP32 model on the evaluation
	// data (or, without labels, agreement on the calibration data).
	Accuracy *quant.Accuracy `json:"accuracy,omitempty"`
	// EvalData says which data the accuracy figures come from.
	EvalData string `json:"eval_data,omitempty"`
}

// TensorRange is one calibrated activation tensor.
type TensorRange struct {
	Tensor    string  `json:"tensor"`
	Amax      float64 `json:"amax"`
	Threshold float64 `json:"threshold"`
	Scale     float32 `json:"scale"`
	Clipped   float64 `json:"clipped_fraction"`
	FromCache bool    `json:"from_cache,omitempty"`
	FromModel bool    `json:"from_model,omitempty"` // a QDQ model's scale
}

// LayerPrecision is one weighted layer's precision decision.
type LayerPrecision struct {
	Layer     string  `json:"layer"`
	Precision string  `json:"precision"`
	Reason    string  `json:"reason,omitempty"`
	Input     string  `json:"input,omitempty"` // the quantized activation tensor
	SQNR      float64 `json:"output_sqnr_db,omitempty"`
}

// Fallback records a layer returned to fp32 to meet the accuracy bound.
type Fallback struct {
	Layer  string  `json:"layer"`
	Reason string  `json:"reason"`
	SQNR   float64 `json:"isolated_sqnr_db"`
	Drop   float64 `json:"drop_before_pp"`
}
