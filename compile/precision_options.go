package compile

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vouchml/vouch/quant"
	"github.com/vouchml/vouch/tensor"
)

// Precisions are the layer precisions a build may choose.
var Precisions = []string{"fp32", "fp16", "int8", "best"}

// QuantOptions are the reduced-precision settings (Options.Quant). The
// data fields are not serialized: the build log and the options record
// their SHA-256 digests instead (set by the caller that read the files).
type QuantOptions struct {
	// LayerPrecision overrides the precision of named layers (fp32, fp16,
	// int8), like TensorRT's per-layer precision constraints.
	LayerPrecision map[string]string `json:"layer_precision,omitempty"`
	// Calibrator is minmax, entropy or percentile (the default: on
	// resnet18 with seeded random calibration data, entropy clipped so
	// much that top-1 agreement with fp32 fell to 3%, percentile 99.99
	// kept 100%).
	Calibrator string `json:"calibrator,omitempty"`
	// Percentile for the percentile calibrator (default 99.99).
	Percentile float64 `json:"percentile,omitempty"`
	// WeightBits is the int8 layers' weight range: 8 (the default, |w| ≤
	// 127) or 7 (|w| ≤ 63, ONNX Runtime's reduce_range): on a CPU with
	// AVX2 but no VNNI, 7-bit weights let the u8 × s8 tiles run
	// (VPMADDUBSW pairs cannot saturate), at the cost of one bit of
	// weight precision that the build report's accuracy figures measure.
	// 0 means 8.
	WeightBits int `json:"weight_bits,omitempty"`
	// MaxAccuracyDrop bounds the accuracy loss (percentage points) under
	// precision "best"; nil means DefaultMaxAccuracyDrop, and an explicit
	// 0 means no drop at all (a pointer, so that 0 is not the default).
	MaxAccuracyDrop *float64 `json:"max_accuracy_drop,omitempty"`
	// CalibSHA256, CacheSHA256, EvalSHA256 identify the data given.
	CalibSHA256 string `json:"calib_sha256,omitempty"`
	CacheSHA256 string `json:"calib_cache_sha256,omitempty"`
	EvalSHA256  string `json:"eval_sha256,omitempty"`

	// Calib holds calibration batches (leading dimension: samples) for the
	// model's single input.
	Calib []*tensor.Tensor `json:"-"`
	// Cache supplies activation scales; tensors it lacks are calibrated.
	Cache *quant.Cache `json:"-"`
	// EvalData and EvalLabels measure accuracy (labels: int64 [samples]).
	EvalData   []*tensor.Tensor `json:"-"`
	EvalLabels *tensor.Tensor   `json:"-"`
}

// ParseLayerPrecision parses one --layer-precision NAME=PRECISION value
// into m.
func ParseLayerPrecision(m map[string]string, s string) error {
	name, p, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("compile: layer precision %q: want NAME=fp32|fp16|int8", s)
	}
	switch p {
	case "fp32", "fp16", "int8":
	default:
		return fmt.Errorf("compile: layer precision %q: precision %q is not fp32, fp16 or int8", s, p)
	}
	if _, dup := m[name]; dup {
		return fmt.Errorf("compile: layer %q given two precisions", name)
	}
	m[name] = p
	return nil
}

func (q QuantOptions) valid(precision string) error {
	switch q.Calibrator {
	case "", quant.MinMax, quant.Entropy, quant.Percentile:
	default:
		return fmt.Errorf("compile: calibrator %q is not supported (minmax, entropy, percentile)", q.Calibrator)
	}
	switch q.WeightBits {
	case 0, 7, 8:
	default:
		return fmt.Errorf("compile: int8 weight bits %d: want 7 or 8", q.WeightBits)
	}
	if q.Percentile < 0 || q.Percentile > 100 {
		return fmt.Errorf("compile: percentile %v out of range (0, 100]", q.Percentile)
	}
	if d := q.MaxAccuracyDrop; d != nil && !(*d >= 0 && *d <= 100) {
		return fmt.Errorf("compile: max accuracy drop %v is not in 0..100 percentage points", *d)
	}
	names := make([]string, 0, len(q.LayerPrecision))
	for n := range q.LayerPrecision {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		switch q.LayerPrecision[n] {
		case "fp32", "fp16", "int8":
		default:
			return fmt.Errorf("compile: layer %q: precision %q is not fp32, fp16 or int8", n, q.LayerPrecision[n])
		}
	}
	if q.EvalData == nil && q.EvalLabels != nil {
		return fmt.Errorf("compile: evaluation labels given without evaluation data")
	}
	return nil
}

func (q QuantOptions) calibrator() string {
	if q.Calibrator == "" {
		return DefaultCalibrator
	}
	return q.Calibrator
}

func (q QuantOptions) percentile() float64 {
	if q.Percentile == 0 {
		return DefaultPercentile
	}
	return q.Percentile
}

// weightBits is the int8 weights' width (7 or 8).
func (q QuantOptions) weightBits() int {
	if q.WeightBits == 0 {
		return 8
	}
	return q.WeightBits
}

func (q QuantOptions) maxDrop() float64 {
	if q.MaxAccuracyDrop == nil {
		return DefaultMaxAccuracyDrop
	}
	return *q.MaxAccuracyDrop
}

// canonical returns q with every setting equal to its default in its
// zero (omitted) form, and the accuracy bound dropped unless precision
// is "best" (the only precision it applies to): options that mean the
// same build serialise the same, so they give the same plan digest.
func (q QuantOptions) canonical(precision string) QuantOptions {
	if q.Calibrator == DefaultCalibrator {
		q.Calibrator = ""
	}
	if q.WeightBits == 8 {
		q.WeightBits = 0
	}
	if q.Percentile == DefaultPercentile {
		q.Percentile = 0
	}
	if d := q.MaxAccuracyDrop; d != nil && (*d == DefaultMaxAccuracyDrop || precision != "best") {
		q.MaxAccuracyDrop = nil
	}
	return q
}
