package q8

import (
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// actFn is an activation the epilogue applies in place to each run of
// outputs it has just written (in cache), after the dequantization, the
// bias, the residual and the Relu: the float32 values of the unfused
// Elementwise part, element by element, so its bits.
type actFn func(v vmath.Vec, y []float32)

// SiLU: s = vmath.Sigmoid32(x), then the Mul's product in the model's
// operand order (x·s, or s·x with act_sigmoid_first, which decides only
// which NaN a NaN gives), as the Fused layer's SiLU epilogue computes it:
// amd64.SiLUZ 16 lanes at a time on AVX-512, else the Ctx's Vec Sigmoid
// and the product (TestQ8SiLU compares with the Sigmoid and Mul nodes).

func siluXSZ(_ vmath.Vec, y []float32) { siluZ(y, false) }
func siluSXZ(_ vmath.Vec, y []float32) { siluZ(y, true) }
func siluXS(v vmath.Vec, y []float32)  { siluVec(v, y, false) }
func siluSX(v vmath.Vec, y []float32)  { siluVec(v, y, true) }

func siluZ(y []float32, sigFirst bool) {
	if len(y) > 0 {
		amd64.SiLUZ(&y[0], &y[0], len(y), &amd64.SiLUTab, sigFirst)
	}
}

// siluVec is the Fused layer's SiLU on the levels below AVX-512, in place.
func siluVec(v vmath.Vec, y []float32, sigFirst bool) { fused.SiLUVec(v, y, y, sigFirst) }

// siluAct returns the SiLU activation for c's instruction set.
func siluAct(c *kernel.Ctx, sigFirst bool) actFn {
	switch {
	case c.AVX512() && amd64.EnabledZ && sigFirst:
		return siluSXZ
	case c.AVX512() && amd64.EnabledZ:
		return siluXSZ
	case sigFirst:
		return siluSX
	}
	return siluXS
}

// actor is the epilogue's activation: fn (SiLU, HardSwish), or Clip's
// bounds (ReLU6): v < lo gives lo, then v > hi gives hi, NaN passes, as
// package elementwise's Clip (an absent bound is ∓Inf, which changes no
// value). The zero actor does nothing.
type actor struct {
	fn     actFn
	clip   bool
	lo, hi float32
	// q, for a chained layer (chain.go), stores each run's u8 form after
	// the activation.
	q *qsink
}

func (a actor) on() bool { return a.fn != nil || a.clip || a.q != nil }

// apply runs a on y (then, chained, stores y's u8 form).
func (a actor) apply(c twins, y []float32) {
	a.activate(c, y)
	if a.q != nil {
		a.q.store(c, y)
	}
}

func (a actor) activate(c twins, y []float32) {
	switch {
	case a.fn != nil:
		a.fn(c.vec, y)
	case a.clip:
		i := 0
		if c.vnni && len(y) >= 16 {
			i = len(y) &^ 15
			clipInPlace(&y[0], i, a.lo, a.hi)
		}
		for k, v := range y[i:] {
			if v < a.lo {
				v = a.lo
			}
			if v > a.hi {
				v = a.hi
			}
			y[i+k] = v
		}
	}
}

// clipActor reads a Clip part's bounds as Clip's Into does (attributes
// before opset 11, optional float32 scalar inputs since); ok is false
// where they are not such constants.
func clipActor(n *ir.Node, in []*tensor.Tensor) (actor, bool) {
	a := actor{clip: true, lo: float32(math.Inf(-1)), hi: float32(math.Inf(1))}
	if n.Version > 0 && n.Version < 11 {
		a.lo, a.hi = n.Float("min", a.lo), n.Float("max", a.hi)
		return a, len(in) == 0
	}
	if len(in) > 2 {
		return actor{}, false
	}
	for i, t := range in {
		if t == nil {
			continue
		}
		v, ok := t.Data.([]float32)
		if !ok || len(v) != 1 {
			return actor{}, false
		}
		if i == 0 {
			a.lo = v[0]
		} else {
			a.hi = v[0]
		}
	}
	return a, true
}

// ActHardSwish is the Q8 activation x·HardSigmoid(x) (MobileNetV3's
// HardSwish as PyTorch exports it: HardSigmoid, then Mul): attributes
// act_alpha and act_beta are the HardSigmoid's, act_version its opset
// version, act_sigmoid_first (fused.AttrSigmoidFirst) is 1 when its output
// was the Mul's first operand. The epilogue computes per element h =
// max(0, min(1, float32(alpha·x)+beta)) (Go's min and max, as package
// elementwise's HardSigmoid; amd64.HardSigmoidZ 16 lanes at a time where
// the Ctx allows AVX-512, amd64.HardSwishY 8 at a time, product included,
// where it allows AVX2) and the Mul's product in the model's order: the
// two nodes' bits (TestQ8HardSwish).
const ActHardSwish = "HardSwish"

// hardSwish is one layer's HardSwish parameters.
type hardSwish struct {
	a, b  float32
	first bool // h·x (else x·h)
	z     bool // AVX-512 (amd64.HardSigmoidZ)
}

func (h *hardSwish) apply(v vmath.Vec, y []float32) {
	if h.z || v.Portable() || !amd64.Enabled {
		h.run(y)
		return
	}
	// AVX2 (the Vec of an AVX2 Ctx is not the portable one): HardSwishY
	// leaves each group of 8 holding a NaN to the portable loop.
	for len(y) > 0 {
		k := amd64.HardSwishY(&y[0], &y[0], len(y), h.a, h.b)
		y = y[k:]
		if m := min(8, len(y)); m > 0 {
			h.run(y[:m])
			y = y[m:]
		}
	}
}

// run is apply through HardSigmoidZ and mulInPlace (h.z) or the portable
// loops.
func (h *hardSwish) run(y []float32) {
	var buf [64]float32 // small: the direct tiles pass runs of at most 16 values
	for i := 0; i < len(y); i += len(buf) {
		x := y[i:min(i+len(buf), len(y))]
		s := buf[:len(x)]
		j := 0
		if h.z {
			for m := (len(x) - j) &^ 15; m > 0; m = (len(x) - j) &^ 15 {
				k := amd64.HardSigmoidZ(&x[j], &s[j], m, h.a, h.b)
				j += k
				if k < m { // a group with a NaN: Go's min and max
					hardSigmoid(s[j:j+16], x[j:j+16], h.a, h.b)
					j += 16
				}
			}
		}
		hardSigmoid(s[j:], x[j:], h.a, h.b)
		k := 0
		if h.z && len(x) >= 16 {
			// h is a NaN only where x is, with x's payload (quieted): the
			// product's bits do not depend on the operand order.
			k = len(x) &^ 15
			mulInPlace(&x[0], &s[0], k)
		}
		x, s = x[k:], s[k:]
		if h.first {
			for k, xv := range x {
				x[k] = s[k] * xv
			}
		} else {
			for k, xv := range x {
				x[k] = xv * s[k]
			}
		}
	}
}

func hardSigmoid(d, x []float32, a, b float32) {
	d = d[:len(x)]
	for i, v := range x {
		d[i] = max(0, min(1, float32(a*v)+b))
	}
}

// hardSwishNode is the HardSwish part as its unfused nodes, one
// Elementwise layer (the Run path's, and the bits the epilogue keeps).
func hardSwishNode(name string, version int64, a, b float32, first bool) *ir.Node {
	x, s, y := name+"/x", name+"/hardsigmoid", name+"/act"
	mulIn := []string{x, s}
	if first {
		mulIn = []string{s, x}
	}
	body := &ir.Graph{Name: name + "/hardswish", Inputs: []*ir.Value{{Name: x}}, Outputs: []*ir.Value{{Name: y}},
		Nodes: []*ir.Node{
			{Name: s, OpType: "HardSigmoid", Version: version, Inputs: []string{x}, Outputs: []string{s}, Attrs: map[string]*ir.Attr{
				"alpha": {Name: "alpha", Kind: ir.AttrFloat, F: a}, "beta": {Name: "beta", Kind: ir.AttrFloat, F: b}}},
			{Name: y, OpType: "Mul", Version: 14, Inputs: mulIn, Outputs: []string{y}, Attrs: map[string]*ir.Attr{}},
		},
		Initializers: map[string]*tensor.Tensor{}, Types: map[string]ir.Type{}}
	return &ir.Node{Name: name + "/act", OpType: "Elementwise", Domain: fused.Domain, Version: 1, Inputs: []string{x}, Outputs: []string{y},
		Attrs: map[string]*ir.Attr{"body": {Name: "body", Kind: ir.AttrGraph, G: body}}}
}
