package plan

import "fmt"

// Precision is the arithmetic a layer computes in, or the label of a whole
// plan. It is derived from the layers themselves (their kind, and for a GPU
// plan their placement), never from the options a build was asked for: a
// build asked for fp16 whose precision pass was disabled has fp32 layers
// and is labelled fp32.
type Precision string

// The precisions a layer can have, and Mixed for a plan holding more than
// one reduced precision.
const (
	FP32  Precision = "fp32"
	FP16  Precision = "fp16"
	BF16  Precision = "bf16"
	Int8  Precision = "int8"
	Mixed Precision = "mixed"
)

// fusedDomain is the domain of vouch's own layers (kernel/fused.Domain;
// not imported: plan depends on no kernel package).
const fusedDomain = "vouch"

// LayerPrecision is the precision a layer of this domain and kind computes
// in on the CPU: the int8 wrapper Q8 is int8, the fp16-weight wrapper F16
// is fp16, everything else float32 arithmetic.
func LayerPrecision(domain, kind string) Precision {
	if domain == fusedDomain {
		switch kind {
		case "Q8":
			return Int8
		case "F16":
			return FP16
		}
	}
	return FP32
}

// labelSet gathers layer precisions into a plan label.
type labelSet struct {
	reduced Precision // the first reduced precision seen
	mixed   bool      // a second, different one was seen
}

func (s *labelSet) add(p Precision) {
	switch {
	case p == FP32:
	case s.reduced == "":
		s.reduced = p
	case s.reduced != p:
		s.mixed = true
	}
}

func (s *labelSet) label() Precision {
	switch {
	case s.mixed:
		return Mixed
	case s.reduced != "":
		return s.reduced
	}
	return FP32
}

// Label is a plan's precision label over its layers: fp32 when every layer
// is fp32, else the one reduced precision its layers use (with any fp32
// fallbacks), or mixed when two different ones occur.
func Label(layers []Layer) Precision {
	var s labelSet
	for _, l := range layers {
		s.add(LayerPrecision(l.Domain, l.Kind))
	}
	return s.label()
}

// GPULabel is a GPU plan's precision label over its layers and their
// placement (one Placement per layer, in order): a layer that runs a fast
// GPU kernel computes in its placement's precision, every other layer (an
// exact GPU kernel or a CPU layer) in what its kind says. It panics if the
// two lists differ in length (Decode and AddGPU check that first).
func GPULabel(layers []Layer, placement []Placement) Precision {
	if len(layers) != len(placement) {
		panic(fmt.Sprintf("plan: GPULabel over %d layers and %d placements", len(layers), len(placement)))
	}
	var s labelSet
	for i, l := range layers {
		if p := placement[i]; p.Fast() {
			s.add(p.Precision)
		} else {
			s.add(LayerPrecision(l.Domain, l.Kind))
		}
	}
	return s.label()
}

// Precision is the plan's label: GPULabel for a GPU plan, Label over the
// layers for a CPU plan.
func (p *Plan) Precision() Precision { return headerLabel(&p.Header) }

// headerLabel is the label a header's layers (and GPU placement, once
// checkGPU has matched it to the layers) compute in.
func headerLabel(h *Header) Precision {
	if h.GPU != nil && len(h.GPU.Layers) == len(h.Graph.Layers) {
		return GPULabel(h.Graph.Layers, h.GPU.Layers)
	}
	return Label(h.Graph.Layers)
}

// checkLabels verifies that every layer's precision agrees with what the
// layer is and, for a CPU plan, that the header's precision label does, so
// that a plan cannot claim a precision it does not compute in. A GPU
// plan's label is checked by checkGPU, once the placement is known to match
// the layers.
func checkLabels(h *Header) error {
	for _, l := range h.Graph.Layers {
		if want := LayerPrecision(l.Domain, l.Kind); l.Precision != "" && Precision(l.Precision) != want {
			return fmt.Errorf("%w: layer %q of kind %s claims precision %q; its kind computes in %s", ErrFormat, l.Name, l.Kind, l.Precision, want)
		}
	}
	if h.GPU != nil {
		return nil
	}
	if h.Precision != "" && h.Precision != Label(h.Graph.Layers) {
		return fmt.Errorf("%w: header claims precision %q; its layers are %s", ErrFormat, h.Precision, Label(h.Graph.Layers))
	}
	return nil
}
