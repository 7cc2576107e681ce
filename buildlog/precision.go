package buildlog

import "github.com/vouchml/vouch/quant"

// PrecisionReport is the reduced-precision part of the build report: what
// was quantized, from what calibration, and what it cost in accuracy.
type PrecisionReport struct {
	Precision          string `json:"precision"`
	Calibrator         string `json:"calibrator,omitempty"`
	CalibrationSamples int    `json:"calibration_samples,omitempty"`
	CalibrationCache   string `json:"calibration_cache_sha256,omitempty"`
	// WeightBits is 7 for a build with 7-bit int8 weights (|w| ≤ 63, the
	// int8 layers' w_bits); absent for 8.
	WeightBits int              `json:"weight_bits,omitempty"`
	Tensors    []TensorRange    `json:"tensors,omitempty"`
	Layers     []LayerPrecision `json:"layers,omitempty"`
	Fallbacks  []Fallback       `json:"fallbacks,omitempty"`
	// Accuracy compares the plan with the FP32 model on the evaluation
	// data (or, without labels, agreement on the calibration data).
	Accuracy *quant.Accuracy `json:"accuracy,omitempty"`
	// EvalData says which data the accuracy figures come from.
	EvalData string `json:"eval_data,omitempty"`
	// Int8Edges are the activations the plan passes between int8 layers
	// as u8 (compile's int8-chains pass), and the check that ran.
	Int8Edges *Int8Edges `json:"int8_edges,omitempty"`
}

// Int8Edges is the int8-chains pass's record.
type Int8Edges struct {
	Outputs int        `json:"int8_outputs"` // int8 layers' outputs
	Edges   []Int8Edge `json:"edges"`
	// Blocked counts why the other int8 outputs stay float32.
	Blocked map[string]int `json:"blocked,omitempty"`
	// Verified is the number of inputs (VerifiedOn) on which the graph
	// with the edges gave the bits of the graph without them.
	Verified   int    `json:"verified_samples"`
	VerifiedOn string `json:"verified_on,omitempty"`
}

// Int8Edge is one u8 activation: the tensor, the int8 layer that writes
// it with the scale of the int8 layers that read it.
type Int8Edge struct {
	Tensor    string   `json:"tensor"`
	Producer  string   `json:"producer"`
	Consumers []string `json:"consumers"`
	Scale     float32  `json:"scale"`
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
