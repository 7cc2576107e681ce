package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unsafe"

	"github.com/vouchml/vouch/tensor"
)

// Limits bound what one inference request may make the server hold,
// whichever protocol carried it. Every bound is checked from the shapes a
// request declares, before the memory they claim is allocated. The zero
// value takes the defaults.
type Limits struct {
	// TensorBytes bounds the bytes of a request's input tensors together
	// (elements × dtype size; BYTES elements by their length); a request
	// over it is answered 413. Default 256 MiB.
	TensorBytes int64
	// Inputs bounds the input tensors of one request (400 beyond).
	// Default 64.
	Inputs int
}

func (l Limits) withDefaults() Limits {
	if l.TensorBytes <= 0 {
		l.TensorBytes = 256 << 20
	}
	if l.Inputs <= 0 {
		l.Inputs = 64
	}
	return l
}

// errTooLarge marks a request refused for the memory it claims (413).
var errTooLarge = errors.New("request too large")

// budget tracks the tensor bytes a request has claimed so far.
type budget struct {
	lim  Limits
	used int64
}

// input checks the header of input i of req: a name not given before, a
// known datatype, a shape within bounds; and claims its bytes.
func (b *budget) input(req *inferRequest, i int, name, datatype string, shape64 []int64) (tensor.DType, []int, int, error) {
	if name == "" {
		return 0, nil, 0, fmt.Errorf("input %d has no name", i)
	}
	if _, dup := req.Inputs[name]; dup {
		return 0, nil, 0, fmt.Errorf("input %q given twice", name)
	}
	dt, shape, n, err := checkTensorHeader(name, datatype, shape64)
	if err == nil {
		err = b.claim(name, dt, shape, n)
	}
	return dt, shape, n, err
}

// claim reserves the bytes of an n-element tensor of dt, before they are
// allocated.
func (b *budget) claim(name string, dt tensor.DType, shape []int, n int) error {
	size := int64(dt.Size())
	if dt == tensor.String {
		size = 0 // counted by their length as they are read
	}
	return b.add(name, shape, int64(n)*size)
}

func (b *budget) add(name string, shape []int, bytes int64) error {
	if b.used+bytes > b.lim.TensorBytes {
		return fmt.Errorf("%w: input %q %v needs %d bytes, over the request budget of %d bytes (%d already claimed)",
			errTooLarge, name, shape, bytes, b.lim.TensorBytes, b.used)
	}
	b.used += bytes
	return nil
}

// requestJSON is the OIP v2 inference request body.
type requestJSON struct {
	ID         string          `json:"id"`
	Parameters map[string]any  `json:"parameters"`
	Inputs     []inputJSON     `json:"inputs"`
	Outputs    []outputReqJSON `json:"outputs"`
}

type inputJSON struct {
	Name       string         `json:"name"`
	Shape      []int64        `json:"shape"`
	Datatype   string         `json:"datatype"`
	Parameters map[string]any `json:"parameters"`
	Data       jsonSpan       `json:"data"`
}

type outputReqJSON struct {
	Name       string         `json:"name"`
	Parameters map[string]any `json:"parameters"`
}

// jsonSpan is a JSON value kept as the bytes of the request body it spans:
// json.Unmarshal hands an Unmarshaler a slice of its input, and the body
// outlives the decode, so the tensor data is never copied before it is
// converted.
type jsonSpan []byte

func (v *jsonSpan) UnmarshalJSON(b []byte) error { *v = b; return nil }

// decodeRequest decodes an HTTP inference request body. headerLen is the
// Inference-Header-Content-Length header (-1 when absent): the JSON part's
// length, the binary tensor data following it. Errors are the client's;
// those wrapping errTooLarge are over lim.
func decodeRequest(body []byte, headerLen int, lim Limits) (*inferRequest, error) {
	lim = lim.withDefaults()
	js, bin := body, []byte(nil)
	if headerLen >= 0 {
		if headerLen > len(body) {
			return nil, fmt.Errorf("Inference-Header-Content-Length %d exceeds the body's %d bytes", headerLen, len(body))
		}
		js, bin = body[:headerLen], body[headerLen:]
	}
	var rj requestJSON
	if err := json.Unmarshal(js, &rj); err != nil {
		return nil, fmt.Errorf("malformed JSON request: %v", err)
	}
	req := &inferRequest{ID: rj.ID, Inputs: map[string]*tensor.Tensor{}}
	if len(rj.Inputs) == 0 {
		return nil, fmt.Errorf("request has no inputs")
	}
	if len(rj.Inputs) > lim.Inputs {
		return nil, fmt.Errorf("request has %d inputs, more than the %d allowed", len(rj.Inputs), lim.Inputs)
	}
	if v, ok, err := boolParam(rj.Parameters, "binary_data_output"); err != nil {
		return nil, err
	} else if ok {
		req.BinaryOutput = v
	}
	if v, ok, err := boolParam(rj.Parameters, "explain"); err != nil {
		return nil, err
	} else if ok {
		req.Explain = v
	}
	bud := &budget{lim: lim}
	for i, in := range rj.Inputs {
		dt, shape, n, err := bud.input(req, i, in.Name, in.Datatype, in.Shape)
		if err != nil {
			return nil, err
		}
		var t *tensor.Tensor
		if size, ok, err := intParam(in.Parameters, "binary_data_size"); err != nil {
			return nil, fmt.Errorf("input %q: %v", in.Name, err)
		} else if ok {
			if headerLen < 0 {
				return nil, fmt.Errorf("input %q has binary_data_size but the request has no Inference-Header-Content-Length", in.Name)
			}
			if size > int64(len(bin)) {
				return nil, fmt.Errorf("input %q: binary_data_size %d exceeds the %d binary bytes left", in.Name, size, len(bin))
			}
			if len(in.Data) > 0 && string(in.Data) != "null" {
				return nil, fmt.Errorf("input %q has both binary data and JSON data", in.Name)
			}
			if t, err = decodeRaw(in.Name, dt, shape, n, bin[:size]); err != nil {
				return nil, err
			}
			bin = bin[size:]
		} else {
			if len(in.Data) == 0 {
				return nil, fmt.Errorf("input %q has no data", in.Name)
			}
			if t, err = decodeJSONData(in.Name, dt, shape, n, in.Data, bud); err != nil {
				return nil, err
			}
		}
		req.Inputs[in.Name] = t
	}
	if len(bin) > 0 {
		return nil, fmt.Errorf("%d bytes of binary data are not claimed by any input", len(bin))
	}
	for _, o := range rj.Outputs {
		if o.Name == "" {
			return nil, fmt.Errorf("requested output has no name")
		}
		or := outputRequest{Name: o.Name, Binary: req.BinaryOutput}
		if v, ok, err := boolParam(o.Parameters, "binary_data"); err != nil {
			return nil, fmt.Errorf("output %q: %v", o.Name, err)
		} else if ok {
			or.Binary = v
		}
		req.Outputs = append(req.Outputs, or)
	}
	return req, nil
}

func boolParam(p map[string]any, key string) (bool, bool, error) {
	v, ok := p[key]
	if !ok {
		return false, false, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, false, fmt.Errorf("parameter %s must be a boolean", key)
	}
	return b, true, nil
}

func intParam(p map[string]any, key string) (int64, bool, error) {
	v, ok := p[key]
	if !ok {
		return 0, false, nil
	}
	f, isNum := v.(float64)
	if !isNum || f < 0 || f != math.Trunc(f) || f > 1<<53 {
		return 0, false, fmt.Errorf("parameter %s must be a non-negative integer", key)
	}
	return int64(f), true, nil
}

// decodeJSONData decodes a tensor's "data": a flat row-major array, or
// arrays nested as the shape (any nesting is flattened in order). Each
// element is converted straight into the tensor's typed slice, which is
// allocated once its size is known to fit both the data (every element
// takes at least two bytes of JSON with its separator) and the budget.
// Floats may also be the strings "NaN", "Infinity" and "-Infinity", as
// responses write them; null is no number.
func decodeJSONData(name string, dt tensor.DType, shape []int, n int, data []byte, bud *budget) (*tensor.Tensor, error) {
	if n > 0 && int64(n) > int64(len(data)+1)/2 {
		return nil, fmt.Errorf("input %q: shape %v needs %d elements; its %d bytes of data hold fewer", name, shape, n, len(data))
	}
	var (
		v   any
		got int
		err error
	)
	switch dt {
	case tensor.Float32:
		v, got, err = parseData(data, n, func(tok []byte) (float32, error) {
			f, err := parseFloat(tok, 32)
			return float32(f), err
		})
	case tensor.Float64:
		v, got, err = parseData(data, n, func(tok []byte) (float64, error) { return parseFloat(tok, 64) })
	case tensor.Float16:
		v, got, err = parseData(data, n, func(tok []byte) (tensor.Half, error) {
			f, err := parseFloat(tok, 64)
			return tensor.ToHalf(float32(f)), err
		})
	case tensor.BFloat16:
		v, got, err = parseData(data, n, func(tok []byte) (tensor.BHalf, error) {
			f, err := parseFloat(tok, 64)
			return tensor.ToBHalf(float32(f)), err
		})
	case tensor.Int8:
		v, got, err = parseData(data, n, intParser[int8](math.MinInt8, math.MaxInt8, "INT8"))
	case tensor.Int16:
		v, got, err = parseData(data, n, intParser[int16](math.MinInt16, math.MaxInt16, "INT16"))
	case tensor.Int32:
		v, got, err = parseData(data, n, intParser[int32](math.MinInt32, math.MaxInt32, "INT32"))
	case tensor.Int64:
		v, got, err = parseData(data, n, intParser[int64](math.MinInt64, math.MaxInt64, "INT64"))
	case tensor.Uint8:
		v, got, err = parseData(data, n, intParser[uint8](0, math.MaxUint8, "UINT8"))
	case tensor.Uint16:
		v, got, err = parseData(data, n, intParser[uint16](0, math.MaxUint16, "UINT16"))
	case tensor.Uint32:
		v, got, err = parseData(data, n, intParser[uint32](0, math.MaxUint32, "UINT32"))
	case tensor.Uint64:
		v, got, err = parseData(data, n, func(tok []byte) (uint64, error) {
			u, err := strconv.ParseUint(tokString(tok), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s is not a UINT64", shortTok(tok))
			}
			return u, nil
		})
	case tensor.Bool:
		v, got, err = parseData(data, n, func(tok []byte) (bool, error) {
			switch string(tok) {
			case "true":
				return true, nil
			case "false":
				return false, nil
			}
			return false, fmt.Errorf("%s is not a boolean", shortTok(tok))
		})
	case tensor.String:
		v, got, err = parseData(data, n, func(tok []byte) (string, error) {
			var s string
			if tok[0] != '"' || json.Unmarshal(tok, &s) != nil {
				return "", fmt.Errorf("%s is not a string", shortTok(tok))
			}
			return s, bud.add(name, shape, int64(len(s)))
		})
	default:
		return nil, fmt.Errorf("input %q: %s data cannot be given as JSON", name, oipType(dt))
	}
	if err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("input %q: %v", name, err)
	}
	if got != n {
		return nil, fmt.Errorf("input %q: shape %v needs %d elements, got %d", name, shape, n, got)
	}
	return &tensor.Tensor{DType: dt, Shape: shape, Data: v}, nil
}

// parseData converts the leaves of a JSON array (nested arrays flattened in
// order) with conv into a slice of n elements, and returns how many there
// were; more than n is an error, found before anything is written past n.
func parseData[T any](data []byte, n int, conv func(tok []byte) (T, error)) ([]T, int, error) {
	out := make([]T, n)
	got, err := walkArray(data, n, func(i int, tok []byte) error {
		v, err := conv(tok)
		if err != nil {
			if errors.Is(err, errTooLarge) {
				return err
			}
			return fmt.Errorf("element %d: %w", i, err)
		}
		out[i] = v
		return nil
	})
	return out, got, err
}

// walkArray calls leaf with each scalar of the JSON array data, in order,
// at most limit times; arrays may nest 32 deep. data is a value that
// json.Unmarshal has already checked to be valid JSON.
func walkArray(data []byte, limit int, leaf func(i int, tok []byte) error) (int, error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return 0, fmt.Errorf("data must be an array, got %s", shortTok(data[i:]))
	}
	depth, count := 0, 0
	for i < len(data) {
		switch c := data[i]; c {
		case '[':
			if depth++; depth > 32 {
				return count, fmt.Errorf("data nested more than 32 deep")
			}
			i++
		case ']':
			depth--
			i++
			if depth == 0 {
				return count, nil
			}
		case ',', ' ', '\t', '\n', '\r':
			i++
		case '{':
			return count, fmt.Errorf("element %d: an object is not a tensor element", count)
		default:
			j := scanScalar(data, i)
			if count >= limit {
				return count, fmt.Errorf("more data elements than the shape holds (%d)", limit)
			}
			if err := leaf(count, data[i:j]); err != nil {
				return count, err
			}
			count++
			i = j
		}
	}
	return count, fmt.Errorf("data: unterminated array")
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanScalar returns the end of the string, number or literal at b[i].
func scanScalar(b []byte, i int) int {
	if b[i] == '"' {
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// tokString views a token as a string without copying it; the string must
// not outlive the call it is passed to (strconv keeps it only in errors,
// which are formatted from shortTok instead).
func tokString(tok []byte) string { return unsafe.String(unsafe.SliceData(tok), len(tok)) }

// shortTok is a token as an error message shows it: at most 32 bytes.
func shortTok(tok []byte) string {
	if len(tok) > 32 {
		return strconv.Quote(string(tok[:32])) + "…"
	}
	return string(tok)
}

// parseFloat reads a JSON number, or one of the strings "NaN", "Infinity"
// and "-Infinity", as a float of bits; a finite number out of its range is
// an error.
func parseFloat(tok []byte, bits int) (float64, error) {
	switch string(tok) {
	case `"NaN"`:
		return math.NaN(), nil
	case `"Infinity"`:
		return math.Inf(1), nil
	case `"-Infinity"`:
		return math.Inf(-1), nil
	}
	if c := tok[0]; c != '-' && (c < '0' || c > '9') {
		return 0, fmt.Errorf("%s is not a number", shortTok(tok))
	}
	f, err := strconv.ParseFloat(tokString(tok), bits)
	if err != nil {
		return 0, fmt.Errorf("%s is out of range or not a number", shortTok(tok))
	}
	return f, nil
}

type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32
}

// intParser converts a JSON integer in [lo, hi] to T.
func intParser[T integer](lo, hi int64, name string) func(tok []byte) (T, error) {
	return func(tok []byte) (T, error) {
		v, err := strconv.ParseInt(tokString(tok), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s is not an integer", shortTok(tok))
		}
		if v < lo || v > hi {
			return 0, fmt.Errorf("%d is out of range for %s", v, name)
		}
		return T(v), nil
	}
}
