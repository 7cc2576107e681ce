package rnn

import (
	"fmt"
	"math"
	"strings"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
)

// floatMath is the arithmetic a cell of element type T uses: vmath's for
// float32 (float16 is computed in float32), math's for float64.
type floatMath[T kernel.Float] struct {
	fma     func(a, b, c T) T
	exp     func(T) T
	log     func(T) T
	tanh    func(T) T
	sigmoid func(T) T
}

var f32 = floatMath[float32]{
	fma: vmath.FMA32, exp: vmath.Exp32, log: vmath.Log32,
	tanh: vmath.Tanh32, sigmoid: vmath.Sigmoid32,
}

var f64 = floatMath[float64]{
	fma: math.FMA, exp: math.Exp, log: math.Log, tanh: math.Tanh,
	sigmoid: func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
}

// actSpec is one activation function named in the activations attribute,
// with the alpha and beta it consumed.
type actSpec struct {
	name        string // lower case
	alpha, beta float32
}

// actDefaults lists the activations ONNX defines for recurrent operators,
// whether each takes alpha and beta, and their defaults (ONNX Runtime's).
var actDefaults = map[string]struct {
	usesAlpha, usesBeta bool
	alpha, beta         float32
}{
	"sigmoid":         {},
	"tanh":            {},
	"relu":            {},
	"softsign":        {},
	"softplus":        {},
	"affine":          {true, true, 1, 0},
	"leakyrelu":       {true, false, 0.01, 0},
	"thresholdedrelu": {true, false, 1, 0},
	"scaledtanh":      {true, true, 1, 1},
	"hardsigmoid":     {true, true, 0.2, 0.5},
	"elu":             {true, false, 1, 0},
}

// parseActivations resolves the activations, activation_alpha and
// activation_beta attributes into per-direction lists of perDir functions.
// Alphas and betas are consumed in the order of the activations that take
// them. With no attribute, defs (repeated per direction) is used; a list of
// perDir names for a bidirectional node applies to both directions.
func parseActivations(names []string, alphas, betas []float32, defs []string, dirs int) ([]actSpec, error) {
	perDir := len(defs)
	if len(names) == 0 {
		for d := 0; d < dirs; d++ {
			names = append(names, defs...)
		}
		alphas, betas = nil, nil
	}
	if len(names) == perDir && dirs == 2 {
		names = append(append([]string{}, names...), names...)
	}
	if len(names) != perDir*dirs {
		return nil, fmt.Errorf("rnn: activations has %d entries, want %d (%d per direction)", len(names), perDir*dirs, perDir)
	}
	out := make([]actSpec, len(names))
	ai, bi := 0, 0
	for i, nm := range names {
		l := strings.ToLower(nm)
		def, ok := actDefaults[l]
		if !ok {
			return nil, fmt.Errorf("rnn: unknown activation %q", nm)
		}
		s := actSpec{name: l, alpha: def.alpha, beta: def.beta}
		if def.usesAlpha && ai < len(alphas) {
			s.alpha = alphas[ai]
			ai++
		}
		if def.usesBeta && bi < len(betas) {
			s.beta = betas[bi]
			bi++
		}
		out[i] = s
	}
	return out, nil
}

// activation returns the function s names, in T's arithmetic.
func activation[T kernel.Float](s actSpec, m floatMath[T]) func(T) T {
	a, b := T(s.alpha), T(s.beta)
	switch s.name {
	case "sigmoid":
		return m.sigmoid
	case "tanh":
		return m.tanh
	case "relu":
		return func(x T) T { return max(x, 0) }
	case "affine":
		return func(x T) T { return m.fma(a, x, b) }
	case "leakyrelu":
		return func(x T) T {
			if x >= 0 {
				return x
			}
			return a * x
		}
	case "thresholdedrelu":
		return func(x T) T {
			if x >= a { // the recurrent operators' definition (>=)
				return x
			}
			return 0
		}
	case "scaledtanh":
		return func(x T) T { return a * m.tanh(b*x) }
	case "hardsigmoid":
		return func(x T) T { return max(0, min(1, m.fma(a, x, b))) }
	case "elu":
		return func(x T) T {
			if x >= 0 {
				return x
			}
			return a * (m.exp(x) - 1)
		}
	case "softsign":
		return func(x T) T { return x / (1 + T(math.Abs(float64(x)))) }
	case "softplus":
		// log(1+exp(x)) = max(x,0) + log(1+exp(-|x|)), which never overflows.
		return func(x T) T {
			return max(x, 0) + m.log(1+m.exp(-T(math.Abs(float64(x)))))
		}
	}
	panic("rnn: activation " + s.name + " not handled") // parseActivations admits only the names above
}
