package reduce

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

type smKind int

const (
	softmaxKind smKind = iota
	logSoftmaxKind
	hardmaxKind
)

// softmaxGeometry splits a shape into (outer, n, inner): the operator
// normalises over n elements spaced inner apart. Before opset 13 the input
// is coerced to 2-D at axis (default 1) and each row is normalised; from
// opset 13 only the one axis (default -1) is.
func softmaxGeometry(n *ir.Node, shape []int) (outer, size, inner int, err error) {
	rank := len(shape)
	if n.Version < 13 {
		axis := n.Int("axis", 1)
		// Coercion to 2-D accepts axis == rank (all dims in the outer part).
		a := axis
		if a < 0 {
			a += int64(rank)
		}
		if a < 0 || a > int64(rank) || (rank == 0 && axis != 0) {
			return 0, 0, 0, fmt.Errorf("reduce: %s axis %d out of range for rank %d", n.OpType, axis, rank)
		}
		return tensor.NumElems(shape[:a]), tensor.NumElems(shape[a:]), 1, nil
	}
	if rank == 0 {
		return 0, 0, 0, fmt.Errorf("reduce: %s needs an input of rank >= 1", n.OpType)
	}
	ax, err := kernel.NormAxis(n.Int("axis", -1), rank)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("reduce: %s: %w", n.OpType, err)
	}
	return tensor.NumElems(shape[:ax]), shape[ax], tensor.NumElems(shape[ax+1:]), nil
}

func inferSoftmax(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) == 0 || !in[0].Present {
		return nil, fmt.Errorf("reduce: %s needs an input", n.OpType)
	}
	t := in[0].Type
	if t.DType != tensor.Undefined && !t.DType.IsFloat() {
		return nil, fmt.Errorf("reduce: %s needs a float input, got %v", n.OpType, t.DType)
	}
	if t.RankKnown {
		shape := make([]int, len(t.Shape))
		if _, _, _, err := softmaxGeometry(n, shape); err != nil {
			return nil, err
		}
	}
	return []ir.Type{t}, nil
}

func runSoftmax(k smKind) kernel.RunFunc {
	return func(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		x := kernel.Input(in, 0)
		if x == nil {
			return nil, fmt.Errorf("reduce: %s needs an input", n.OpType)
		}
		outer, size, inner, err := softmaxGeometry(n, x.Shape)
		if err != nil {
			return nil, err
		}
		g := geom{outer, size, inner}
		out := tensor.New(x.DType, x.Shape...)
		switch d := x.Data.(type) {
		case []float32:
			softmaxFloat(c.Vec(), k, d, out.Data.([]float32), g, f32)
		case []float64:
			softmaxFloat(c.Vec(), k, d, out.Data.([]float64), g, f64)
		case []tensor.Half:
			xs, ys := make([]float32, len(d)), make([]float32, len(d))
			for i, v := range d {
				xs[i] = v.Float32()
			}
			softmaxFloat(c.Vec(), k, xs, ys, g, f32)
			o := out.Data.([]tensor.Half)
			for i, v := range ys {
				o[i] = tensor.ToHalf(v)
			}
		case []tensor.BHalf:
			xs, ys := make([]float32, len(d)), make([]float32, len(d))
			for i, v := range d {
				xs[i] = v.Float32()
			}
			softmaxFloat(c.Vec(), k, xs, ys, g, f32)
			o := out.Data.([]tensor.BHalf)
			for i, v := range ys {
				o[i] = tensor.ToBHalf(v)
			}
		default:
			return nil, fmt.Errorf("reduce: %s needs a float input, got %v", n.OpType, x.DType)
		}
		return []*tensor.Tensor{out}, nil
	}
}

type geom struct{ outer, size, inner int }

// softmaxLines32 normalises the float32 lines [o0, o1) of size elements
// (the last axis), four at a time from o0 while four remain, then one by
// one. softmaxPar's ranges start at multiples of four, so every line is
// computed in the group it has in one call over all lines.
func softmaxLines32(v vmath.Vec, k smKind, x, y []float32, size, o0, o1 int) {
	o := o0
	if k == softmaxKind {
		for ; o+4 <= o1; o += 4 {
			softmax4Lines32(v, x[o*size:(o+4)*size], y[o*size:(o+4)*size], size)
		}
	}
	for ; o < o1; o++ {
		softmaxLine32(v, k, x[o*size:(o+1)*size], y[o*size:(o+1)*size])
	}
}

// softmaxFloat normalises x into y over every line of g.size elements.
// float32 lines over the last axis take softmaxLine32 (the same bits).
func softmaxFloat[T kernel.Float](v vmath.Vec, k smKind, x, y []T, g geom, m floatMath[T]) {
	if x32, ok := any(x).([]float32); ok && g.inner == 1 && k != hardmaxKind {
		softmaxLines32(v, k, x32, any(y).([]float32), g.size, 0, g.outer)
		return
	}
	for o := 0; o < g.outer; o++ {
		for j := 0; j < g.inner; j++ {
			base := o*g.size*g.inner + j
			softmaxLine(k, x, y, base, g.size, g.inner, m)
		}
	}
}

// softmaxLine handles the size elements x[base], x[base+stride], ...
func softmaxLine[T kernel.Float](k smKind, x, y []T, base, size, stride int, m floatMath[T]) {
	if size == 0 {
		return
	}
	mx := x[base]
	arg := 0
	for i := 1; i < size; i++ {
		if v := x[base+i*stride]; v > mx || (v != v && mx == mx) {
			mx, arg = v, i
		}
	}
	if k == hardmaxKind {
		for i := 0; i < size; i++ {
			y[base+i*stride] = 0
		}
		y[base+arg*stride] = 1
		return
	}
	var sum T
	for i := 0; i < size; i++ {
		e := m.exp(x[base+i*stride] - mx)
		if k == softmaxKind {
			y[base+i*stride] = e
		}
		sum += e
	}
	if k == softmaxKind {
		for i := 0; i < size; i++ {
			y[base+i*stride] /= sum
		}
		return
	}
	ls := m.log(sum)
	for i := 0; i < size; i++ {
		y[base+i*stride] = (x[base+i*stride] - mx) - ls
	}
}

// softmax4Lines32 is softmaxLine32(softmaxKind, ...) on four lines of
// size elements at once (x and y hold them one after another): each
// line's operations, in its order, exactly as softmaxLine32 does them;
// only the four sequential sums run side by side, so that they overlap
// instead of each waiting on its own additions.
func softmax4Lines32(v vmath.Vec, x, y []float32, size int) {
	if size == 0 {
		return
	}
	x, y = x[:4*size], y[:4*size]
	for l := 0; l < 4; l++ {
		xl, yl := x[l*size:(l+1)*size], y[l*size:(l+1)*size]
		mx := v.MaxFirstNaN32(xl)
		for i, v := range xl {
			yl[i] = v - mx
		}
		v.Exp32s(yl, yl)
	}
	y0, y1, y2, y3 := y[:size], y[size:2*size], y[2*size:3*size], y[3*size:4*size]
	var s0, s1, s2, s3 float32
	for i := range y0 {
		s0 += y0[i]
		s1 += y1[i]
		s2 += y2[i]
		s3 += y3[i]
	}
	v.DivScalar32s(y0, y0, s0)
	v.DivScalar32s(y1, y1, s1)
	v.DivScalar32s(y2, y2, s2)
	v.DivScalar32s(y3, y3, s3)
}

// lineChunk is how many exponentials softmaxLine32 computes per call of
// vmath.Exp32s into its stack buffer (LogSoftmax, whose output may share
// x's storage and must not overwrite x before the last pass).
const lineChunk = 64

// softmaxLine32 is softmaxLine for float32 and stride 1, with vmath's slice
// functions. It performs the same operations in the same order: the same
// maximum (vmath.MaxFirstNaN32), e = Exp32(x - max) for every element, the
// sum accumulated sequentially in index order, then the same division or
// subtraction per element. y may be x.
func softmaxLine32(v vmath.Vec, k smKind, x, y []float32) {
	size := len(x)
	if size == 0 {
		return
	}
	y = y[:size]
	mx := v.MaxFirstNaN32(x)
	var sum float32
	if k == softmaxKind {
		for i, v := range x {
			y[i] = v - mx
		}
		v.Exp32s(y, y)
		for _, e := range y {
			sum += e
		}
		v.DivScalar32s(y, y, sum)
		return
	}
	var buf [lineChunk]float32
	for c := 0; c < size; c += lineChunk {
		b := buf[:min(lineChunk, size-c)]
		for i := range b {
			b[i] = x[c+i] - mx
		}
		v.Exp32s(b, b)
		for _, e := range b {
			sum += e
		}
	}
	ls := vmath.Log32(sum)
	for i := range y {
		y[i] = (x[i] - mx) - ls
	}
}
