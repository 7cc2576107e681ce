package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/tensor"
)

// maxElems bounds the elements of one request tensor, checked before
// anything is allocated.
const maxElems = 1 << 28

// OIP datatype names (the protocol's tensor data types) and vouch dtypes.
var oipTypes = map[string]tensor.DType{
	"BOOL": tensor.Bool, "UINT8": tensor.Uint8, "UINT16": tensor.Uint16, "UINT32": tensor.Uint32,
	"UINT64": tensor.Uint64, "INT8": tensor.Int8, "INT16": tensor.Int16, "INT32": tensor.Int32,
	"INT64": tensor.Int64, "FP16": tensor.Float16, "FP32": tensor.Float32, "FP64": tensor.Float64,
	"BYTES": tensor.String, "BF16": tensor.BFloat16,
}

// oipType returns the protocol's name for dt.
func oipType(dt tensor.DType) string {
	for k, v := range oipTypes {
		if v == dt {
			return k
		}
	}
	return dt.String()
}

// inferRequest is a decoded inference request, whichever protocol carried it.
type inferRequest struct {
	ID           string
	Inputs       map[string]*tensor.Tensor
	Outputs      []outputRequest // empty: all outputs
	BinaryOutput bool            // binary_data_output: every output in binary
}

type outputRequest struct {
	Name   string
	Binary bool
}

// requestJSON is the OIP v2 inference request body.
type requestJSON struct {
	ID         string          `json:"id"`
	Parameters map[string]any  `json:"parameters"`
	Inputs     []inputJSON     `json:"inputs"`
	Outputs    []outputReqJSON `json:"outputs"`
}

type inputJSON struct {
	Name       string          `json:"name"`
	Shape      []int64         `json:"shape"`
	Datatype   string          `json:"datatype"`
	Parameters map[string]any  `json:"parameters"`
	Data       json.RawMessage `json:"data"`
}

type outputReqJSON struct {
	Name       string         `json:"name"`
	Parameters map[string]any `json:"parameters"`
}

// decodeRequest decodes an HTTP inference request body. headerLen is the
// Inference-Header-Content-Length header (-1 when absent): the JSON part's
// length, the binary tensor data following it. Errors are the client's.
func decodeRequest(body []byte, headerLen int) (*inferRequest, error) {
	js, bin := body, []byte(nil)
	if headerLen >= 0 {
		if headerLen > len(body) {
			return nil, fmt.Errorf("Inference-Header-Content-Length %d exceeds the body's %d bytes", headerLen, len(body))
		}
		js, bin = body[:headerLen], body[headerLen:]
	}
	var rj requestJSON
	dec := json.NewDecoder(bytes.NewReader(js))
	if err := dec.Decode(&rj); err != nil {
		return nil, fmt.Errorf("malformed JSON request: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("malformed JSON request: data after the object")
	}
	req := &inferRequest{ID: rj.ID, Inputs: map[string]*tensor.Tensor{}}
	if len(rj.Inputs) == 0 {
		return nil, fmt.Errorf("request has no inputs")
	}
	if v, ok, err := boolParam(rj.Parameters, "binary_data_output"); err != nil {
		return nil, err
	} else if ok {
		req.BinaryOutput = v
	}
	for i, in := range rj.Inputs {
		if in.Name == "" {
			return nil, fmt.Errorf("input %d has no name", i)
		}
		if _, dup := req.Inputs[in.Name]; dup {
			return nil, fmt.Errorf("input %q given twice", in.Name)
		}
		dt, shape, n, err := checkTensorHeader(in.Name, in.Datatype, in.Shape)
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
			t, err = decodeRaw(in.Name, dt, shape, n, bin[:size])
			if err != nil {
				return nil, err
			}
			bin = bin[size:]
		} else {
			if len(in.Data) == 0 {
				return nil, fmt.Errorf("input %q has no data", in.Name)
			}
			t, err = decodeJSONData(in.Name, dt, shape, n, in.Data)
			if err != nil {
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

// checkTensorHeader validates a tensor's datatype and shape and returns its
// element count.
func checkTensorHeader(name, datatype string, shape64 []int64) (tensor.DType, []int, int, error) {
	dt, ok := oipTypes[datatype]
	if !ok {
		return 0, nil, 0, fmt.Errorf("input %q: unknown datatype %q", name, datatype)
	}
	if len(shape64) > 16 {
		return 0, nil, 0, fmt.Errorf("input %q: rank %d is too large", name, len(shape64))
	}
	shape := make([]int, len(shape64))
	n := 1
	for i, d := range shape64 {
		if d < 0 {
			return 0, nil, 0, fmt.Errorf("input %q: negative dimension %d in shape %v", name, d, shape64)
		}
		if d > maxElems || (d > 0 && n > maxElems/int(d)) {
			return 0, nil, 0, fmt.Errorf("input %q: shape %v exceeds %d elements", name, shape64, maxElems)
		}
		shape[i] = int(d)
		n *= int(d)
	}
	return dt, shape, n, nil
}

// decodeRaw decodes binary tensor data: little-endian elements, BYTES as
// u32 length-prefixed strings.
func decodeRaw(name string, dt tensor.DType, shape []int, n int, raw []byte) (*tensor.Tensor, error) {
	if dt == tensor.String {
		s := make([]string, 0, min(n, len(raw)/4+1))
		for len(raw) > 0 {
			if len(raw) < 4 {
				return nil, fmt.Errorf("input %q: truncated BYTES element", name)
			}
			l := binary.LittleEndian.Uint32(raw)
			if uint64(l) > uint64(len(raw)-4) {
				return nil, fmt.Errorf("input %q: BYTES element of %d bytes exceeds the data", name, l)
			}
			s = append(s, string(raw[4:4+l]))
			raw = raw[4+l:]
		}
		if len(s) != n {
			return nil, fmt.Errorf("input %q: shape %v needs %d BYTES elements, got %d", name, shape, n, len(s))
		}
		return &tensor.Tensor{DType: dt, Shape: shape, Data: s}, nil
	}
	if want := n * dt.Size(); len(raw) != want {
		return nil, fmt.Errorf("input %q: %s%v needs %d bytes of binary data, got %d", name, oipType(dt), shape, want, len(raw))
	}
	t, err := onnx.FromRaw(dt, shape, raw)
	if err != nil {
		return nil, fmt.Errorf("input %q: %v", name, err)
	}
	return t, nil
}

// decodeJSONData decodes a tensor's "data": a flat row-major array, or
// arrays nested as the shape.
func decodeJSONData(name string, dt tensor.DType, shape []int, n int, data json.RawMessage) (*tensor.Tensor, error) {
	t := &tensor.Tensor{DType: dt, Shape: shape}
	var err error
	switch dt {
	case tensor.Float32:
		var v []float32
		if err = json.Unmarshal(data, &v); err == nil {
			t.Data = v
		}
	case tensor.Float64:
		var v []float64
		if err = json.Unmarshal(data, &v); err == nil {
			t.Data = v
		}
	case tensor.Int64:
		var v []int64
		if err = json.Unmarshal(data, &v); err == nil {
			t.Data = v
		}
	case tensor.Int32:
		var v []int32
		if err = json.Unmarshal(data, &v); err == nil {
			t.Data = v
		}
	case tensor.Bool:
		var v []bool
		if err = json.Unmarshal(data, &v); err == nil {
			t.Data = v
		}
	case tensor.String:
		var v []string
		if err = json.Unmarshal(data, &v); err == nil {
			t.Data = v
		}
	default:
		err = errNotFlat
	}
	if err == nil {
		if got := lenOf(t.Data); got != n {
			return nil, fmt.Errorf("input %q: shape %v needs %d elements, got %d", name, shape, n, got)
		}
		return t, nil
	}
	{
		// Nested arrays, or a type without a fast path.
		var tree any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&tree); err != nil {
			return nil, fmt.Errorf("input %q: malformed data: %v", name, err)
		}
		flat := make([]any, 0, min(n, 1<<20))
		if err := flatten(tree, &flat, 0, n); err != nil {
			return nil, fmt.Errorf("input %q: %v", name, err)
		}
		if len(flat) != n {
			return nil, fmt.Errorf("input %q: shape %v needs %d elements, got %d", name, shape, n, len(flat))
		}
		if t.Data, err = convertElems(dt, flat); err != nil {
			return nil, fmt.Errorf("input %q: %v", name, err)
		}
	}
	return t, nil
}

var errNotFlat = fmt.Errorf("no flat fast path")

func lenOf(data any) int {
	switch d := data.(type) {
	case []float32:
		return len(d)
	case []float64:
		return len(d)
	case []int64:
		return len(d)
	case []int32:
		return len(d)
	case []bool:
		return len(d)
	case []string:
		return len(d)
	}
	return -1
}

// flatten appends the leaves of nested JSON arrays in row-major order.
func flatten(v any, out *[]any, depth, limit int) error {
	if depth > 32 {
		return fmt.Errorf("data nested too deeply")
	}
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if err := flatten(e, out, depth+1, limit); err != nil {
				return err
			}
		}
	default:
		if len(*out) >= limit {
			return fmt.Errorf("more data elements than the shape holds (%d)", limit)
		}
		*out = append(*out, x)
	}
	return nil
}

// convertElems converts decoded JSON leaves to the slice type of dt.
func convertElems(dt tensor.DType, flat []any) (any, error) {
	data := tensor.MakeSlice(dt, len(flat))
	for i, e := range flat {
		switch d := data.(type) {
		case []bool:
			b, ok := e.(bool)
			if !ok {
				return nil, fmt.Errorf("element %d: %v is not a boolean", i, e)
			}
			d[i] = b
		case []string:
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("element %d: %v is not a string", i, e)
			}
			d[i] = s
		default:
			num, ok := e.(json.Number)
			if !ok {
				return nil, fmt.Errorf("element %d: %v is not a number", i, e)
			}
			if err := setNumber(data, i, dt, num); err != nil {
				return nil, fmt.Errorf("element %d: %v", i, err)
			}
		}
	}
	return data, nil
}

func setNumber(data any, i int, dt tensor.DType, num json.Number) error {
	if dt.IsFloat() {
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil {
			return fmt.Errorf("%s is not a %s", num, oipType(dt))
		}
		switch d := data.(type) {
		case []float32:
			d[i] = float32(f)
		case []float64:
			d[i] = f
		case []tensor.Half:
			d[i] = tensor.ToHalf(float32(f))
		case []tensor.BHalf:
			d[i] = tensor.ToBHalf(float32(f))
		}
		return nil
	}
	if dt == tensor.Uint64 {
		u, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return fmt.Errorf("%s is not a UINT64", num)
		}
		data.([]uint64)[i] = u
		return nil
	}
	v, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil {
		return fmt.Errorf("%s is not an integer", num)
	}
	bad := func(lo, hi int64) error {
		if v < lo || v > hi {
			return fmt.Errorf("%d is out of range for %s", v, oipType(dt))
		}
		return nil
	}
	switch d := data.(type) {
	case []int8:
		if err := bad(math.MinInt8, math.MaxInt8); err != nil {
			return err
		}
		d[i] = int8(v)
	case []int16:
		if err := bad(math.MinInt16, math.MaxInt16); err != nil {
			return err
		}
		d[i] = int16(v)
	case []int32:
		if err := bad(math.MinInt32, math.MaxInt32); err != nil {
			return err
		}
		d[i] = int32(v)
	case []int64:
		d[i] = v
	case []uint8:
		if err := bad(0, math.MaxUint8); err != nil {
			return err
		}
		d[i] = uint8(v)
	case []uint16:
		if err := bad(0, math.MaxUint16); err != nil {
			return err
		}
		d[i] = uint16(v)
	case []uint32:
		if err := bad(0, math.MaxUint32); err != nil {
			return err
		}
		d[i] = uint32(v)
	}
	return nil
}

// rawBytes is a tensor's binary-extension encoding: little-endian elements
// (bool one byte), BYTES as u32 length-prefixed strings.
func rawBytes(t *tensor.Tensor) []byte {
	if s, ok := t.Data.([]string); ok {
		var b []byte
		for _, e := range s {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(e)))
			b = append(b, e...)
		}
		return b
	}
	return onnx.RawBytes(t)
}

// appendJSONData appends a tensor's elements as a flat JSON array.
// Non-finite floats, which JSON cannot hold, are written as the strings
// "NaN", "Infinity" and "-Infinity".
func appendJSONData(b []byte, t *tensor.Tensor) []byte {
	b = append(b, '[')
	float := func(f float64, bits int) {
		switch {
		case math.IsNaN(f):
			b = append(b, `"NaN"`...)
		case math.IsInf(f, 1):
			b = append(b, `"Infinity"`...)
		case math.IsInf(f, -1):
			b = append(b, `"-Infinity"`...)
		default:
			b = strconv.AppendFloat(b, f, 'g', -1, bits)
		}
	}
	switch d := t.Data.(type) {
	case []float32:
		for i, v := range d {
			if i > 0 {
				b = append(b, ',')
			}
			float(float64(v), 32)
		}
	case []float64:
		for i, v := range d {
			if i > 0 {
				b = append(b, ',')
			}
			float(v, 64)
		}
	case []string:
		for i, v := range d {
			if i > 0 {
				b = append(b, ',')
			}
			q, _ := json.Marshal(v)
			b = append(b, q...)
		}
	case []bool:
		for i, v := range d {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendBool(b, v)
		}
	case []uint64:
		for i, v := range d {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, v, 10)
		}
	default:
		f, _ := t.Float64s()
		for i, v := range f {
			if i > 0 {
				b = append(b, ',')
			}
			if t.DType.IsFloat() {
				float(v, 32)
			} else {
				b = strconv.AppendInt(b, int64(v), 10)
			}
		}
	}
	return append(b, ']')
}
