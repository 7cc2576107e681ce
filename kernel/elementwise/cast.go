package elementwise

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Cast semantics, for every pair of vouch's types:
//   - float to float rounds to nearest, ties to even, once (float64 to
//     float16/bfloat16 goes through float32 with round-to-odd, which makes
//     the double rounding exact).
//   - float to integer truncates toward zero; NaN gives 0; values beyond
//     int64 saturate there and are then wrapped to the target width like an
//     integer-to-integer cast, so the result never depends on the platform.
//   - integer to integer wraps (two's complement); integer to float rounds
//     to nearest.
//   - bool is 0 or 1; anything to bool is "not zero" (NaN is true).
//   - number to string is the shortest decimal that reads back to the same
//     value, written plainly ("314.15926"; exponent form outside
//     [1e-4, 1e16)); ±Inf and NaN are "INF", "-INF" and "NaN"; bools are
//     "True" and "False" (numpy's spelling, which ONNX's reference uses).
//   - string to number parses decimal and scientific forms and the
//     case-insensitive literals "INF", "+INF", "-INF" and "NaN"; an integer
//     target accepts a float literal and truncates it. Anything else is an
//     error (ONNX leaves it undefined).
//
// The saturate attribute (opset 19) only concerns float8 types, which
// vouch does not hold.

func runCast(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need("Cast", in, 1); err != nil {
		return nil, err
	}
	to, err := castTarget(n)
	if err != nil {
		return nil, err
	}
	out, err := Cast(in[0], to)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}

func runCastLike(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need("CastLike", in, 2); err != nil {
		return nil, err
	}
	out, err := Cast(in[0], in[1].DType)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}

func castTarget(n *ir.Node) (tensor.DType, error) {
	if !n.Has("to") {
		return 0, fmt.Errorf("elementwise: Cast: missing attribute \"to\"")
	}
	to := tensor.DType(n.Int("to", 0))
	if a := n.Attrs["to"]; a.Kind == ir.AttrString {
		// Before opset 6, "to" is a TensorProto.DataType name.
		var ok bool
		if to, ok = legacyTypes[a.S]; !ok {
			return 0, fmt.Errorf("elementwise: Cast: unknown target type %q", a.S)
		}
	}
	if !to.Supported() {
		return 0, fmt.Errorf("elementwise: Cast: unsupported target type %v", to)
	}
	return to, nil
}

var legacyTypes = map[string]tensor.DType{
	"FLOAT": tensor.Float32, "DOUBLE": tensor.Float64, "FLOAT16": tensor.Float16, "BFLOAT16": tensor.BFloat16,
	"INT8": tensor.Int8, "INT16": tensor.Int16, "INT32": tensor.Int32, "INT64": tensor.Int64,
	"UINT8": tensor.Uint8, "UINT16": tensor.Uint16, "UINT32": tensor.Uint32, "UINT64": tensor.Uint64,
	"BOOL": tensor.Bool, "STRING": tensor.String,
}

func inferCast(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	to, err := castTarget(n)
	if err != nil {
		return nil, err
	}
	return inferAs(to)(n, in)
}

func inferCastLike(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) < 2 || !in[1].Present {
		return nil, fmt.Errorf("elementwise: CastLike: missing input 1")
	}
	return inferAs(in[1].Type.DType)(n, in)
}

// Cast converts t to element type to, following the rules above.
func Cast(t *tensor.Tensor, to tensor.DType) (*tensor.Tensor, error) {
	if !to.Supported() {
		return nil, fmt.Errorf("elementwise: Cast: unsupported target type %v", to)
	}
	if t.DType == to {
		return t.Clone(), nil
	}
	n := t.Len()
	var data any
	switch src := t.Data.(type) {
	case []string:
		d, err := fromStrings(src, to)
		if err != nil {
			return nil, err
		}
		data = d
	case []float32, []float64, []tensor.Half, []tensor.BHalf:
		if to == tensor.String {
			data = floatStrings(t)
			break
		}
		v, _ := t.Float64s() // exact for every float type
		data = fromFloats(v, to)
	case []bool:
		if to == tensor.String {
			s := make([]string, n)
			for i, b := range src {
				s[i] = "False"
				if b {
					s[i] = "True"
				}
			}
			data = s
			break
		}
		v, _ := t.Int64s()
		data = fromInts(v, to)
	case []uint64:
		data = fromUints(src, to)
	default: // signed and narrower unsigned integers fit int64
		v, err := t.Int64s()
		if err != nil {
			return nil, err
		}
		data = fromInts(v, to)
	}
	return wrap(to, t.Shape, data), nil
}

// fromFloats converts exact float64 values (read from any float type).
func fromFloats(v []float64, to tensor.DType) any {
	switch to {
	case tensor.Float32:
		d := make([]float32, len(v))
		for i, x := range v {
			d[i] = float32(x)
		}
		return d
	case tensor.Float64:
		return v
	case tensor.Float16:
		d := make([]tensor.Half, len(v))
		for i, x := range v {
			d[i] = tensor.ToHalf(roundOdd32(x))
		}
		return d
	case tensor.BFloat16:
		d := make([]tensor.BHalf, len(v))
		for i, x := range v {
			d[i] = tensor.ToBHalf(roundOdd32(x))
		}
		return d
	case tensor.Bool:
		d := make([]bool, len(v))
		for i, x := range v {
			d[i] = x != 0
		}
		return d
	case tensor.Uint64:
		d := make([]uint64, len(v))
		for i, x := range v {
			if x >= 9.223372036854775807e18 && x < 1.8446744073709551615e19 {
				d[i] = uint64(x)
			} else if x >= 1.8446744073709551615e19 {
				d[i] = math.MaxUint64
			} else {
				d[i] = uint64(truncInt(x))
			}
		}
		return d
	}
	iv := make([]int64, len(v))
	for i, x := range v {
		iv[i] = truncInt(x)
	}
	return fromInts(iv, to)
}

// roundOdd32 rounds x to float32 toward zero and sets the last bit when
// inexact (round-to-odd), so that a second rounding to a narrower format
// is the correctly rounded result of x.
func roundOdd32(x float64) float32 {
	r := float32(x)
	if float64(r) == x || x != x {
		return r
	}
	if math.Abs(float64(r)) > math.Abs(x) {
		r = math.Nextafter32(r, 0)
	}
	return math.Float32frombits(math.Float32bits(r) | 1)
}

// fromInts converts int64 values (wrapping to narrower integers).
func fromInts(v []int64, to tensor.DType) any {
	switch to {
	case tensor.Float32:
		return convertAll(v, func(x int64) float32 { return float32(x) })
	case tensor.Float64:
		return convertAll(v, func(x int64) float64 { return float64(x) })
	case tensor.Float16:
		return convertAll(v, func(x int64) tensor.Half { return tensor.ToHalf(roundOdd32(float64(x))) })
	case tensor.BFloat16:
		return convertAll(v, func(x int64) tensor.BHalf { return tensor.ToBHalf(roundOdd32(float64(x))) })
	case tensor.Int8:
		return convertAll(v, func(x int64) int8 { return int8(x) })
	case tensor.Int16:
		return convertAll(v, func(x int64) int16 { return int16(x) })
	case tensor.Int32:
		return convertAll(v, func(x int64) int32 { return int32(x) })
	case tensor.Int64:
		return v
	case tensor.Uint8:
		return convertAll(v, func(x int64) uint8 { return uint8(x) })
	case tensor.Uint16:
		return convertAll(v, func(x int64) uint16 { return uint16(x) })
	case tensor.Uint32:
		return convertAll(v, func(x int64) uint32 { return uint32(x) })
	case tensor.Uint64:
		return convertAll(v, func(x int64) uint64 { return uint64(x) })
	case tensor.Bool:
		return convertAll(v, func(x int64) bool { return x != 0 })
	case tensor.String:
		return convertAll(v, func(x int64) string { return strconv.FormatInt(x, 10) })
	}
	panic("unreachable: target checked by Cast")
}

func fromUints(v []uint64, to tensor.DType) any {
	switch to {
	case tensor.Float32:
		return convertAll(v, func(x uint64) float32 { return float32(x) })
	case tensor.Float64:
		return convertAll(v, func(x uint64) float64 { return float64(x) })
	case tensor.Float16:
		return convertAll(v, func(x uint64) tensor.Half { return tensor.ToHalf(roundOdd32(float64(x))) })
	case tensor.BFloat16:
		return convertAll(v, func(x uint64) tensor.BHalf { return tensor.ToBHalf(roundOdd32(float64(x))) })
	case tensor.String:
		return convertAll(v, func(x uint64) string { return strconv.FormatUint(x, 10) })
	case tensor.Bool:
		return convertAll(v, func(x uint64) bool { return x != 0 })
	}
	iv := make([]int64, len(v))
	for i, x := range v {
		iv[i] = int64(x) // two's complement wrap
	}
	return fromInts(iv, to)
}

func convertAll[A, B any](v []A, f func(A) B) []B {
	out := make([]B, len(v))
	for i, x := range v {
		out[i] = f(x)
	}
	return out
}

// floatStrings formats each element of a float tensor with the fewest
// digits that read back to the same value in its own type.
func floatStrings(t *tensor.Tensor) []string {
	out := make([]string, t.Len())
	switch d := t.Data.(type) {
	case []float32:
		for i, x := range d {
			out[i] = formatFloat(float64(x), 32, nil)
		}
	case []float64:
		for i, x := range d {
			out[i] = formatFloat(x, 64, nil)
		}
	case []tensor.Half:
		for i, x := range d {
			out[i] = formatFloat(float64(x.Float32()), 32, func(f float64) bool { return tensor.ToHalf(float32(f)) == x })
		}
	case []tensor.BHalf:
		for i, x := range d {
			out[i] = formatFloat(float64(x.Float32()), 32, func(f float64) bool { return tensor.ToBHalf(float32(f)) == x })
		}
	}
	return out
}

// formatFloat writes x (exactly representable in float of the given bit
// size) in the shortest form; same, when set, says whether a candidate
// reads back as x in a narrower type, and shorter digit strings are tried
// first.
func formatFloat(x float64, bits int, same func(float64) bool) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "INF"
	case math.IsInf(x, -1):
		return "-INF"
	}
	digits := strconv.FormatFloat(x, 'e', -1, bits)
	if same != nil {
		for p := 0; p < 8; p++ {
			s := strconv.FormatFloat(x, 'e', p, 64)
			if f, err := strconv.ParseFloat(s, 64); err == nil && same(f) {
				digits = s
				break
			}
		}
	}
	// digits is [-]d[.ddd]e±XX: place the point plainly for moderate
	// exponents, as Python's repr does.
	mant, expStr, _ := strings.Cut(digits, "e")
	exp, _ := strconv.Atoi(expStr)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	ds := strings.Replace(mant, ".", "", 1)
	ds = strings.TrimRight(ds, "0")
	if ds == "" {
		ds = "0"
	}
	var s string
	switch {
	case x == 0:
		s = "0.0"
	case exp >= -4 && exp < 16:
		if exp >= 0 {
			if len(ds) <= exp+1 {
				s = ds + strings.Repeat("0", exp+1-len(ds)) + ".0"
			} else {
				s = ds[:exp+1] + "." + ds[exp+1:]
			}
		} else {
			s = "0." + strings.Repeat("0", -exp-1) + ds
		}
	default:
		m := ds[:1]
		if len(ds) > 1 {
			m += "." + ds[1:]
		}
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		s = fmt.Sprintf("%se%s%02d", m, sign, exp)
	}
	if neg {
		s = "-" + s
	}
	return s
}

// parseFloat reads a float literal, including ONNX's INF/NaN spellings;
// bits is 32 or 64 (the precision to round to directly).
func parseFloat(s string, bits int) (float64, error) {
	t := strings.TrimSpace(s)
	switch strings.ToUpper(t) {
	case "INF", "+INF", "INFINITY", "+INFINITY":
		return math.Inf(1), nil
	case "-INF", "-INFINITY":
		return math.Inf(-1), nil
	case "NAN", "+NAN", "-NAN":
		return math.NaN(), nil
	}
	f, err := strconv.ParseFloat(t, bits)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("elementwise: Cast: cannot read %q as a number", s)
	}
	return f, nil
}

func fromStrings(v []string, to tensor.DType) (any, error) {
	switch to {
	case tensor.Float32:
		d := make([]float32, len(v))
		for i, s := range v {
			f, err := parseFloat(s, 32)
			if err != nil {
				return nil, err
			}
			d[i] = float32(f)
		}
		return d, nil
	case tensor.Float64, tensor.Float16, tensor.BFloat16:
		d := make([]float64, len(v))
		for i, s := range v {
			f, err := parseFloat(s, 64)
			if err != nil {
				return nil, err
			}
			d[i] = f
		}
		return fromFloats(d, to), nil
	case tensor.Bool:
		d := make([]bool, len(v))
		for i, s := range v {
			switch strings.ToLower(strings.TrimSpace(s)) {
			case "true":
				d[i] = true
			case "false":
			default:
				f, err := parseFloat(s, 64)
				if err != nil {
					return nil, err
				}
				d[i] = f != 0
			}
		}
		return d, nil
	case tensor.Uint64:
		d := make([]uint64, len(v))
		for i, s := range v {
			u, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				f, ferr := parseFloat(s, 64)
				if ferr != nil {
					return nil, ferr
				}
				u = fromFloats([]float64{f}, tensor.Uint64).([]uint64)[0]
			}
			d[i] = u
		}
		return d, nil
	}
	iv := make([]int64, len(v))
	for i, s := range v {
		x, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			f, ferr := parseFloat(s, 64)
			if ferr != nil {
				return nil, ferr
			}
			x = truncInt(f)
		}
		iv[i] = x
	}
	return fromInts(iv, to), nil
}
