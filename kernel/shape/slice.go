package shape

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Slice (opset 1: starts/ends/axes attributes; 10+: inputs, with steps).

type sliceSpec struct {
	starts, ends, axes, steps []int64
	axesGiven                 bool
}

// sliceRange resolves one axis: the clamped start, the step and the count.
func sliceRange(start, end, step int64, dim int) (int, int, int, error) {
	if step == 0 {
		return 0, 0, 0, fmt.Errorf("step is zero")
	}
	d := int64(dim)
	if start < 0 {
		start += d
	}
	if end < 0 {
		end += d
	}
	var cnt int64
	if step > 0 {
		start = min(max(start, 0), d)
		end = min(max(end, 0), d)
		if end > start {
			cnt = (end - start + step - 1) / step
		}
	} else {
		start = min(max(start, 0), d-1)
		end = min(max(end, -1), d-1)
		if start > end {
			cnt = (start - end + (-step) - 1) / (-step)
		}
	}
	return int(start), int(step), int(cnt), nil
}

func (s *sliceSpec) check(rank int) ([]int, error) {
	if len(s.starts) != len(s.ends) {
		return nil, fmt.Errorf("starts %v and ends %v differ in length", s.starts, s.ends)
	}
	if !s.axesGiven {
		s.axes = make([]int64, len(s.starts))
		for i := range s.axes {
			s.axes[i] = int64(i)
		}
	}
	if len(s.axes) != len(s.starts) {
		return nil, fmt.Errorf("axes %v and starts %v differ in length", s.axes, s.starts)
	}
	if s.steps == nil {
		s.steps = make([]int64, len(s.starts))
		for i := range s.steps {
			s.steps[i] = 1
		}
	}
	if len(s.steps) != len(s.starts) {
		return nil, fmt.Errorf("steps %v and starts %v differ in length", s.steps, s.starts)
	}
	return normAxes(s.axes, rank)
}

func sliceSpecOf(n *ir.Node, in []*tensor.Tensor) (*sliceSpec, error) {
	s := &sliceSpec{}
	if n.Version < 10 {
		s.starts, s.ends = n.Ints("starts", nil), n.Ints("ends", nil)
		s.axes, s.axesGiven = n.Ints("axes", nil), n.Has("axes")
		return s, nil
	}
	names := []string{"starts", "ends", "axes", "steps"}
	var vals [4][]int64
	for i := 1; i <= 4; i++ {
		t := kernel.Input(in, i)
		if t == nil {
			if i <= 2 {
				return nil, fmt.Errorf("missing input %d (%s)", i, names[i-1])
			}
			continue
		}
		if t.Rank() != 1 {
			return nil, fmt.Errorf("%s must be rank 1, got shape %v", names[i-1], t.Shape)
		}
		v, err := intsOf(t, names[i-1])
		if err != nil {
			return nil, err
		}
		vals[i-1] = v
	}
	s.starts, s.ends, s.axes, s.steps = vals[0], vals[1], vals[2], vals[3]
	s.axesGiven = kernel.Input(in, 3) != nil
	return s, nil
}

func runSlice(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	s, err := sliceSpecOf(n, in)
	if err != nil {
		return nil, err
	}
	axes, err := s.check(x.Rank())
	if err != nil {
		return nil, err
	}
	r := x.Rank()
	begin := make([]int, r)
	step := make([]int, r)
	out := append([]int{}, x.Shape...)
	for d := range step {
		step[d] = 1
	}
	for i, a := range axes {
		b, st, c, err := sliceRange(s.starts[i], s.ends[i], s.steps[i], x.Shape[a])
		if err != nil {
			return nil, err
		}
		begin[a], step[a], out[a] = b, st, c
	}
	xs := tensor.Strides(x.Shape)
	st := make([]int, r)
	base := 0
	for d := range st {
		st[d] = step[d] * xs[d]
		base += begin[d] * xs[d]
	}
	if tensor.NumElems(out) == 0 {
		base = 0
	}
	return oneOut(stridedView(x, out, st, base))
}

func inferSlice(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "data")
	if err != nil {
		return nil, err
	}
	if !x.RankKnown {
		return []ir.Type{x}, nil
	}
	r := len(x.Shape)
	s := &sliceSpec{}
	if n.Version < 10 {
		s.starts, s.ends = n.Ints("starts", nil), n.Ints("ends", nil)
		s.axes, s.axesGiven = n.Ints("axes", nil), n.Has("axes")
	} else {
		var ok [4]bool
		var vals [4][]int64
		for i := 1; i <= 4; i++ {
			if !present(in, i) {
				ok[i-1] = i > 2
				continue
			}
			vals[i-1], ok[i-1] = constInts(in, i)
		}
		s.starts, s.ends, s.axes, s.steps = vals[0], vals[1], vals[2], vals[3]
		s.axesGiven = present(in, 3)
		if !ok[2] {
			return []ir.Type{unknownDims(x.DType, r)}, nil
		}
		if !ok[0] || !ok[1] || !ok[3] {
			// Axes known: only those dimensions are unknown.
			out := copyDims(x.Shape)
			axes := s.axes
			if !s.axesGiven {
				l, lok := known1DLen(inAt(in, 1))
				if !lok {
					return []ir.Type{unknownDims(x.DType, r)}, nil
				}
				axes = make([]int64, l)
				for i := range axes {
					axes[i] = int64(i)
				}
			}
			ax, err := normAxes(axes, r)
			if err != nil {
				return nil, err
			}
			for _, a := range ax {
				out[a] = ir.Unknown
			}
			return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
		}
	}
	axes, err := s.check(r)
	if err != nil {
		return nil, err
	}
	out := copyDims(x.Shape)
	for i, a := range axes {
		if !x.Shape[a].Known() {
			out[a] = ir.Unknown
			continue
		}
		_, _, c, err := sliceRange(s.starts[i], s.ends[i], s.steps[i], int(x.Shape[a].Value))
		if err != nil {
			return nil, err
		}
		out[a] = ir.Fixed(c)
	}
	return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
}

// Pad (opset 2: pads and value attributes; 11+: inputs; 18+: axes input;
// 19+: wrap mode). Negative pads crop first; the padding modes then read
// the cropped tensor.

type padSpec struct {
	begin, end []int // per dimension
	mode       string
	fill       *tensor.Tensor
}

func padSpecOf(n *ir.Node, in []*tensor.Tensor, x *tensor.Tensor) (*padSpec, error) {
	r := x.Rank()
	p := &padSpec{mode: n.String("mode", "constant"), begin: make([]int, r), end: make([]int, r)}
	switch p.mode {
	case "constant", "reflect", "edge", "wrap":
	default:
		return nil, fmt.Errorf("unknown mode %q", p.mode)
	}
	var pads []int64
	axes := make([]int, r)
	for i := range axes {
		axes[i] = i
	}
	if n.Version < 11 {
		pads = n.Ints("pads", n.Ints("paddings", nil))
		if x.DType != tensor.String {
			p.fill = tensor.FromFloat64s(x.DType, nil, []float64{float64(n.Float("value", 0))})
		}
	} else {
		t, err := checkIn(in, 1, "pads")
		if err != nil {
			return nil, err
		}
		if pads, err = intsOf(t, "pads"); err != nil {
			return nil, err
		}
		if c := kernel.Input(in, 2); c != nil {
			if c.DType != x.DType || c.Len() != 1 {
				return nil, fmt.Errorf("constant_value must be one %v, got %v", x.DType, c)
			}
			p.fill = c
		}
		if a := kernel.Input(in, 3); a != nil {
			av, err := intsOf(a, "axes")
			if err != nil {
				return nil, err
			}
			if axes, err = normAxes(av, r); err != nil {
				return nil, err
			}
		}
	}
	if len(pads) != 2*len(axes) {
		return nil, fmt.Errorf("pads %v has %d entries, want %d", pads, len(pads), 2*len(axes))
	}
	for _, v := range pads {
		if v > maxElems || v < -maxElems {
			return nil, fmt.Errorf("pad %d out of range", v)
		}
	}
	for i, a := range axes {
		p.begin[a], p.end[a] = int(pads[i]), int(pads[i+len(axes)])
	}
	return p, nil
}

// padSource maps an output coordinate to a source coordinate of a dimension
// of size dim (or -1 for the fill value).
func padSource(mode string, i, dim int) int {
	if i >= 0 && i < dim {
		return i
	}
	switch mode {
	case "edge":
		return min(max(i, 0), dim-1)
	case "wrap":
		return ((i % dim) + dim) % dim
	case "reflect":
		if dim == 1 {
			return 0
		}
		per := 2 * (dim - 1)
		m := ((i % per) + per) % per
		if m >= dim {
			m = per - m
		}
		return m
	}
	return -1
}

func runPad(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	p, err := padSpecOf(n, in, x)
	if err != nil {
		return nil, err
	}
	r := x.Rank()
	lo := make([]int, r)
	cdim := make([]int, r)
	pb := make([]int, r)
	out := make([]int, r)
	for d := 0; d < r; d++ {
		lo[d] = max(0, -p.begin[d])
		cdim[d] = x.Shape[d] - lo[d] - max(0, -p.end[d])
		if cdim[d] < 0 {
			return nil, fmt.Errorf("pads %d/%d crop more than dimension %d's size %d", p.begin[d], p.end[d], d, x.Shape[d])
		}
		pb[d] = max(p.begin[d], 0)
		out[d] = cdim[d] + pb[d] + max(p.end[d], 0)
		if cdim[d] == 0 && out[d] > 0 && p.mode != "constant" {
			return nil, fmt.Errorf("cannot %s-pad dimension %d of size 0", p.mode, d)
		}
	}
	if err := checkShape(out); err != nil {
		return nil, err
	}
	xs := tensor.Strides(x.Shape)
	idx := make([]int, tensor.NumElems(out))
	forEachIndex(out, func(flat int, ix []int) {
		off := 0
		for d, v := range ix {
			s := padSource(p.mode, v-pb[d], cdim[d])
			if s < 0 {
				off = -1
				break
			}
			off += (lo[d] + s) * xs[d]
		}
		idx[flat] = off
	})
	return oneOut(gather(x, idx, out, p.fill))
}

func inferPad(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "data")
	if err != nil {
		return nil, err
	}
	if !x.RankKnown {
		return []ir.Type{x}, nil
	}
	r := len(x.Shape)
	var pads []int64
	axes := make([]int, r)
	for i := range axes {
		axes[i] = i
	}
	if n.Version < 11 {
		pads = n.Ints("pads", n.Ints("paddings", nil))
	} else {
		var ok bool
		if pads, ok = constInts(in, 1); !ok {
			return []ir.Type{unknownDims(x.DType, r)}, nil
		}
		if present(in, 3) {
			av, ok := constInts(in, 3)
			if !ok {
				return []ir.Type{unknownDims(x.DType, r)}, nil
			}
			if axes, err = normAxes(av, r); err != nil {
				return nil, err
			}
		}
	}
	if len(pads) != 2*len(axes) {
		return nil, fmt.Errorf("pads %v has %d entries, want %d", pads, len(pads), 2*len(axes))
	}
	out := copyDims(x.Shape)
	for i, a := range axes {
		add := pads[i] + pads[i+len(axes)]
		switch d := x.Shape[a]; {
		case d.Known():
			out[a] = ir.Dim{Value: d.Value + add}
			if out[a].Value < 0 {
				return nil, fmt.Errorf("pads %v make dimension %d negative", pads, a)
			}
		case add != 0:
			out[a] = ir.Unknown
		}
	}
	return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
}

// CenterCropPad (opset 18): crop or zero-pad each axis around its centre.

func runCenterCropPad(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "input_data")
	if err != nil {
		return nil, err
	}
	st, err := checkIn(in, 1, "shape")
	if err != nil {
		return nil, err
	}
	shp, err := intsOf(st, "shape")
	if err != nil {
		return nil, err
	}
	axes, err := cropAxes(n, x.Rank(), len(shp))
	if err != nil {
		return nil, err
	}
	out := append([]int{}, x.Shape...)
	shift := make([]int, x.Rank()) // source coordinate = output + shift
	for i, a := range axes {
		s := int(shp[i])
		if s < 0 {
			return nil, fmt.Errorf("negative size in shape %v", shp)
		}
		if s < x.Shape[a] {
			shift[a] = (x.Shape[a] - s) / 2
		} else {
			shift[a] = -((s - x.Shape[a]) / 2)
		}
		out[a] = s
	}
	if err := checkShape(out); err != nil {
		return nil, err
	}
	xs := tensor.Strides(x.Shape)
	idx := make([]int, tensor.NumElems(out))
	forEachIndex(out, func(flat int, ix []int) {
		off := 0
		for d, v := range ix {
			s := v + shift[d]
			if s < 0 || s >= x.Shape[d] {
				off = -1
				break
			}
			off += s * xs[d]
		}
		idx[flat] = off
	})
	return oneOut(gather(x, idx, out, nil))
}

func cropAxes(n *ir.Node, rank, l int) ([]int, error) {
	if !n.Has("axes") {
		if l != rank {
			return nil, fmt.Errorf("shape has %d entries for rank %d", l, rank)
		}
		ax := make([]int, rank)
		for i := range ax {
			ax[i] = i
		}
		return ax, nil
	}
	ax, err := normAxes(n.Ints("axes", nil), rank)
	if err != nil {
		return nil, err
	}
	if len(ax) != l {
		return nil, fmt.Errorf("shape has %d entries for %d axes", l, len(ax))
	}
	return ax, nil
}

func inferCenterCropPad(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "input_data")
	if err != nil {
		return nil, err
	}
	if !x.RankKnown {
		return []ir.Type{x}, nil
	}
	out := copyDims(x.Shape)
	shp, ok := constInts(in, 1)
	if !ok {
		if n.Has("axes") {
			ax, err := normAxes(n.Ints("axes", nil), len(out))
			if err != nil {
				return nil, err
			}
			for _, a := range ax {
				out[a] = ir.Unknown
			}
			return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
		}
		return []ir.Type{unknownDims(x.DType, len(out))}, nil
	}
	axes, err := cropAxes(n, len(out), len(shp))
	if err != nil {
		return nil, err
	}
	for i, a := range axes {
		out[a] = ir.Dim{Value: shp[i]}
	}
	return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
}

// Compress.

func runCompress(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "input")
	if err != nil {
		return nil, err
	}
	c, err := checkIn(in, 1, "condition")
	if err != nil {
		return nil, err
	}
	if c.Rank() != 1 {
		return nil, fmt.Errorf("condition must be rank 1, got shape %v", c.Shape)
	}
	cond, err := c.Int64s()
	if err != nil {
		return nil, fmt.Errorf("condition: %w", err)
	}
	shape := x.Shape
	axis := 0
	if n.Has("axis") {
		if axis, err = kernel.NormAxis(n.Int("axis", 0), x.Rank()); err != nil {
			return nil, err
		}
	} else {
		shape = []int{x.Len()}
	}
	dim := shape[axis]
	var keep []int
	for i, v := range cond {
		if v != 0 {
			if i >= dim {
				return nil, fmt.Errorf("condition selects index %d, the axis has %d entries", i, dim)
			}
			keep = append(keep, i)
		}
	}
	out := append([]int{}, shape...)
	out[axis] = len(keep)
	outer := tensor.NumElems(shape[:axis])
	inner := tensor.NumElems(shape[axis+1:])
	idx := make([]int, 0, tensor.NumElems(out))
	for o := 0; o < outer; o++ {
		for _, k := range keep {
			base := (o*dim + k) * inner
			for j := 0; j < inner; j++ {
				idx = append(idx, base+j)
			}
		}
	}
	return oneOut(gather(x, idx, out, nil))
}

func inferCompress(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "input")
	if err != nil {
		return nil, err
	}
	if !n.Has("axis") {
		return []ir.Type{unknownDims(x.DType, 1)}, nil
	}
	if !x.RankKnown {
		return []ir.Type{x}, nil
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), len(x.Shape))
	if err != nil {
		return nil, err
	}
	out := copyDims(x.Shape)
	out[axis] = ir.Unknown
	return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
}

// ReverseSequence.

func runReverseSequence(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "input")
	if err != nil {
		return nil, err
	}
	sl, err := checkIn(in, 1, "sequence_lens")
	if err != nil {
		return nil, err
	}
	if x.Rank() < 2 {
		return nil, fmt.Errorf("input must have rank >= 2, got shape %v", x.Shape)
	}
	ta, ba := int(n.Int("time_axis", 0)), int(n.Int("batch_axis", 1))
	if ta < 0 || ta > 1 || ba < 0 || ba > 1 || ta == ba {
		return nil, fmt.Errorf("time_axis %d and batch_axis %d must be 0 and 1 in some order", ta, ba)
	}
	lens, err := intsOf(sl, "sequence_lens")
	if err != nil {
		return nil, err
	}
	if sl.Rank() != 1 || len(lens) != x.Shape[ba] {
		return nil, fmt.Errorf("sequence_lens must have shape [%d], got %v", x.Shape[ba], sl.Shape)
	}
	for _, l := range lens {
		if l < 0 || l > int64(x.Shape[ta]) {
			return nil, fmt.Errorf("sequence length %d out of range [0, %d]", l, x.Shape[ta])
		}
	}
	xs := tensor.Strides(x.Shape)
	idx := make([]int, x.Len())
	forEachIndex(x.Shape, func(flat int, ix []int) {
		t := ix[ta]
		if l := int(lens[ix[ba]]); t < l {
			t = l - 1 - t
		}
		idx[flat] = flat + (t-ix[ta])*xs[ta]
	})
	return oneOut(gather(x, idx, x.Shape, nil))
}

// Trilu.

func runTrilu(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "input")
	if err != nil {
		return nil, err
	}
	if x.Rank() < 2 {
		return nil, fmt.Errorf("input must have rank >= 2, got shape %v", x.Shape)
	}
	k := int64(0)
	if t := kernel.Input(in, 1); t != nil {
		if k, err = scalarInt(t, "k"); err != nil {
			return nil, err
		}
	}
	upper := n.Int("upper", 1) != 0
	r, c := x.Shape[x.Rank()-2], x.Shape[x.Rank()-1]
	idx := make([]int, x.Len())
	for i := range idx {
		row, col := int64((i/c)%r), int64(i%c)
		keep := col-row >= k
		if !upper {
			keep = col-row <= k
		}
		if keep {
			idx[i] = i
		} else {
			idx[i] = -1
		}
	}
	return oneOut(gather(x, idx, x.Shape, nil))
}
