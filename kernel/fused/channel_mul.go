package fused

import (
	"fmt"
	"sync"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/tensor"
)

// ChannelMul is a Mul of a float32 tensor x of shape [N, C, d...] by an
// operand s of shape [N, C, 1...] (one scale per image and channel: the
// last step of a squeeze-excitation block), as one layer that scales each
// channel plane in one pass (amd64.ScaleZ on AVX-512, amd64.ScaleY on
// AVX2), instead of elementwise's broadcasting rows. Each output is the
// Mul's float32 product, its operands in the model's order, so the bits
// are the Mul's.
//
// Layout of a "vouch" ChannelMul node:
//
//	inputs:  x, s            (always in this order)
//	attrs:   scale_first int  1 when s was the Mul's first operand
const ChannelMul = "ChannelMul"

// AttrScaleFirst is ChannelMul's operand-order attribute.
const AttrScaleFirst = "scale_first"

type cmulOp struct{}

func (cmulOp) infer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) != 2 || !in[0].Present || !in[1].Present {
		return nil, fmt.Errorf("fused: ChannelMul %s: want 2 inputs", n.Name)
	}
	return []ir.Type{in[0].Type}, nil
}

func (o cmulOp) run(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if len(in) != 2 || in[0] == nil {
		return nil, fmt.Errorf("fused: ChannelMul %s: want 2 inputs", n.Name)
	}
	out := tensor.New(in[0].DType, in[0].Shape...)
	if err := o.into(c, n, in, []*tensor.Tensor{out}); err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}

func (cmulOp) into(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if len(in) != 2 || in[0] == nil || in[1] == nil || len(out) == 0 || out[0] == nil {
		return fmt.Errorf("fused: ChannelMul %s: want 2 inputs and an output", n.Name)
	}
	x, s, y := in[0], in[1], out[0]
	xd, ok1 := x.Data.([]float32)
	sd, ok2 := s.Data.([]float32)
	yd, ok3 := y.Data.([]float32)
	if !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("fused: ChannelMul %s: float32 only, got %v and %v", n.Name, x.DType, s.DType)
	}
	if !channelOperand(x.Shape, s.Shape) || len(yd) != len(xd) || len(sd) != x.Shape[0]*x.Shape[1] {
		return fmt.Errorf("fused: ChannelMul %s: x %v, scale %v, output of %d elements", n.Name, x.Shape, s.Shape, len(yd))
	}
	planes := len(sd)
	if planes == 0 || len(xd) == 0 {
		return nil
	}
	if len(xd) == planes {
		// x has s's shape: elementwise's Mul of two arrays, in order.
		if n.Int(AttrScaleFirst, 0) == 1 {
			mulRow(yd, sd, xd)
		} else {
			mulRow(yd, xd, sd)
		}
		return nil
	}
	j := cmulJobs.Get().(*cmulJob)
	*j = cmulJob{x: xd, s: sd, y: yd, plane: len(xd) / planes, sFirst: n.Int(AttrScaleFirst, 0) == 1,
		z: c.AVX512() && amd64.EnabledZ, avx2: c.AVX2() && amd64.Enabled}
	c.Workers().Run(planes, len(xd), j)
	*j = cmulJob{}
	cmulJobs.Put(j)
	return nil
}

// channelOperand reports whether s is [N, C, 1...] for x of shape [N, C,
// d...] (rank 3 or more).
func channelOperand(x, s []int) bool {
	if len(x) < 3 || len(s) != len(x) || s[0] != x[0] || s[1] != x[1] {
		return false
	}
	for _, d := range s[2:] {
		if d != 1 {
			return false
		}
	}
	return true
}

// ChannelOperand reports whether a Mul of operands of shapes x and s (x
// the larger) is a ChannelMul.
func ChannelOperand(x, s []int) bool { return channelOperand(x, s) }

// cmulJob is one call: units channel planes.
type cmulJob struct {
	x, s, y []float32
	plane   int
	sFirst  bool
	z, avx2 bool // AVX-512 (amd64.ScaleZ), AVX2 (amd64.ScaleY)
}

var cmulJobs = sync.Pool{New: func() any { return new(cmulJob) }}

func (j *cmulJob) Run(lo, hi int) {
	for p := lo; p < hi; p++ {
		x, y := j.x[p*j.plane:(p+1)*j.plane], j.y[p*j.plane:(p+1)*j.plane]
		switch {
		case j.z:
			amd64.ScaleZ(&x[0], &y[0], len(x), j.s[p])
		case j.avx2:
			amd64.ScaleY(&x[0], &y[0], len(x), j.s[p])
		case j.sFirst:
			scaleRowSX(y, x, j.s[p])
		default:
			scaleRowXS(y, x, j.s[p])
		}
	}
}

// scaleRowXS and scaleRowSX are elementwise's Mul loops for an operand
// that broadcasts (d[i] = a[i] * s, and d[i] = s * b[i]): the compiled
// product's first operand decides which NaN two NaNs give (in both, the
// array's element: amd64.ScaleZ and ScaleY do the same). Not inlined, so
// that they keep that shape (TestChannelMul).
//
//go:noinline
func scaleRowXS(d, a []float32, s float32) {
	a = a[:len(d)]
	for i := range d {
		d[i] = a[i] * s
	}
}

//go:noinline
func scaleRowSX(d, b []float32, s float32) {
	b = b[:len(d)]
	for i := range d {
		d[i] = s * b[i]
	}
}
