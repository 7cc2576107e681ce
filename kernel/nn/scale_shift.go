package nn

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/tensor"
)

// OpScaleShift is the layer (domain vouch) that an inference
// BatchNormalization not folded into a convolution becomes (a DenseNet's
// pre-activation BatchNormalization + Relu), with the Relu that reads it
// when there is one: inputs X (float32, [N, C, ...]), A and B ([C], the
// BatchNormalization's per-channel a = scale / sqrt(var + eps) and
// b = B - float(mean*a), computed at build time exactly as the kernel
// computes them); y = float(x*A[c]) + B[c], the kernel's arithmetic, then,
// with attribute relu = 1, y = 0 where y < 0 (Relu's comparison: NaN and
// -0 pass through). One pass over memory instead of two layers.
const OpScaleShift = "ScaleShift"

// ScaleShiftOps returns the scale-shift layer's table (domain vouch).
func ScaleShiftOps() kernel.Table {
	return kernel.Table{OpScaleShift: {Run: runScaleShift, Infer: inferScaleShift, Into: intoScaleShift, InPlace: true}}
}

func runScaleShift(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if len(in) != 3 || in[0] == nil {
		return nil, fmt.Errorf("nn: %s needs X, A and B", OpScaleShift)
	}
	out := tensor.New(tensor.Float32, in[0].Shape...)
	if err := intoScaleShift(c, n, in, []*tensor.Tensor{out}); err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}

func intoScaleShift(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if len(in) != 3 || in[0] == nil || in[1] == nil || in[2] == nil || len(out) != 1 {
		return fmt.Errorf("nn: %s needs X, A and B and one output", OpScaleShift)
	}
	x, xok := in[0].Data.([]float32)
	a, aok := in[1].Data.([]float32)
	b, bok := in[2].Data.([]float32)
	y, yok := out[0].Data.([]float32)
	if !xok || !aok || !bok || !yok || len(in[0].Shape) < 2 {
		return fmt.Errorf("nn: %s needs float32 X of rank >= 2 and float32 A, B", OpScaleShift)
	}
	C := in[0].Shape[1]
	if len(a) != C || len(b) != C || len(y) != len(x) {
		return fmt.Errorf("nn: %s: X %v, A [%d], B [%d], output of %d: want A and B of %d", OpScaleShift, in[0].Shape, len(a), len(b), len(y), C)
	}
	S := prod(in[0].Shape[2:])
	relu := n.Int("relu", 0) != 0
	planes := len(x) / max(S, 1)
	if S == 0 {
		return nil
	}
	z := c.AVX512() && amd64.EnabledZ
	v := c.AVX2() && amd64.Enabled
	c.Workers().Run(planes, len(x), scaleShiftJob{x: x, y: y, a: a, b: b, C: C, S: S, relu: relu, z: z, v: v})
	return nil
}

type scaleShiftJob struct {
	x, y, a, b []float32
	C, S       int
	relu, z    bool // z: amd64.ScaleShiftZ for each plane's whole vectors
	v          bool // v: amd64.ScaleShift (AVX2) for what z leaves, 8 lanes at a time
}

// Run computes planes [lo, hi) (parallel.Task).
func (j scaleShiftJob) Run(lo, hi int) {
	r := 0
	if j.relu {
		r = 1
	}
	for p := lo; p < hi; p++ {
		ac, bc := j.a[p%j.C], j.b[p%j.C]
		row, yr := j.x[p*j.S:(p+1)*j.S], j.y[p*j.S:(p+1)*j.S]
		if n := len(row) &^ 15; j.z && n > 0 {
			amd64.ScaleShiftZ(&row[0], &yr[0], n, ac, bc, r)
			row, yr = row[n:], yr[n:]
		}
		if n := len(row) &^ 7; j.v && n > 0 {
			amd64.ScaleShift(&row[0], &yr[0], n, ac, bc, r)
			row, yr = row[n:], yr[n:]
		}
		if j.relu {
			for i, v := range row {
				v = float32(v*ac) + bc
				if v < 0 {
					v = 0
				}
				yr[i] = v
			}
			continue
		}
		for i, v := range row {
			yr[i] = float32(v*ac) + bc
		}
	}
}

func inferScaleShift(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) != 3 || !in[0].Present {
		return nil, fmt.Errorf("nn: %s needs X, A and B", OpScaleShift)
	}
	t := in[0].Type
	if t.DType != tensor.Undefined && t.DType != tensor.Float32 {
		return nil, fmt.Errorf("nn: %s needs float32 X, got %v", OpScaleShift, t.DType)
	}
	t.DType = tensor.Float32
	return []ir.Type{t}, nil
}

// ScaleShiftParams computes a BatchNormalization's per-channel a and b as
// its float32 kernel does (see batchNorm), for the compiler.
func ScaleShiftParams(scale, bias, mean, vr []float32, eps float32) (a, b []float32) {
	a, b = make([]float32, len(scale)), make([]float32, len(scale))
	for c := range a {
		a[c] = scale[c] / sqrtF(vr[c]+eps)
		b[c] = bias[c] - float32(mean[c]*a[c])
	}
	return a, b
}
