// Package sequence implements ONNX's sequence operators over sequence
// values (tensor.Sequence: a *tensor.Tensor whose Data is []*tensor.Tensor).
//
// A sequence value is immutable once built: outputs share their element
// tensors with the inputs they came from (SequenceInsert, SequenceErase,
// SequenceAt) and never modify them. The ir.Type of a sequence does not
// carry its element type, so shape inference returns an undefined type of
// unknown rank for tensors taken out of a sequence.
package sequence

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{
		"SequenceConstruct":  {Run: runConstruct, Infer: inferConstruct},
		"SequenceEmpty":      {Run: runEmpty, Infer: inferEmpty},
		"SequenceInsert":     {Run: runInsert, Infer: inferInsert},
		"SequenceAt":         {Run: runAt, Infer: inferAt},
		"SequenceErase":      {Run: runErase, Infer: inferErase},
		"SequenceLength":     {Run: runLength, Infer: inferLength},
		"SplitToSequence":    {Run: runSplitToSequence, Infer: inferSplitToSequence},
		"ConcatFromSequence": {Run: runConcatFromSequence, Infer: inferConcatFromSequence},
	}
}

var seqType = ir.Type{DType: tensor.Sequence}

// seqIn returns input i as a sequence's elements, or an error when it is
// absent or a tensor.
func seqIn(in []*tensor.Tensor, i int, what string) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, i)
	if x == nil {
		return nil, fmt.Errorf("missing input %d (%s)", i, what)
	}
	if x.DType != tensor.Sequence {
		return nil, fmt.Errorf("input %d (%s) must be a sequence, got a %v tensor", i, what, x.DType)
	}
	elems, ok := x.Data.([]*tensor.Tensor)
	if !ok {
		return nil, fmt.Errorf("input %d (%s) is a sequence holding %T, want []*tensor.Tensor", i, what, x.Data)
	}
	for j, e := range elems {
		if e == nil {
			return nil, fmt.Errorf("input %d (%s): element %d is nil", i, what, j)
		}
	}
	return elems, nil
}

// tensorIn returns input i as a tensor, or an error when it is absent or a
// sequence.
func tensorIn(in []*tensor.Tensor, i int, what string) (*tensor.Tensor, error) {
	x := kernel.Input(in, i)
	if x == nil {
		return nil, fmt.Errorf("missing input %d (%s)", i, what)
	}
	if x.DType == tensor.Sequence {
		return nil, fmt.Errorf("input %d (%s) must be a tensor, got a sequence", i, what)
	}
	return x, nil
}

// position reads an optional int32/int64 scalar position input; ok is false
// when it is absent.
func position(in []*tensor.Tensor, i int) (pos int64, ok bool, err error) {
	x := kernel.Input(in, i)
	if x == nil {
		return 0, false, nil
	}
	if x.DType != tensor.Int32 && x.DType != tensor.Int64 {
		return 0, false, fmt.Errorf("position must be int32 or int64, got %v", x.DType)
	}
	if x.Len() != 1 || x.Rank() > 1 {
		return 0, false, fmt.Errorf("position must be a scalar, got shape %v", x.Shape)
	}
	v, err := x.Int64s()
	if err != nil {
		return 0, false, err
	}
	return v[0], true, nil
}

// normPos maps pos in [-n, hi] (hi is n-1 or n) into [0, hi].
func normPos(pos int64, n, hi int) (int, error) {
	p := pos
	if p < 0 {
		p += int64(n)
	}
	if p < 0 || p > int64(hi) {
		return 0, fmt.Errorf("position %d out of range [%d, %d] for a sequence of length %d", pos, -n, hi, n)
	}
	return int(p), nil
}

func checkDType(elems []*tensor.Tensor, t *tensor.Tensor) error {
	if t.DType == tensor.Sequence {
		return fmt.Errorf("a sequence cannot hold a sequence")
	}
	if len(elems) > 0 && elems[0].DType != t.DType {
		return fmt.Errorf("tensor is %v, sequence elements are %v", t.DType, elems[0].DType)
	}
	return nil
}

func one(t *tensor.Tensor) ([]*tensor.Tensor, error) { return []*tensor.Tensor{t}, nil }

// SequenceConstruct.

func runConstruct(_ *kernel.Ctx, _ *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("SequenceConstruct needs at least one input")
	}
	elems := make([]*tensor.Tensor, 0, len(in))
	for i := range in {
		x, err := tensorIn(in, i, "inputs")
		if err != nil {
			return nil, err
		}
		if len(elems) > 0 && x.DType != elems[0].DType {
			return nil, fmt.Errorf("input %d is %v, input 0 is %v", i, x.DType, elems[0].DType)
		}
		elems = append(elems, x)
	}
	return one(tensor.NewSequence(elems))
}

func inferConstruct(_ *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("SequenceConstruct needs at least one input")
	}
	dt := tensor.Undefined
	for i, x := range in {
		if !x.Present {
			return nil, fmt.Errorf("missing input %d", i)
		}
		if x.Type.DType == tensor.Sequence {
			return nil, fmt.Errorf("input %d must be a tensor, got a sequence", i)
		}
		if x.Type.DType == tensor.Undefined {
			continue
		}
		if dt != tensor.Undefined && x.Type.DType != dt {
			return nil, fmt.Errorf("input %d is %v, an earlier input is %v", i, x.Type.DType, dt)
		}
		dt = x.Type.DType
	}
	return []ir.Type{seqType}, nil
}

// SequenceEmpty.

func emptyDType(n *ir.Node) (tensor.DType, error) {
	dt := tensor.DType(n.Int("dtype", int64(tensor.Float32)))
	if !dt.Supported() {
		return 0, fmt.Errorf("unsupported dtype %v", dt)
	}
	return dt, nil
}

func runEmpty(_ *kernel.Ctx, n *ir.Node, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if _, err := emptyDType(n); err != nil {
		return nil, err
	}
	return one(tensor.NewSequence([]*tensor.Tensor{}))
}

func inferEmpty(n *ir.Node, _ []ir.InferInput) ([]ir.Type, error) {
	if _, err := emptyDType(n); err != nil {
		return nil, err
	}
	return []ir.Type{seqType}, nil
}

// SequenceInsert.

func runInsert(_ *kernel.Ctx, _ *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	elems, err := seqIn(in, 0, "input_sequence")
	if err != nil {
		return nil, err
	}
	t, err := tensorIn(in, 1, "tensor")
	if err != nil {
		return nil, err
	}
	if err := checkDType(elems, t); err != nil {
		return nil, err
	}
	at := len(elems)
	pos, ok, err := position(in, 2)
	if err != nil {
		return nil, err
	}
	if ok {
		if at, err = normPos(pos, len(elems), len(elems)); err != nil {
			return nil, err
		}
	}
	out := make([]*tensor.Tensor, 0, len(elems)+1)
	out = append(out, elems[:at]...)
	out = append(out, t)
	out = append(out, elems[at:]...)
	return one(tensor.NewSequence(out))
}

func inferInsert(_ *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := inferSeqIn(in, 0); err != nil {
		return nil, err
	}
	if len(in) < 2 || !in[1].Present {
		return nil, fmt.Errorf("missing input 1 (tensor)")
	}
	if in[1].Type.DType == tensor.Sequence {
		return nil, fmt.Errorf("input 1 (tensor) must be a tensor, got a sequence")
	}
	if err := inferPosIn(in, 2); err != nil {
		return nil, err
	}
	return []ir.Type{seqType}, nil
}

// inferSeqIn checks that input i is present and not known to be a tensor.
func inferSeqIn(in []ir.InferInput, i int) error {
	if i >= len(in) || !in[i].Present {
		return fmt.Errorf("missing input %d (sequence)", i)
	}
	if dt := in[i].Type.DType; dt != tensor.Sequence && dt != tensor.Undefined {
		return fmt.Errorf("input %d must be a sequence, got a %v tensor", i, dt)
	}
	return nil
}

// inferPosIn checks an optional position input's type.
func inferPosIn(in []ir.InferInput, i int) error {
	if i >= len(in) || !in[i].Present {
		return nil
	}
	t := in[i].Type
	if t.DType != tensor.Int32 && t.DType != tensor.Int64 && t.DType != tensor.Undefined {
		return fmt.Errorf("position must be int32 or int64, got %v", t.DType)
	}
	if t.RankKnown && len(t.Shape) > 1 {
		return fmt.Errorf("position must be a scalar, got rank %d", len(t.Shape))
	}
	return nil
}

// SequenceAt.

func runAt(_ *kernel.Ctx, _ *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	elems, err := seqIn(in, 0, "input_sequence")
	if err != nil {
		return nil, err
	}
	pos, ok, err := position(in, 1)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("missing input 1 (position)")
	}
	at, err := normPos(pos, len(elems), len(elems)-1)
	if err != nil {
		return nil, err
	}
	return one(elems[at])
}

func inferAt(_ *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := inferSeqIn(in, 0); err != nil {
		return nil, err
	}
	if len(in) < 2 || !in[1].Present {
		return nil, fmt.Errorf("missing input 1 (position)")
	}
	if err := inferPosIn(in, 1); err != nil {
		return nil, err
	}
	return []ir.Type{{}}, nil
}

// SequenceErase.

func runErase(_ *kernel.Ctx, _ *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	elems, err := seqIn(in, 0, "input_sequence")
	if err != nil {
		return nil, err
	}
	pos, ok, err := position(in, 1)
	if err != nil {
		return nil, err
	}
	if !ok {
		pos = -1
	}
	at, err := normPos(pos, len(elems), len(elems)-1)
	if err != nil {
		return nil, err
	}
	out := make([]*tensor.Tensor, 0, len(elems)-1)
	out = append(out, elems[:at]...)
	out = append(out, elems[at+1:]...)
	return one(tensor.NewSequence(out))
}

func inferErase(_ *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := inferSeqIn(in, 0); err != nil {
		return nil, err
	}
	if err := inferPosIn(in, 1); err != nil {
		return nil, err
	}
	return []ir.Type{seqType}, nil
}

// SequenceLength.

func runLength(_ *kernel.Ctx, _ *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	elems, err := seqIn(in, 0, "input_sequence")
	if err != nil {
		return nil, err
	}
	return one(tensor.Scalar(int64(len(elems))))
}

func inferLength(_ *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := inferSeqIn(in, 0); err != nil {
		return nil, err
	}
	return []ir.Type{ir.StaticType(tensor.Int64, nil)}, nil
}
