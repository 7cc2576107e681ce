package buildlog

// GPUReport is the GPU part of the build report: every layer's placement
// and precision, and for a fast plan (issue 19) why each layer asked for a
// fast precision stays exact, the layers precision best returned to exact,
// and the accuracy evidence against the exact plan of the same model.
type GPUReport struct {
	Mode string `json:"mode"` // plan.ModeExact or plan.ModeFast
	Arch string `json:"arch"`
	// Contract is a fast plan's stated contract (plan.FastContract).
	Contract string `json:"contract,omitempty"`
	// Requested is the --precision the build was asked for (fp16, bf16,
	// int8, best); the plan's label comes from its layers (Report's
	// PlanPrecision), never from this.
	Requested string `json:"requested_precision,omitempty"`
	// Layers is the plan's placement, every layer with its precision.
	Layers []GPULayer `json:"layers"`
	// Notes say why a layer asked for a fast precision stays exact.
	Notes []LayerNote `json:"notes,omitempty"`
	// Fallbacks are the layers precision best returned to exact.
	Fallbacks []LayerNote `json:"fallbacks,omitempty"`
	// Accuracy compares the fast plan with the exact plan; nil when it
	// was not measured, and then AccuracyMissing says why.
	Accuracy        *FastAccuracy `json:"accuracy,omitempty"`
	AccuracyMissing string        `json:"accuracy_missing,omitempty"`
}

// GPULayer is one layer's placement (plan.Placement) with its precision:
// a fast kernel's, else what the layer's kind computes in (fp32 for the
// layers of a GPU build).
type GPULayer struct {
	Layer     string `json:"layer"`
	Backend   string `json:"backend"`
	Kernel    string `json:"kernel,omitempty"`
	Precision string `json:"precision"`
	Reason    string `json:"reason,omitempty"`
}

// LayerNote is a reason about one layer.
type LayerNote struct {
	Layer  string `json:"layer"`
	Reason string `json:"reason"`
}

// FastAccuracy is a fast plan's accuracy evidence: its outputs on the GPU
// against the exact plan's on the same inputs.
type FastAccuracy struct {
	Data      string `json:"data"`      // which data: evaluation or calibration
	Samples   int    `json:"samples"`   // rows run
	Device    string `json:"device"`    // the GPU the fast plan ran on
	Reference string `json:"reference"` // what the exact outputs came from
	// Outputs are the error statistics per model output (replay.Compare's).
	Outputs []OutputError `json:"outputs"`
	// Labelled is the top-1 accuracy of both plans, when labels were given
	// (quant.Compare's).
	Labelled *LabelledAccuracy `json:"labelled,omitempty"`
}

// OutputError is one output's error of the fast plan against the exact
// one: absolute and relative error (max, mean), the mean KL divergence of
// the softmaxed rows and the rows' top-1 agreement (a fraction).
type OutputError struct {
	Name    string  `json:"name"`
	AbsMax  float64 `json:"abs_max"`
	AbsMean float64 `json:"abs_mean"`
	RelMax  float64 `json:"rel_max"`
	RelMean float64 `json:"rel_mean"`
	KL      float64 `json:"kl_divergence"`
	Top1    float64 `json:"top1_agreement"`
	// BitExact is true when every value had the exact plan's bits.
	BitExact bool `json:"bit_exact"`
}

// LabelledAccuracy is the top-1 accuracy of both plans on labelled data.
type LabelledAccuracy struct {
	Exact float64 `json:"exact_accuracy"` // percent
	Fast  float64 `json:"fast_accuracy"`  // percent
	Drop  float64 `json:"drop_pp"`        // exact - fast, percentage points
}
