package plan

import "fmt"

// Precision is the arithmetic a layer computes in, or the label of a whole
// plan. It is derived from the layers themselves (their kind), never from
// the options a build was asked for: a build asked for fp16 whose
// precision pass was disabled has fp32 layers and is labelled fp32.
type Precision string

// The precisions a layer can have, and Mixed for a plan holding both
// reduced precisions.
const (
	FP32  Precision = "fp32"
	FP16  Precision = "fp16"
	Int8  Precision = "int8"
	Mixed Precision = "mixed"
)

// fusedDomain is the domain of vouch's own layers (kernel/fused.Domain;
// not imported: plan depends on no kernel package).
const fusedDomain = "vouch"

// LayerPrecision is the precision a layer of this domain and kind computes
// in: the int8 wrapper Q8 is int8, the fp16-weight wrapper F16 is fp16,
// everything else float32 arithmetic.
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

// Label is a plan's precision label over its layers: fp32 when every layer
// is fp32, else the one reduced precision its layers use (int8 or fp16,
// with any fp32 fallbacks), or mixed when both occur.
func Label(layers []Layer) Precision {
	var i8, f16 bool
	for _, l := range layers {
		switch LayerPrecision(l.Domain, l.Kind) {
		case Int8:
			i8 = true
		case FP16:
			f16 = true
		}
	}
	switch {
	case i8 && f16:
		return Mixed
	case i8:
		return Int8
	case f16:
		return FP16
	}
	return FP32
}

// Precision is the plan's label (Label over its layers).
func (p *Plan) Precision() Precision { return Label(p.Header.Graph.Layers) }

// checkLabels verifies that the header's precision label and every layer's
// precision agree with what the layers are, so that a plan cannot claim a
// precision it does not compute in.
func checkLabels(h *Header) error {
	for _, l := range h.Graph.Layers {
		if want := LayerPrecision(l.Domain, l.Kind); l.Precision != "" && Precision(l.Precision) != want {
			return fmt.Errorf("%w: layer %q of kind %s claims precision %q; its kind computes in %s", ErrFormat, l.Name, l.Kind, l.Precision, want)
		}
	}
	if h.Precision != "" && h.Precision != Label(h.Graph.Layers) {
		return fmt.Errorf("%w: header claims precision %q; its layers are %s", ErrFormat, h.Precision, Label(h.Graph.Layers))
	}
	return nil
}
