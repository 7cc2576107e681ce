// Package elementwise implements ONNX's elementwise operators: unary math
// and activations, broadcasting binary arithmetic, comparisons, logic and
// bit operations, Cast, Clip, Where and the variadic Sum/Mean/Max/Min.
//
// Broadcasting is planned once per call (see plan): dimensions are merged
// so that the kernels run plain loops over rows in which each input is
// either contiguous or a repeated scalar. float16 and bfloat16 are computed
// in float32 and rounded once per result. float32 exp, log, tanh, sigmoid
// and erf come from vmath; the trigonometric and hyperbolic functions and
// Pow are computed in float64 with package math and rounded once.
package elementwise

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Ops returns the operators of this package.
func Ops() kernel.Table {
	t := unaryOps()
	bcast := inferBroadcast(tensor.Undefined)
	toBool := inferBroadcast(tensor.Bool)
	for _, op := range []string{"Add", "Sub", "Mul", "Div"} {
		t[op] = &kernel.Op{Run: arith(op), Infer: bcast}
	}
	t["Mod"] = &kernel.Op{Run: runMod, Infer: bcast}
	t["Pow"] = &kernel.Op{Run: runPow, Infer: bcast}
	t["BitShift"] = &kernel.Op{Run: runBitShift, Infer: bcast}
	t["PRelu"] = &kernel.Op{Run: runPRelu, Infer: kernel.InferSame(0)}
	for _, op := range []string{"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"} {
		t[op] = &kernel.Op{Run: compare(op), Infer: toBool}
	}
	for _, op := range []string{"And", "Or", "Xor"} {
		t[op] = &kernel.Op{Run: logic(op), Infer: toBool}
	}
	t["Where"] = &kernel.Op{Run: runWhere, Infer: inferWhere}
	for _, op := range []string{"Sum", "Mean", "Max", "Min"} {
		t[op] = &kernel.Op{Run: variadic(op), Infer: bcast}
	}
	t["Clip"] = &kernel.Op{Run: runClip, Infer: kernel.InferSame(0)}
	t["Cast"] = &kernel.Op{Run: runCast, Infer: inferCast}
	t["CastLike"] = &kernel.Op{Run: runCastLike, Infer: inferCastLike}
	addInto(t)
	return t
}

// inferBroadcast is the shape function of a broadcasting operator whose
// output has element type dt (Undefined: input 0's type).
func inferBroadcast(dt tensor.DType) kernel.InferFunc {
	return func(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
		if len(in) == 0 || !in[0].Present {
			return nil, fmt.Errorf("elementwise: %s: missing input 0", n.OpType)
		}
		if isLegacy(n) {
			t := in[0].Type
			if dt != tensor.Undefined {
				t.DType = dt
			}
			return []ir.Type{t}, nil
		}
		t, err := kernel.InferBroadcast(dt, in)
		if err != nil {
			return nil, fmt.Errorf("elementwise: %s: %w", n.OpType, err)
		}
		return []ir.Type{t}, nil
	}
}

func inferWhere(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) < 3 || !in[1].Present {
		return nil, fmt.Errorf("elementwise: Where needs 3 inputs, got %d", len(in))
	}
	return inferBroadcast(in[1].Type.DType)(n, in)
}
