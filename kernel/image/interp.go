package image

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// interpolate applies per-axis stencils to x.
//
// Order of operations (the determinism contract): an output element is a
// nested weighted sum, innermost axis first. For the last axis, the sum over
// its taps is one fused multiply-add chain acc = fma(w, x, acc) from 0 in
// tap order; each outer axis combines the inner sums the same way. Weights
// are computed in float64 and rounded once to the element type (float32 for
// float32/float16/bfloat16 data, float64 for float64 and integer data).
// Integer results are rounded to nearest (ties to even) and saturated.
// Nearest mode copies elements and works for every dtype.
//
// A float32 Resize of the last two axes takes the separable path
// (separable32 at lv's vector kernel: tapsZ, tapsA), which stores NaNs as
// 0x7fc00000; interpInto's result is canonicalised the same way wherever
// that path applies, so that every level gives the same bits.
func interpolate(a *resizeAttrs, x *tensor.Tensor, g *geometry, lv tapsLv) (*tensor.Tensor, error) {
	for d := range x.Shape {
		if g.out[d] > 0 && x.Shape[d] == 0 {
			return nil, fmt.Errorf("cannot resize an empty axis %d to %d", d, g.out[d])
		}
	}
	out := tensor.New(x.DType, g.out...)
	if out.Len() == 0 {
		return out, nil
	}
	w := walkerOf(a, x, g)
	if a.mode == "nearest" {
		return out, nearestInto(w, x, out, a.extrap)
	}
	switch src := x.Data.(type) {
	case []float32:
		dst := out.Data.([]float32)
		if separableOK(w) {
			if lv != tapsGo {
				separable32(w, src, dst, lv)
				break
			}
			interpInto(w, src, dst, float32(a.extrap), vmath.FMA32)
			for i, v := range dst {
				dst[i] = canon32(v)
			}
			break
		}
		interpInto(w, src, dst, float32(a.extrap), vmath.FMA32)
	case []float64:
		interpInto(w, src, out.Data.([]float64), a.extrap, math.FMA)
	case []tensor.Half, []tensor.BHalf:
		f, _ := x.Float64s()
		src32 := make([]float32, len(f))
		for i, v := range f {
			src32[i] = float32(v)
		}
		dst := make([]float32, out.Len())
		interpInto(w, src32, dst, float32(a.extrap), vmath.FMA32)
		if h, ok := out.Data.([]tensor.Half); ok {
			for i, v := range dst {
				h[i] = tensor.ToHalf(v)
			}
		} else {
			b := out.Data.([]tensor.BHalf)
			for i, v := range dst {
				b[i] = tensor.ToBHalf(v)
			}
		}
	default:
		if !x.DType.IsInt() {
			return nil, fmt.Errorf("mode %s does not support %v", a.mode, x.DType)
		}
		f, _ := x.Float64s()
		dst := make([]float64, out.Len())
		interpInto(w, f, dst, a.extrap, math.FMA)
		lo, hi := intRange(x.DType)
		for i, v := range dst {
			dst[i] = math.Max(lo, math.Min(hi, math.RoundToEven(v)))
		}
		out = tensor.FromFloat64s(x.DType, g.out, dst)
	}
	return out, nil
}

// walkerOf computes every axis' stencils (no axis may be empty).
func walkerOf(a *resizeAttrs, x *tensor.Tensor, g *geometry) *walker {
	r := len(x.Shape)
	tp := make([]taps, r)
	for d := 0; d < r; d++ {
		lenR := float64(g.out[d])
		if !g.fromSize[d] {
			lenR = g.scale[d] * float64(x.Shape[d])
		}
		tp[d] = axisTaps(a, x.Shape[d], g.out[d], lenR, g.scale[d], g.roiStart[d], g.roiEnd[d])
	}
	return &walker{in: x.Shape, strides: tensor.Strides(x.Shape), out: g.out, tp: tp}
}

func intRange(dt tensor.DType) (float64, float64) {
	switch dt {
	case tensor.Int8:
		return math.MinInt8, math.MaxInt8
	case tensor.Int16:
		return math.MinInt16, math.MaxInt16
	case tensor.Int32:
		return math.MinInt32, math.MaxInt32
	case tensor.Uint8:
		return 0, math.MaxUint8
	case tensor.Uint16:
		return 0, math.MaxUint16
	case tensor.Uint32:
		return 0, math.MaxUint32
	case tensor.Uint64:
		return 0, math.MaxUint64
	}
	return math.MinInt64, math.MaxInt64
}

// walker visits output elements in row-major order.
type walker struct {
	in, strides, out []int
	tp               []taps
	pos              []int
}

// each calls f(i, outside) for every output element i with its position in
// w.pos; outside reports whether any axis maps outside the input.
func (w *walker) each(f func(i int, outside bool)) {
	r := len(w.out)
	w.pos = make([]int, r)
	i := 0
	var rec func(d int, outside bool)
	rec = func(d int, outside bool) {
		if d == r {
			f(i, outside)
			i++
			return
		}
		for o := 0; o < w.out[d]; o++ {
			w.pos[d] = o
			rec(d+1, outside || w.tp[d].outside[o])
		}
	}
	rec(0, false)
}

func interpInto[T float32 | float64](w *walker, src, dst []T, extrap T, fma func(a, b, c T) T) {
	r := len(w.out)
	wts := make([][]T, r)
	for d := range wts {
		wts[d] = make([]T, len(w.tp[d].w))
		for j, v := range w.tp[d].w {
			wts[d][j] = T(v)
		}
	}
	var sum func(d, base int) T
	sum = func(d, base int) T {
		t := &w.tp[d]
		o := w.pos[d]
		var acc T
		for j := t.off[o]; j < t.off[o+1]; j++ {
			off := base + t.idx[j]*w.strides[d]
			var v T
			if d == r-1 {
				v = src[off]
			} else {
				v = sum(d+1, off)
			}
			acc = fma(wts[d][j], v, acc)
		}
		return acc
	}
	w.each(func(i int, outside bool) {
		if outside {
			dst[i] = extrap
			return
		}
		if r == 0 {
			dst[i] = src[0]
			return
		}
		dst[i] = sum(0, 0)
	})
}

func nearestInto(w *walker, x, out *tensor.Tensor, extrap float64) error {
	switch s := x.Data.(type) {
	case []float32:
		gather(w, s, out.Data.([]float32), float32(extrap))
	case []float64:
		gather(w, s, out.Data.([]float64), extrap)
	case []tensor.Half:
		gather(w, s, out.Data.([]tensor.Half), tensor.ToHalf(float32(extrap)))
	case []tensor.BHalf:
		gather(w, s, out.Data.([]tensor.BHalf), tensor.ToBHalf(float32(extrap)))
	case []int8:
		gather(w, s, out.Data.([]int8), int8(extrap))
	case []int16:
		gather(w, s, out.Data.([]int16), int16(extrap))
	case []int32:
		gather(w, s, out.Data.([]int32), int32(extrap))
	case []int64:
		gather(w, s, out.Data.([]int64), int64(extrap))
	case []uint8:
		gather(w, s, out.Data.([]uint8), uint8(extrap))
	case []uint16:
		gather(w, s, out.Data.([]uint16), uint16(extrap))
	case []uint32:
		gather(w, s, out.Data.([]uint32), uint32(extrap))
	case []uint64:
		gather(w, s, out.Data.([]uint64), uint64(extrap))
	case []bool:
		gather(w, s, out.Data.([]bool), extrap != 0)
	case []string:
		gather(w, s, out.Data.([]string), "")
	default:
		return fmt.Errorf("unsupported element type %v", x.DType)
	}
	return nil
}

// gather copies, for every output element, the single input element its
// nearest-mode stencil selects.
func gather[T any](w *walker, src, dst []T, extrap T) {
	r := len(w.out)
	w.each(func(i int, outside bool) {
		if outside {
			dst[i] = extrap
			return
		}
		off := 0
		for d := 0; d < r; d++ {
			t := &w.tp[d]
			off += t.idx[t.off[w.pos[d]]] * w.strides[d]
		}
		dst[i] = src[off]
	})
}
