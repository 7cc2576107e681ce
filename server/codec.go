package server

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

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
	Explain      bool            // parameters.explain: return the reasons in the response
}

type outputRequest struct {
	Name   string
	Binary bool
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
	t, err := tensor.FromRaw(dt, shape, raw)
	if err != nil {
		return nil, fmt.Errorf("input %q: %v", name, err)
	}
	return t, nil
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
	return tensor.RawBytes(t)
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
