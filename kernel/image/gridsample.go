package image

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// GridSample (opset 16 and 20, 4-D input): Y[n,c,h,w] samples X[n,c] at
// grid[n,h,w] = (x, y), normalised to [-1, 1].
//
// Following the ONNX reference: the normalised coordinate is mapped to
// pixels (align_corners: (g+1)/2*(L-1), else ((g+1)*L-1)/2) and rounded to
// the grid's element type; nearest rounds it half to even; coordinates
// outside the valid range are clamped (border) or reflected (reflection);
// then each stencil tap reads the input with the padding rule (zeros: 0
// outside, border: clamped index, reflection: reflected index). An output
// is the sum over the y taps of w_y times (the FMA chain over the x taps
// of w_x * X), each an FMA chain from 0 in tap order.
func runGridSample(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, grid := kernel.Input(in, 0), kernel.Input(in, 1)
	if x == nil || grid == nil {
		return nil, fmt.Errorf("GridSample: needs inputs X and grid")
	}
	if x.Rank() != 4 {
		return nil, fmt.Errorf("GridSample: X must be 4-D (N, C, H, W), got shape %s", tensor.ShapeString(x.Shape))
	}
	if grid.Rank() != 4 || grid.Shape[3] != 2 || grid.Shape[0] != x.Shape[0] {
		return nil, fmt.Errorf("GridSample: grid must have shape [%d, H_out, W_out, 2], got %s", x.Shape[0], tensor.ShapeString(grid.Shape))
	}
	if !grid.DType.IsFloat() {
		return nil, fmt.Errorf("GridSample: grid must be float, got %v", grid.DType)
	}
	mode := n.String("mode", map[bool]string{true: "linear", false: "bilinear"}[n.Version >= 20])
	switch mode {
	case "bilinear", "linear":
		mode = "linear"
	case "bicubic", "cubic":
		mode = "cubic"
	case "nearest":
	default:
		return nil, fmt.Errorf("GridSample: unknown mode %q", mode)
	}
	pad := n.String("padding_mode", "zeros")
	if pad != "zeros" && pad != "border" && pad != "reflection" {
		return nil, fmt.Errorf("GridSample: unknown padding_mode %q", pad)
	}
	align := n.Int("align_corners", 0) != 0
	gv, _ := grid.Float64s()
	if grid.DType == tensor.Float32 || grid.DType == tensor.Float16 || grid.DType == tensor.BFloat16 {
		// The reference keeps denormalised coordinates in float32.
		for i, v := range gv {
			gv[i] = float64(float32(v))
		}
	}
	N, C, H, W := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	Ho, Wo := grid.Shape[1], grid.Shape[2]
	p := &gsParams{mode: mode, pad: pad, align: align, N: N, C: C, H: H, W: W, Ho: Ho, Wo: Wo, grid: gv, f32: grid.DType != tensor.Float64}
	shape := []int{N, C, Ho, Wo}
	switch d := x.Data.(type) {
	case []float32:
		out := make([]float32, tensor.NumElems(shape))
		gridSample(p, d, out, vmath.FMA32)
		return []*tensor.Tensor{tensor.From(out, shape...)}, nil
	case []float64:
		out := make([]float64, tensor.NumElems(shape))
		gridSample(p, d, out, math.FMA)
		return []*tensor.Tensor{tensor.From(out, shape...)}, nil
	case []tensor.Half, []tensor.BHalf:
		f, _ := x.Float64s()
		src := make([]float32, len(f))
		for i, v := range f {
			src[i] = float32(v)
		}
		out := make([]float32, tensor.NumElems(shape))
		gridSample(p, src, out, vmath.FMA32)
		o := make([]float64, len(out))
		for i, v := range out {
			o[i] = float64(v)
		}
		return []*tensor.Tensor{tensor.FromFloat64s(x.DType, shape, o)}, nil
	}
	return nil, fmt.Errorf("GridSample: X must be a float tensor, got %v", x.DType)
}

type gsParams struct {
	mode, pad          string
	align              bool
	N, C, H, W, Ho, Wo int
	grid               []float64
	f32                bool
}

// gsTap is one stencil tap: an index into the axis and its weight.
type gsTap struct {
	i int
	w float64
}

// gsAxis computes the taps of one axis of length L for normalised
// coordinate g.
func gsAxis(p *gsParams, g float64, L int, buf []gsTap) []gsTap {
	var x float64
	if p.align {
		x = (g + 1) / 2 * float64(L-1)
	} else {
		x = ((g+1)*float64(L) - 1) / 2
	}
	if p.f32 {
		x = float64(float32(x))
	}
	lo, hi := -0.5, float64(L)-0.5
	if p.align {
		lo, hi = 0, float64(L-1)
	}
	if p.mode == "nearest" {
		x = math.RoundToEven(x)
	}
	if x < lo || x > hi {
		switch p.pad {
		case "border":
			x = math.Max(0, math.Min(x, float64(L-1)))
		case "reflection":
			x = reflect(x, lo, hi)
		}
	}
	add := func(i int, w float64) {
		switch p.pad {
		case "zeros":
			if i < 0 || i >= L {
				return
			}
		case "border":
			i = min(max(i, 0), L-1)
		default:
			i = int(reflect(float64(i), lo, hi))
			i = min(max(i, 0), L-1)
		}
		buf = append(buf, gsTap{i, w})
	}
	switch p.mode {
	case "nearest":
		add(int(x), 1)
	case "linear":
		x0 := math.Floor(x)
		t := x - x0
		add(int(x0), 1-t)
		add(int(x0)+1, t)
	default:
		x0 := math.Floor(x)
		t := x - x0
		const A = -0.75
		r1, q, q1 := t+1, 1-t, 2-t
		add(int(x0)-1, ((A*r1-5*A)*r1+8*A)*r1-4*A)
		add(int(x0), ((A+2)*t-(A+3))*t*t+1)
		add(int(x0)+1, ((A+2)*q-(A+3))*q*q+1)
		add(int(x0)+2, ((A*q1-5*A)*q1+8*A)*q1-4*A)
	}
	return buf
}

// reflect folds x into [lo, hi] by reflecting at the borders.
func reflect(x, lo, hi float64) float64 {
	rng := hi - lo
	if rng <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return lo
	}
	if x < lo {
		dx := lo - x
		k := math.Floor(dx / rng)
		r := dx - k*rng
		if math.Mod(k, 2) == 0 {
			return lo + r
		}
		return hi - r
	}
	if x > hi {
		dx := x - hi
		k := math.Floor(dx / rng)
		r := dx - k*rng
		if math.Mod(k, 2) == 0 {
			return hi - r
		}
		return lo + r
	}
	return x
}

func gridSample[T float32 | float64](p *gsParams, src, dst []T, fma func(a, b, c T) T) {
	var xt, yt []gsTap
	for n := 0; n < p.N; n++ {
		for oh := 0; oh < p.Ho; oh++ {
			for ow := 0; ow < p.Wo; ow++ {
				gi := ((n*p.Ho+oh)*p.Wo + ow) * 2
				gx, gy := p.grid[gi], p.grid[gi+1]
				if math.IsNaN(gx) || math.IsNaN(gy) {
					for c := 0; c < p.C; c++ {
						dst[((n*p.C+c)*p.Ho+oh)*p.Wo+ow] = T(math.NaN())
					}
					continue
				}
				xt = gsAxis(p, gx, p.W, xt[:0])
				yt = gsAxis(p, gy, p.H, yt[:0])
				for c := 0; c < p.C; c++ {
					plane := src[(n*p.C+c)*p.H*p.W:]
					var acc T
					for _, ty := range yt {
						row := plane[ty.i*p.W:]
						var r T
						for _, tx := range xt {
							r = fma(T(tx.w), row[tx.i], r)
						}
						acc = fma(T(ty.w), r, acc)
					}
					dst[((n*p.C+c)*p.Ho+oh)*p.Wo+ow] = acc
				}
			}
		}
	}
}

func inferGridSample(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) < 2 || !in[0].Present || !in[1].Present {
		return nil, fmt.Errorf("GridSample: needs inputs X and grid")
	}
	x, g := in[0].Type, in[1].Type
	out := ir.Type{DType: x.DType, RankKnown: true, Shape: []ir.Dim{ir.Unknown, ir.Unknown, ir.Unknown, ir.Unknown}}
	if x.RankKnown {
		if len(x.Shape) != 4 {
			return nil, fmt.Errorf("GridSample: X must be 4-D, got %v", x)
		}
		out.Shape[0], out.Shape[1] = x.Shape[0], x.Shape[1]
	}
	if g.RankKnown {
		if len(g.Shape) != 4 {
			return nil, fmt.Errorf("GridSample: grid must be 4-D, got %v", g)
		}
		out.Shape[2], out.Shape[3] = g.Shape[1], g.Shape[2]
		if !out.Shape[0].Known() && out.Shape[0].Param == "" {
			out.Shape[0] = g.Shape[0]
		}
	}
	return []ir.Type{out}, nil
}
