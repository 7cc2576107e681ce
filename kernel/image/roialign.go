package image

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// maxRoiSamples bounds the sampling grid of one output bin, so that a
// hostile ROI cannot demand unbounded work.
const maxRoiSamples = 1 << 20

// RoiAlign (opset 10, 16): Y[r,c,ph,pw] pools X[batch_indices[r], c] over
// bin (ph, pw) of ROI r, sampling a grid of bilinear samples (the layout of
// ONNX Runtime and the ONNX reference). Sample positions and bilinear
// weights are computed in float64 and rounded to float32 once; avg mode is
// one FMA chain over the samples in row-major order, the four taps of each
// sample in order (top-left, top-right, bottom-left, bottom-right), divided
// by the sample count; max mode takes the maximum over samples of the
// largest weighted tap.
func runRoiAlign(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, rois, bi := kernel.Input(in, 0), kernel.Input(in, 1), kernel.Input(in, 2)
	if x == nil || rois == nil || bi == nil {
		return nil, fmt.Errorf("RoiAlign: needs inputs X, rois and batch_indices")
	}
	if x.Rank() != 4 {
		return nil, fmt.Errorf("RoiAlign: X must be 4-D (N, C, H, W), got shape %s", tensor.ShapeString(x.Shape))
	}
	if rois.Rank() != 2 || rois.Shape[1] != 4 {
		return nil, fmt.Errorf("RoiAlign: rois must have shape [num_rois, 4], got %s", tensor.ShapeString(rois.Shape))
	}
	R := rois.Shape[0]
	if bi.Rank() != 1 || bi.Shape[0] != R || !bi.DType.IsInt() {
		return nil, fmt.Errorf("RoiAlign: batch_indices must be %d integers, got %v%s", R, bi.DType, tensor.ShapeString(bi.Shape))
	}
	mode := n.String("mode", "avg")
	if mode != "avg" && mode != "max" {
		return nil, fmt.Errorf("RoiAlign: unknown mode %q", mode)
	}
	ctm := "output_half_pixel"
	if n.Version == 0 || n.Version >= 16 {
		ctm = n.String("coordinate_transformation_mode", "half_pixel")
	}
	if ctm != "half_pixel" && ctm != "output_half_pixel" {
		return nil, fmt.Errorf("RoiAlign: unknown coordinate_transformation_mode %q", ctm)
	}
	oh, ow := int(n.Int("output_height", 1)), int(n.Int("output_width", 1))
	if oh < 1 || ow < 1 {
		return nil, fmt.Errorf("RoiAlign: output_height and output_width must be >= 1, got %d and %d", oh, ow)
	}
	ratio := int(n.Int("sampling_ratio", 0))
	if ratio < 0 {
		return nil, fmt.Errorf("RoiAlign: sampling_ratio must be >= 0, got %d", ratio)
	}
	scale := float64(n.Float("spatial_scale", 1))
	rv, err := rois.Float64s()
	if err != nil {
		return nil, fmt.Errorf("RoiAlign: rois: %w", err)
	}
	idx, _ := bi.Int64s()
	N, C, H, W := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	for r, b := range idx {
		if b < 0 || b >= int64(N) {
			return nil, fmt.Errorf("RoiAlign: batch_indices[%d] is %d, want 0..%d", r, b, N-1)
		}
	}
	for i, v := range rv {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("RoiAlign: rois[%d][%d] is %v", i/4, i%4, v)
		}
	}
	var src []float32
	switch d := x.Data.(type) {
	case []float32:
		src = d
	case []float64, []tensor.Half, []tensor.BHalf:
		f, _ := x.Float64s()
		src = make([]float32, len(f))
		for i, v := range f {
			src[i] = float32(v)
		}
	default:
		return nil, fmt.Errorf("RoiAlign: X must be a float tensor, got %v", x.DType)
	}
	offset := 0.0
	if ctm == "half_pixel" {
		offset = 0.5
	}
	out := make([]float32, R*C*oh*ow)
	type sample struct {
		pos [4]int
		w   [4]float32
	}
	var samples []sample
	for r := 0; r < R; r++ {
		roi := rv[r*4 : r*4+4]
		sw, sh := roi[0]*scale-offset, roi[1]*scale-offset
		rw, rh := roi[2]*scale-offset-sw, roi[3]*scale-offset-sh
		if ctm == "output_half_pixel" {
			rw, rh = math.Max(rw, 1), math.Max(rh, 1)
		}
		bh, bw := rh/float64(oh), rw/float64(ow)
		gh, gw := ratio, ratio
		if ratio == 0 {
			gh, gw = int(math.Ceil(rh/float64(oh))), int(math.Ceil(rw/float64(ow)))
		}
		gh, gw = max(gh, 0), max(gw, 0)
		if float64(gh)*float64(gw) > maxRoiSamples {
			return nil, fmt.Errorf("RoiAlign: roi %d needs a %dx%d sampling grid per bin, more than %d samples", r, gh, gw, maxRoiSamples)
		}
		count := float32(max(gh*gw, 1))
		plane0 := int(idx[r]) * C * H * W
		for ph := 0; ph < oh; ph++ {
			for pw := 0; pw < ow; pw++ {
				samples = samples[:0]
				for iy := 0; iy < gh; iy++ {
					y := sh + float64(ph)*bh + (float64(iy)+0.5)*bh/float64(gh)
					for ix := 0; ix < gw; ix++ {
						xx := sw + float64(pw)*bw + (float64(ix)+0.5)*bw/float64(gw)
						var s sample
						if !(y < -1 || y > float64(H) || xx < -1 || xx > float64(W)) {
							pos, w := bilinear(y, xx, H, W)
							s.pos = pos
							for k := range w {
								s.w[k] = float32(w[k])
							}
						}
						samples = append(samples, s)
					}
				}
				for c := 0; c < C; c++ {
					plane := src[plane0+c*H*W:]
					var v float32
					if mode == "avg" {
						for _, s := range samples {
							for k := 0; k < 4; k++ {
								v = vmath.FMA32(s.w[k], plane[s.pos[k]], v)
							}
						}
						v /= count
					} else {
						for i, s := range samples {
							m := s.w[0] * plane[s.pos[0]]
							for k := 1; k < 4; k++ {
								m = max(m, s.w[k]*plane[s.pos[k]])
							}
							if i == 0 || m > v {
								v = m
							}
						}
					}
					out[((r*C+c)*oh+ph)*ow+pw] = v
				}
			}
		}
	}
	shape := []int{R, C, oh, ow}
	if x.DType == tensor.Float32 {
		return []*tensor.Tensor{tensor.From(out, shape...)}, nil
	}
	o := make([]float64, len(out))
	for i, v := range out {
		o[i] = float64(v)
	}
	return []*tensor.Tensor{tensor.FromFloat64s(x.DType, shape, o)}, nil
}

// bilinear returns the four tap offsets and weights of a sample at (y, x)
// inside an H x W plane, clamping at the far edges as ONNX Runtime does.
func bilinear(y, x float64, H, W int) ([4]int, [4]float64) {
	y, x = math.Max(y, 0), math.Max(x, 0)
	yl, xl := int(y), int(x)
	var yh, xh int
	if yl >= H-1 {
		yl, yh, y = H-1, H-1, float64(H-1)
	} else {
		yh = yl + 1
	}
	if xl >= W-1 {
		xl, xh, x = W-1, W-1, float64(W-1)
	} else {
		xh = xl + 1
	}
	ly, lx := y-float64(yl), x-float64(xl)
	hy, hx := 1-ly, 1-lx
	return [4]int{yl*W + xl, yl*W + xh, yh*W + xl, yh*W + xh},
		[4]float64{hy * hx, hy * lx, ly * hx, ly * lx}
}

func inferRoiAlign(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) < 3 || !in[0].Present || !in[1].Present {
		return nil, fmt.Errorf("RoiAlign: needs inputs X, rois and batch_indices")
	}
	x, rois := in[0].Type, in[1].Type
	out := ir.Type{DType: x.DType, RankKnown: true, Shape: []ir.Dim{ir.Unknown, ir.Unknown,
		ir.Fixed(int(n.Int("output_height", 1))), ir.Fixed(int(n.Int("output_width", 1)))}}
	if rois.RankKnown && len(rois.Shape) == 2 {
		out.Shape[0] = rois.Shape[0]
	}
	if x.RankKnown {
		if len(x.Shape) != 4 {
			return nil, fmt.Errorf("RoiAlign: X must be 4-D, got %v", x)
		}
		out.Shape[1] = x.Shape[1]
	}
	return []ir.Type{out}, nil
}
