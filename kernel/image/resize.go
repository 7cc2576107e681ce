package image

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// resizeAttrs are Resize's (and Upsample's) attributes, normalised across
// opset versions.
type resizeAttrs struct {
	mode        string // nearest, linear, cubic
	ctm         string // coordinate_transformation_mode
	nearestMode string // round_prefer_floor, round_prefer_ceil, floor, ceil, simple
	cubicA      float64
	exclude     bool
	extrap      float64
	antialias   bool
	axes        []int64 // nil: every axis
	policy      string  // keep_aspect_ratio_policy
}

// readResizeAttrs reads the attributes of Resize (any opset) or Upsample.
// Resize-10 and Upsample predate coordinate_transformation_mode; they map
// coordinates asymmetrically (x_original = x_resized / scale) and pick the
// nearest pixel in ONNX Runtime's "simple" way (floor when upsampling, ceil
// when downsampling).
func readResizeAttrs(n *ir.Node) (resizeAttrs, error) {
	a := resizeAttrs{
		mode:        n.String("mode", "nearest"),
		ctm:         n.String("coordinate_transformation_mode", "half_pixel"),
		nearestMode: n.String("nearest_mode", "round_prefer_floor"),
		cubicA:      float64(n.Float("cubic_coeff_a", -0.75)),
		exclude:     n.Int("exclude_outside", 0) != 0,
		extrap:      float64(n.Float("extrapolation_value", 0)),
		antialias:   n.Int("antialias", 0) != 0,
		axes:        n.Ints("axes", nil),
		policy:      n.String("keep_aspect_ratio_policy", "stretch"),
	}
	legacy := n.OpType == "Upsample" || (n.Version > 0 && n.Version < 11)
	if legacy {
		a.ctm, a.nearestMode = "asymmetric", "simple"
		if a.mode == "bilinear" { // Upsample-7 spelling
			a.mode = "linear"
		}
		if a.mode != "nearest" && a.mode != "linear" {
			return a, fmt.Errorf("mode %q is not supported before opset 11 (nearest or linear)", a.mode)
		}
	}
	switch a.mode {
	case "nearest", "linear", "cubic":
	default:
		return a, fmt.Errorf("unknown mode %q (want nearest, linear or cubic)", a.mode)
	}
	switch a.ctm {
	case "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize":
	default:
		return a, fmt.Errorf("unknown coordinate_transformation_mode %q", a.ctm)
	}
	switch a.nearestMode {
	case "round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple":
	default:
		return a, fmt.Errorf("unknown nearest_mode %q", a.nearestMode)
	}
	switch a.policy {
	case "stretch", "not_larger", "not_smaller":
	default:
		return a, fmt.Errorf("unknown keep_aspect_ratio_policy %q", a.policy)
	}
	return a, nil
}

// resizeInputs returns the roi, scales and sizes inputs of a node (nil
// where absent or empty), whatever its op and version.
func resizeInputs[T any](n *ir.Node, in []T, present func(T) bool) (roi, scales, sizes T) {
	get := func(i int) T {
		var zero T
		if i >= 0 && i < len(in) && present(in[i]) {
			return in[i]
		}
		return zero
	}
	if n.OpType == "Upsample" || (n.Version > 0 && n.Version < 11) {
		return get(-1), get(1), get(-1)
	}
	return get(1), get(2), get(3)
}

// geometry is what Resize computes from its inputs before touching data:
// per axis the output length, the scale and the ROI.
type geometry struct {
	out      []int
	scale    []float64
	roiStart []float64
	roiEnd   []float64
	fromSize []bool // the axis' scale was derived from sizes
}

// resizeGeometry derives the output shape and per-axis scales. scalesV and
// sizesV are nil when absent (Upsample-7's scales attribute arrives as
// scalesV). Output lengths from scales are floor(scale * input length);
// keep_aspect_ratio_policy rounds scale * input length half up.
func resizeGeometry(n *ir.Node, a resizeAttrs, inShape []int, roiV, scalesV []float64, sizesV []int64) (*geometry, error) {
	r := len(inShape)
	axes := make([]int, r)
	for i := range axes {
		axes[i] = i
	}
	if a.axes != nil {
		axes = axes[:0]
		seen := map[int]bool{}
		for _, ax := range a.axes {
			x, err := kernel.NormAxis(ax, r)
			if err != nil {
				return nil, fmt.Errorf("axes: %w", err)
			}
			if seen[x] {
				return nil, fmt.Errorf("axes: axis %d repeated", ax)
			}
			seen[x] = true
			axes = append(axes, x)
		}
	}
	k := len(axes)
	g := &geometry{out: append([]int{}, inShape...), scale: make([]float64, r), roiStart: make([]float64, r), roiEnd: make([]float64, r), fromSize: make([]bool, r)}
	for i := range g.scale {
		g.scale[i], g.roiEnd[i] = 1, 1
	}
	switch {
	case len(scalesV) > 0 && len(sizesV) > 0:
		return nil, fmt.Errorf("only one of scales and sizes may be given")
	case len(sizesV) > 0:
		if len(sizesV) != k {
			return nil, fmt.Errorf("sizes has %d values, want %d", len(sizesV), k)
		}
		for j, ax := range axes {
			if sizesV[j] < 0 {
				return nil, fmt.Errorf("sizes[%d] is %d, must be >= 0", j, sizesV[j])
			}
			if inShape[ax] == 0 && sizesV[j] != 0 {
				return nil, fmt.Errorf("cannot resize an empty axis %d to %d", ax, sizesV[j])
			}
		}
		if a.policy == "stretch" {
			for j, ax := range axes {
				g.out[ax] = int(sizesV[j])
				g.fromSize[ax] = true
				if inShape[ax] > 0 {
					g.scale[ax] = float64(sizesV[j]) / float64(inShape[ax])
				}
			}
			break
		}
		// keep_aspect_ratio_policy: one scale for every listed axis.
		s := math.Inf(1)
		if a.policy == "not_smaller" {
			s = math.Inf(-1)
		}
		for j, ax := range axes {
			if inShape[ax] == 0 {
				continue
			}
			v := float64(sizesV[j]) / float64(inShape[ax])
			if a.policy == "not_larger" {
				s = math.Min(s, v)
			} else {
				s = math.Max(s, v)
			}
		}
		if math.IsInf(s, 0) {
			s = 1
		}
		for _, ax := range axes {
			g.scale[ax] = s
			g.out[ax] = int(math.Floor(s*float64(inShape[ax]) + 0.5))
		}
	case len(scalesV) > 0:
		if len(scalesV) != k {
			return nil, fmt.Errorf("scales has %d values, want %d (one per resized axis)", len(scalesV), k)
		}
		for j, ax := range axes {
			s := scalesV[j]
			if !(s > 0) || math.IsInf(s, 0) {
				return nil, fmt.Errorf("scales[%d] is %v, must be positive and finite", j, s)
			}
			o := math.Floor(s * float64(inShape[ax]))
			if o > 1<<40 {
				return nil, fmt.Errorf("scales[%d] = %v makes axis %d too long", j, s, ax)
			}
			g.scale[ax], g.out[ax] = s, int(o)
		}
	default:
		return nil, fmt.Errorf("one of scales and sizes must be given")
	}
	if a.ctm == "tf_crop_and_resize" && len(roiV) > 0 {
		if len(roiV) != 2*k {
			return nil, fmt.Errorf("roi has %d values, want %d", len(roiV), 2*k)
		}
		for j, ax := range axes {
			g.roiStart[ax], g.roiEnd[ax] = roiV[j], roiV[k+j]
		}
	}
	return g, nil
}

// origCoord maps an output coordinate x of an axis to the input, per
// coordinate_transformation_mode. Computed in float64 in the order written.
//
// As in the ONNX reference implementation, align_corners,
// pytorch_half_pixel and tf_crop_and_resize use the real-valued resized
// length lenR = scale * inLen when the scale was given (sizes: lenR is the
// output length), which differs from the integer output length when
// scale * inLen is not integral.
func origCoord(a *resizeAttrs, x, scale float64, inLen, outLen int, lenR, roiStart, roiEnd float64) float64 {
	switch a.ctm {
	case "half_pixel":
		return (x+0.5)/scale - 0.5
	case "half_pixel_symmetric":
		adj := float64(outLen) / (scale * float64(inLen))
		center := float64(inLen) / 2
		return center*(1-adj) + (x+0.5)/scale - 0.5
	case "pytorch_half_pixel":
		if lenR != 1 {
			return (x+0.5)/scale - 0.5
		}
		return 0
	case "align_corners":
		if lenR == 1 {
			return 0
		}
		return x * float64(inLen-1) / (lenR - 1)
	case "tf_half_pixel_for_nn":
		return (x + 0.5) / scale
	case "tf_crop_and_resize":
		if lenR != 1 {
			return roiStart*float64(inLen-1) + x*(roiEnd-roiStart)*float64(inLen-1)/(lenR-1)
		}
		return 0.5 * (roiStart + roiEnd) * float64(inLen-1)
	}
	return x / scale // asymmetric
}

// taps are one axis' interpolation stencils: output index o reads input
// indices idx[off[o]:off[o+1]] with weights w[off[o]:off[o+1]]; outside[o]
// marks an output coordinate that tf_crop_and_resize puts outside the input
// (it takes extrapolation_value).
type taps struct {
	off     []int
	idx     []int
	w       []float64
	outside []bool
}

// axisTaps computes the stencils of one axis. Linear and cubic follow the
// ONNX reference: with x = origCoord, base = floor(x) and ratio = x - base,
// except that an integral x takes base = x-1 and ratio = 1; the stencil's
// input indices are clamped to the axis (edge padding), and taps of weight
// exactly 0 are dropped. exclude_outside zeroes taps outside the axis and
// renormalises by their sum (summed in index order).
func axisTaps(a *resizeAttrs, inLen, outLen int, lenR, scale, roiStart, roiEnd float64) taps {
	t := taps{off: make([]int, outLen+1), outside: make([]bool, outLen)}
	clamp := func(i int) int { return min(max(i, 0), inLen-1) }
	var cw []float64
	var ci []int
	for o := 0; o < outLen; o++ {
		x := origCoord(a, float64(o), scale, inLen, outLen, lenR, roiStart, roiEnd)
		if a.ctm == "tf_crop_and_resize" && (x < 0 || x > float64(inLen-1)) {
			t.outside[o] = true
			t.off[o+1] = len(t.idx)
			continue
		}
		if a.mode == "nearest" {
			t.idx = append(t.idx, clamp(nearestIndex(a.nearestMode, x, scale)))
			t.w = append(t.w, 1)
			t.off[o+1] = len(t.idx)
			continue
		}
		base := math.Floor(x)
		ratio := x - base
		if ratio == 0 {
			base, ratio = x-1, 1
		}
		start, ws := stencil(a, ratio, scale, cw[:0])
		cw = ws
		ci = ci[:0]
		for j := range cw {
			ci = append(ci, int(base)+start+j)
		}
		if a.exclude {
			sum := 0.0
			for j, i := range ci {
				if i < 0 || i >= inLen {
					cw[j] = 0
				}
				sum += cw[j]
			}
			if sum != 0 {
				for j := range cw {
					cw[j] /= sum
				}
			}
		}
		for j, i := range ci {
			if cw[j] != 0 {
				t.idx = append(t.idx, clamp(i))
				t.w = append(t.w, cw[j])
			}
		}
		t.off[o+1] = len(t.idx)
	}
	return t
}

// stencil returns the first tap's offset from base and the tap weights for
// a fractional position ratio in (0, 1].
func stencil(a *resizeAttrs, ratio, scale float64, buf []float64) (int, []float64) {
	A := a.cubicA
	if a.antialias && scale < 1 {
		if a.mode == "linear" {
			start := int(math.Floor(-1/scale) + 1)
			n := 2 - 2*start
			sum := 0.0
			for i := start; i < start+n; i++ {
				v := 1 - math.Abs((float64(i)-ratio)*scale)
				v = math.Max(0, math.Min(1, v))
				buf = append(buf, v)
				sum += v
			}
			return start, normalise(buf, sum)
		}
		start := int(math.Floor(-2/scale) + 1)
		sum := 0.0
		for i := start; i < 2-start; i++ {
			v := cubicKernel(scale*(float64(i)-ratio), A)
			buf = append(buf, v)
			sum += v
		}
		return start, normalise(buf, sum)
	}
	if a.mode == "linear" {
		return 0, append(buf, 1-ratio, ratio)
	}
	r1 := ratio + 1
	q := 1 - ratio
	q1 := q + 1
	return -1, append(buf,
		((A*r1-5*A)*r1+8*A)*r1-4*A,
		((A+2)*ratio-(A+3))*ratio*ratio+1,
		((A+2)*q-(A+3))*q*q+1,
		((A*q1-5*A)*q1+8*A)*q1-4*A)
}

func normalise(w []float64, sum float64) []float64 {
	if sum != 0 {
		for i := range w {
			w[i] /= sum
		}
	}
	return w
}

// cubicKernel is Keys' cubic convolution kernel with parameter A.
func cubicKernel(x, A float64) float64 {
	x = math.Abs(x)
	x2 := x * x
	x3 := x2 * x
	switch {
	case x <= 1:
		return (A+2)*x3 - (A+3)*x2 + 1
	case x < 2:
		return A*x3 - 5*A*x2 + 8*A*x - 4*A
	}
	return 0
}

// nearestIndex rounds an input coordinate to a pixel index per nearest_mode.
func nearestIndex(mode string, x, scale float64) int {
	fl := math.Floor(x)
	switch mode {
	case "round_prefer_floor":
		if x == fl || x-fl <= 0.5 {
			return int(fl)
		}
		return int(fl) + 1
	case "round_prefer_ceil":
		if x-fl < 0.5 {
			return int(fl)
		}
		return int(math.Ceil(x))
	case "floor":
		return int(fl)
	case "ceil":
		return int(math.Ceil(x))
	}
	// simple (ONNX Runtime, opset < 11): ceil when downsampling, else
	// truncation toward zero.
	if scale < 1 {
		return int(math.Ceil(x))
	}
	return int(x)
}

func runResize(kc *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, fmt.Errorf("%s: input X is missing", n.OpType)
	}
	a, g, err := resizeOf(n, x.Shape, in)
	if err != nil {
		return nil, err
	}
	out, err := interpolate(&a, x, g, tapsLevel(kc))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.OpType, err)
	}
	return []*tensor.Tensor{out}, nil
}

func inferResize(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) == 0 || !in[0].Present {
		return nil, fmt.Errorf("%s: input X is missing", n.OpType)
	}
	a, err := readResizeAttrs(n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.OpType, err)
	}
	xt := in[0].Type
	if !xt.RankKnown {
		return []ir.Type{kernel.UnknownRank(xt.DType)}, nil
	}
	out := ir.Type{DType: xt.DType, RankKnown: true, Shape: make([]ir.Dim, len(xt.Shape))}
	for i := range out.Shape {
		out.Shape[i] = ir.Unknown
	}
	present := func(x ir.InferInput) bool {
		return x.Present && !(x.Const != nil && x.Const.Len() == 0) && !(x.Type.RankKnown && len(x.Type.Shape) == 1 && x.Type.Shape[0].Known() && x.Type.Shape[0].Value == 0)
	}
	_, scalesI, sizesI := resizeInputs(n, in, present)
	var scalesV []float64
	var sizesV []int64
	known := false
	switch {
	case n.OpType == "Upsample" && n.Version > 0 && n.Version < 9:
		for _, s := range n.Floats("scales", nil) {
			scalesV = append(scalesV, float64(s))
		}
		known = true
	case sizesI.Present:
		sizesV, known = kernel.ConstInts(sizesI)
	case scalesI.Present && scalesI.Const != nil:
		scalesV, err = scalesI.Const.Float64s()
		known = err == nil
	}
	if !known {
		return []ir.Type{out}, nil
	}
	// Evaluate the geometry on the known dimensions; an unknown input
	// dimension keeps its symbol where its scale is 1, else becomes unknown.
	shape := make([]int, len(xt.Shape))
	for i, d := range xt.Shape {
		shape[i] = 1
		if d.Known() {
			shape[i] = int(d.Value)
		}
	}
	g, err := resizeGeometry(n, a, shape, nil, scalesV, sizesV)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.OpType, err)
	}
	for i, d := range xt.Shape {
		switch {
		case g.fromSize[i]:
			out.Shape[i] = ir.Fixed(g.out[i])
		case d.Known() && (a.policy == "stretch" || len(sizesV) == 0 || allKnown(xt.Shape)):
			out.Shape[i] = ir.Fixed(g.out[i])
		case g.scale[i] == 1 && len(sizesV) == 0:
			out.Shape[i] = d
		}
	}
	return []ir.Type{out}, nil
}

func allKnown(s []ir.Dim) bool {
	for _, d := range s {
		if !d.Known() {
			return false
		}
	}
	return true
}
