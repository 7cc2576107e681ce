package elementwise

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// floatFns is one unary operator's element functions for float32 and
// float64 (float16 and bfloat16 go through float32). Products that feed an
// addition are wrapped in an explicit conversion, which the Go spec
// guarantees is rounded on its own: the compiler may not fuse it into an
// FMA on some platforms and not on others.
//
// vec32, when set, computes f32 over a whole slice (dst[i] = f32(src[i]),
// the same bits: vmath's vector twins); the float32 paths use it instead
// of a loop over f32.
type floatFns struct {
	f32   func(float32) float32
	f64   func(float64) float64
	vec32 func(v vmath.Vec, dst, src []float32)
}

// unaryOp builds a unary operator from a constructor of its float
// functions (called once per Run with the node, for attributes) and, for
// operators that also take integers, an integer kernel.
func unaryOp(op string, mk func(n *ir.Node) (floatFns, error), ints func(n *ir.Node, t *tensor.Tensor) (any, bool)) kernel.RunFunc {
	return func(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(op, in, 1); err != nil {
			return nil, err
		}
		x := in[0]
		if x.DType.IsInt() {
			if ints != nil {
				if d, ok := ints(n, x); ok {
					return []*tensor.Tensor{wrap(x.DType, x.Shape, d)}, nil
				}
			}
			return nil, fmt.Errorf("elementwise: %s does not support %v", op, x.DType)
		}
		fns, err := mk(n)
		if err != nil {
			return nil, fmt.Errorf("elementwise: %s: %w", op, err)
		}
		dt := x.DType
		w := widen(x)
		var data any
		switch v := w.Data.(type) {
		case []float32:
			out := make([]float32, len(v))
			apply32(c.Vec(), fns, out, v)
			data = out
		case []float64:
			out := make([]float64, len(v))
			f := fns.f64
			for i, e := range v {
				out[i] = f(e)
			}
			data = out
		default:
			return nil, fmt.Errorf("elementwise: %s does not support %v", op, dt)
		}
		return []*tensor.Tensor{narrow(wrap(w.DType, x.Shape, data), dt)}, nil
	}
}

// plain wraps attribute-free functions.
func plain(f32 func(float32) float32, f64 func(float64) float64) func(*ir.Node) (floatFns, error) {
	return func(*ir.Node) (floatFns, error) { return floatFns{f32: f32, f64: f64}, nil }
}

// vectorised is plain with a slice form of f32 (see floatFns.vec32).
func vectorised(f32 func(float32) float32, f64 func(float64) float64, vec32 func(v vmath.Vec, dst, src []float32)) func(*ir.Node) (floatFns, error) {
	return func(*ir.Node) (floatFns, error) { return floatFns{f32, f64, vec32}, nil }
}

// apply32 sets d[i] = fns.f32(x[i]) for every i of x, through the slice
// form (at v's instruction set) where fns has one.
func apply32(v vmath.Vec, fns floatFns, d, x []float32) {
	if fns.vec32 != nil {
		fns.vec32(v, d, x)
		return
	}
	f := fns.f32
	d = d[:len(x)]
	for i, v := range x {
		d[i] = f(v)
	}
}

// via64 computes a float32 function in float64 and rounds once. It is used
// for the trigonometric and hyperbolic functions that vmath does not have;
// they are not on any fast path.
func via64(f func(float64) float64) func(float32) float32 {
	return func(x float32) float32 { return float32(f(float64(x))) }
}

// mapInts applies f to every element of an integer slice of type T.
func mapInts[T kernel.Integer](x []T, f func(T) T) []T {
	out := make([]T, len(x))
	for i, v := range x {
		out[i] = f(v)
	}
	return out
}

// intsOf returns an integer kernel built from a generic element function
// instantiated per type; signedOnly refuses unsigned types.
func intsOf(signedOnly bool, f8 func(int8) int8, f16 func(int16) int16, f32 func(int32) int32, f64 func(int64) int64,
	u8 func(uint8) uint8, u16 func(uint16) uint16, u32 func(uint32) uint32, u64 func(uint64) uint64) func(*ir.Node, *tensor.Tensor) (any, bool) {
	return func(_ *ir.Node, t *tensor.Tensor) (any, bool) {
		switch x := t.Data.(type) {
		case []int8:
			return mapInts(x, f8), true
		case []int16:
			return mapInts(x, f16), true
		case []int32:
			return mapInts(x, f32), true
		case []int64:
			return mapInts(x, f64), true
		}
		if signedOnly {
			return nil, false
		}
		switch x := t.Data.(type) {
		case []uint8:
			return mapInts(x, u8), true
		case []uint16:
			return mapInts(x, u16), true
		case []uint32:
			return mapInts(x, u32), true
		case []uint64:
			return mapInts(x, u64), true
		}
		return nil, false
	}
}

func absN[T kernel.Integer](v T) T {
	if v < 0 {
		return -v
	}
	return v
}

func negN[T kernel.Integer](v T) T { return -v }

func signN[T kernel.Integer](v T) T {
	one := T(1)
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -one
	}
	return 0
}

func reluN[T kernel.Integer](v T) T { return max(v, 0) }

var (
	absInts  = intsOf(false, absN[int8], absN[int16], absN[int32], absN[int64], absN[uint8], absN[uint16], absN[uint32], absN[uint64])
	negInts  = intsOf(true, negN[int8], negN[int16], negN[int32], negN[int64], nil, nil, nil, nil)
	signInts = intsOf(false, signN[int8], signN[int16], signN[int32], signN[int64], signN[uint8], signN[uint16], signN[uint32], signN[uint64])
	reluInts = intsOf(true, reluN[int8], reluN[int16], reluN[int32], reluN[int64], nil, nil, nil, nil)
)

// shrinkInts computes Shrink on integers through float64 (exact for every
// value the attributes can meaningfully separate).
func shrinkInts(n *ir.Node, t *tensor.Tensor) (any, bool) {
	lambd, bias := float64(n.Float("lambd", 0.5)), float64(n.Float("bias", 0))
	vals, err := t.Float64s()
	if err != nil {
		return nil, false
	}
	for i, v := range vals {
		vals[i] = shrink64(v, lambd, bias)
	}
	return tensor.FromFloat64s(t.DType, t.Shape, vals).Data, true
}

func shrink64(x, lambd, bias float64) float64 {
	switch {
	case x < -lambd:
		return x + bias
	case x > lambd:
		return x - bias
	}
	return 0
}

func sign64(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return x // ±0 and NaN
}

func sign32(x float32) float32 { return float32(sign64(float64(x))) }

// softplus32 is log(1+exp(x)), arranged so that exp never overflows.
func softplus32(x float32) float32 {
	if x > 0 {
		return x + vmath.Log32(1+vmath.Exp32(-x))
	}
	return vmath.Log32(1 + vmath.Exp32(x))
}

func softplus64(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}

// unaryOps returns the unary operators' table entries.
func unaryOps() kernel.Table {
	same := kernel.InferSame(0)
	t := kernel.Table{}
	add := func(op string, mk func(*ir.Node) (floatFns, error), ints func(*ir.Node, *tensor.Tensor) (any, bool)) {
		run := unaryOp(op, mk, ints)
		t[op] = &kernel.Op{Run: run, Infer: same}
		if staticUnary[op] {
			t[op].Into, t[op].InPlace = unaryInto(op, mk, run), true
		}
	}
	add("Abs", plain(func(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }, math.Abs), absInts)
	add("Neg", plain(func(x float32) float32 { return -x }, func(x float64) float64 { return -x }), negInts)
	add("Sign", plain(sign32, sign64), signInts)
	add("Ceil", plain(via64(math.Ceil), math.Ceil), nil)
	add("Floor", plain(via64(math.Floor), math.Floor), nil)
	add("Round", plain(vmath.RoundEven32, math.RoundToEven), nil)
	// sqrt in float64 rounded to float32 is the correctly rounded float32
	// sqrt (53 >= 2*24+2 bits), on every platform.
	add("Sqrt", plain(via64(math.Sqrt), math.Sqrt), nil)
	add("Reciprocal", plain(func(x float32) float32 { return 1 / x }, func(x float64) float64 { return 1 / x }), nil)
	add("Exp", vectorised(vmath.Exp32, math.Exp, vmath.Vec.Exp32s), nil)
	add("Log", plain(vmath.Log32, math.Log), nil)
	add("Tanh", vectorised(vmath.Tanh32, math.Tanh, vmath.Vec.Tanh32s), nil)
	add("Sigmoid", vectorised(vmath.Sigmoid32, func(x float64) float64 {
		if x >= 0 {
			return 1 / (1 + math.Exp(-x))
		}
		e := math.Exp(x)
		return e / (1 + e)
	}, vmath.Vec.Sigmoid32s), nil)
	add("Erf", vectorised(vmath.Erf32, math.Erf, vmath.Vec.Erf32s), nil)
	// Trigonometric and hyperbolic float32 functions: computed in float64
	// with package math and rounded once (vmath has none; not a fast path).
	for op, f := range map[string]func(float64) float64{
		"Sin": math.Sin, "Cos": math.Cos, "Tan": math.Tan,
		"Asin": math.Asin, "Acos": math.Acos, "Atan": math.Atan,
		"Sinh": math.Sinh, "Cosh": math.Cosh,
		"Asinh": math.Asinh, "Acosh": math.Acosh, "Atanh": math.Atanh,
	} {
		add(op, plain(via64(f), f), nil)
	}
	add("Softsign", plain(func(x float32) float32 { return x / (1 + float32(math.Abs(float64(x)))) },
		func(x float64) float64 { return x / (1 + math.Abs(x)) }), nil)
	add("Softplus", plain(softplus32, softplus64), nil)
	add("Mish", plain(func(x float32) float32 { return x * vmath.Tanh32(softplus32(x)) },
		func(x float64) float64 { return x * math.Tanh(softplus64(x)) }), nil)
	add("Relu", plain(func(x float32) float32 { return relu32(x) }, func(x float64) float64 {
		if x < 0 {
			return 0
		}
		return x
	}), reluInts)
	t["Relu"].Run = runRelu(t["Relu"].Run)
	add("LeakyRelu", func(n *ir.Node) (floatFns, error) {
		a := n.Float("alpha", 0.01)
		return floatFns{
			func(x float32) float32 {
				if x < 0 {
					return a * x
				}
				return x
			},
			func(x float64) float64 {
				if x < 0 {
					return float64(a) * x
				}
				return x
			}, nil}, nil
	}, nil)
	add("ThresholdedRelu", func(n *ir.Node) (floatFns, error) {
		a := n.Float("alpha", 1)
		return floatFns{
			func(x float32) float32 {
				if x > a {
					return x
				}
				return 0
			},
			func(x float64) float64 {
				if x > float64(a) {
					return x
				}
				return 0
			}, nil}, nil
	}, nil)
	add("Elu", func(n *ir.Node) (floatFns, error) {
		a := n.Float("alpha", 1)
		return floatFns{
			func(x float32) float32 {
				if x < 0 {
					return a * (vmath.Exp32(x) - 1)
				}
				return x
			},
			func(x float64) float64 {
				if x < 0 {
					return float64(a) * math.Expm1(x)
				}
				return x
			}, nil}, nil
	}, nil)
	add("Celu", func(n *ir.Node) (floatFns, error) {
		a := n.Float("alpha", 1)
		if a == 0 {
			return floatFns{}, fmt.Errorf("alpha must not be 0")
		}
		return floatFns{
			func(x float32) float32 {
				if x < 0 {
					return a * (vmath.Exp32(x/a) - 1)
				}
				return x
			},
			func(x float64) float64 {
				if x < 0 {
					return float64(a) * math.Expm1(x/float64(a))
				}
				return x
			}, nil}, nil
	}, nil)
	add("Selu", func(n *ir.Node) (floatFns, error) {
		a := n.Float("alpha", 1.67326319217681884765625)
		g := n.Float("gamma", 1.05070102214813232421875)
		return floatFns{
			func(x float32) float32 {
				if x <= 0 {
					return g * (float32(a*vmath.Exp32(x)) - a)
				}
				return g * x
			},
			func(x float64) float64 {
				if x <= 0 {
					return float64(g) * (float64(float64(a)*math.Exp(x)) - float64(a))
				}
				return float64(g) * x
			}, nil}, nil
	}, nil)
	add("HardSigmoid", func(n *ir.Node) (floatFns, error) {
		a, b := n.Float("alpha", 0.2), n.Float("beta", 0.5)
		return floatFns{
			func(x float32) float32 { return max(0, min(1, float32(a*x)+b)) },
			func(x float64) float64 { return max(0, min(1, float64(float64(a)*x)+float64(b))) }, nil}, nil
	}, nil)
	add("HardSwish", vectorised(hardSwish32,
		func(x float64) float64 { return x * max(0, min(1, float64(x*(1.0/6))+0.5)) }, hardSwishVec), nil)
	add("Shrink", func(n *ir.Node) (floatFns, error) {
		l, b := n.Float("lambd", 0.5), n.Float("bias", 0)
		return floatFns{
			func(x float32) float32 {
				switch {
				case x < -l:
					return x + b
				case x > l:
					return x - b
				}
				return 0
			},
			func(x float64) float64 { return shrink64(x, float64(l), float64(b)) }, nil}, nil
	}, shrinkInts)
	add("Gelu", func(n *ir.Node) (floatFns, error) {
		switch approx := n.String("approximate", "none"); approx {
		case "none":
			// float32: (0.5*x) * (1 + Erf32(x*float32(1/√2))).
			return floatFns{
				vmath.GeluErf32,
				func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) },
				vmath.Vec.GeluErf32s}, nil
		case "tanh":
			const c = 0.7978845608028654 // sqrt(2/pi)
			// float32: in = float32(c) * (x + float32(float32(0.044715)*x*x*x)),
			// (0.5*x) * (1 + Tanh32(in)).
			return floatFns{
				vmath.GeluTanh32,
				func(x float64) float64 {
					in := c * (x + float64(0.044715*x*x*x))
					return 0.5 * x * (1 + math.Tanh(in))
				},
				vmath.Vec.GeluTanh32s}, nil
		default:
			return floatFns{}, fmt.Errorf("approximate must be \"none\" or \"tanh\", got %q", approx)
		}
	}, nil)
	t["IsNaN"] = &kernel.Op{Run: runIsNaN, Infer: inferAs(tensor.Bool)}
	t["IsInf"] = &kernel.Op{Run: runIsInf, Infer: inferAs(tensor.Bool)}
	t["Not"] = &kernel.Op{Run: runNot, Infer: same}
	return t
}

func relu32(x float32) float32 {
	if x < 0 {
		return 0
	}
	return x
}

// runRelu is Relu with a float32 fast path: a plain loop, no call per element.
func runRelu(general kernel.RunFunc) kernel.RunFunc {
	return func(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if len(in) == 1 && in[0] != nil {
			if x, ok := in[0].Data.([]float32); ok {
				out := make([]float32, len(x))
				for i, v := range x {
					if v < 0 {
						v = 0
					}
					out[i] = v
				}
				return []*tensor.Tensor{wrap(tensor.Float32, in[0].Shape, out)}, nil
			}
		}
		return general(c, n, in)
	}
}

func floatsOf(op string, t *tensor.Tensor) ([]float64, error) {
	if !t.DType.IsFloat() {
		return nil, fmt.Errorf("elementwise: %s needs a float input, got %v", op, t.DType)
	}
	return t.Float64s()
}

func runIsNaN(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need("IsNaN", in, 1); err != nil {
		return nil, err
	}
	v, err := floatsOf("IsNaN", in[0])
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(v))
	for i, x := range v {
		out[i] = x != x
	}
	return []*tensor.Tensor{wrap(tensor.Bool, in[0].Shape, out)}, nil
}

func runIsInf(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need("IsInf", in, 1); err != nil {
		return nil, err
	}
	v, err := floatsOf("IsInf", in[0])
	if err != nil {
		return nil, err
	}
	neg, pos := n.Int("detect_negative", 1) != 0, n.Int("detect_positive", 1) != 0
	out := make([]bool, len(v))
	for i, x := range v {
		out[i] = (pos && math.IsInf(x, 1)) || (neg && math.IsInf(x, -1))
	}
	return []*tensor.Tensor{wrap(tensor.Bool, in[0].Shape, out)}, nil
}

// inferAs is a shape function: input 0's shape with element type dt.
func inferAs(dt tensor.DType) kernel.InferFunc {
	return func(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
		if len(in) == 0 || !in[0].Present {
			return nil, fmt.Errorf("elementwise: %s: missing input 0", n.OpType)
		}
		t := in[0].Type
		t.DType = dt
		return []ir.Type{t}, nil
	}
}
