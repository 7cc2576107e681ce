package buildlog

// Report is the build report (JSON): what the build made of the model.
type Report struct {
	Model        string `json:"model"`
	SourceSHA256 string `json:"source_sha256"`
	PlanSHA256   string `json:"plan_sha256"`
	// PlanPrecision is the plan's precision label, computed from its
	// layers (plan.Label), whatever precision the build asked for.
	PlanPrecision  string           `json:"plan_precision"`
	NodesIn        int              `json:"nodes_in"`
	LayersOut      int              `json:"layers_out"`
	Fusions        map[string]int   `json:"fusions"`
	FoldedConsts   int              `json:"folded_constants"`
	Removed        int              `json:"removed_nodes"`
	PeakArenaBytes int64            `json:"peak_arena_bytes"`
	TotalFLOPs     int64            `json:"total_flops"`
	BuildMillis    int64            `json:"build_ms"`
	Layers         []LayerReport    `json:"layers"`
	Warnings       []string         `json:"warnings,omitempty"`
	Precision      *PrecisionReport `json:"precision,omitempty"`
	// Concats counts the Concats of the memory plan (at the profile's max
	// shapes) by what they run: nothing (their inputs are written in
	// place), a copy of some inputs, or of all; nil when the graph has none.
	Concats *ConcatReport `json:"concats,omitempty"`
	// GPU is a GPU plan's placement and, for a fast plan, its accuracy
	// against the exact plan (gpu.go); nil for a CPU plan.
	GPU *GPUReport `json:"gpu,omitempty"`
}

// ConcatReport counts a plan's Concats by what they run (exec.ConcatStats).
type ConcatReport struct {
	InPlace int `json:"in_place"`
	Partial int `json:"partial"`
	Copied  int `json:"copied"`
}

// LayerReport is one layer's row in the report.
type LayerReport struct {
	Name      string   `json:"name"`
	Kind      string   `json:"kind"`
	FusedFrom []string `json:"fused_from,omitempty"`
	Tactic    string   `json:"tactic"`
	Precision string   `json:"precision"`
	Output    string   `json:"output"`
	FLOPs     int64    `json:"flops"`
}
