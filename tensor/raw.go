package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The raw encoding of a numeric tensor is its elements in row-major order,
// each in little-endian byte order at its DType's Size: IEEE 754 bits for
// the floating-point types (Float16 and BFloat16 as their 16 bits), two's
// complement for the signed integers, one byte 0 or 1 for Bool. It is the
// layout of ONNX's raw_data, of .npy files, of plan weights, of the OIP
// binary extension and of the data part of the audit input digest. Strings
// have no raw encoding.
//
// Every package that turns tensors into bytes or back uses these functions,
// so the layout is written once.

// FromRaw decodes raw-encoded element bytes into a tensor of the given
// type and shape. len(raw) must be exactly NumElems(shape)*dt.Size(). A
// Bool byte other than 0 reads as true; use FromRawStrict to refuse it.
func FromRaw(dt DType, shape []int, raw []byte) (*Tensor, error) {
	return fromRaw(dt, shape, raw, false)
}

// FromRawStrict is FromRaw that refuses a Bool byte other than 0 or 1, for
// encodings where exactly one byte string stands for each tensor (digests,
// audit captures).
func FromRawStrict(dt DType, shape []int, raw []byte) (*Tensor, error) {
	return fromRaw(dt, shape, raw, true)
}

func fromRaw(dt DType, shape []int, raw []byte, strict bool) (*Tensor, error) {
	if dt == String || !dt.Supported() {
		return nil, fmt.Errorf("tensor: no raw encoding for %v", dt)
	}
	if want := NumElems(shape) * dt.Size(); len(raw) != want {
		return nil, fmt.Errorf("tensor: %v%v needs %d bytes, got %d", dt, shape, want, len(raw))
	}
	t := New(dt, shape...)
	le := binary.LittleEndian
	switch d := t.Data.(type) {
	case []float32:
		for i := range d {
			d[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
	case []float64:
		for i := range d {
			d[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
		}
	case []Half:
		for i := range d {
			d[i] = Half(le.Uint16(raw[2*i:]))
		}
	case []BHalf:
		for i := range d {
			d[i] = BHalf(le.Uint16(raw[2*i:]))
		}
	case []int8:
		for i := range d {
			d[i] = int8(raw[i])
		}
	case []uint8:
		copy(d, raw)
	case []bool:
		for i := range d {
			if strict && raw[i] > 1 {
				return nil, fmt.Errorf("tensor: bool element %d is %d", i, raw[i])
			}
			d[i] = raw[i] != 0
		}
	case []int16:
		for i := range d {
			d[i] = int16(le.Uint16(raw[2*i:]))
		}
	case []uint16:
		for i := range d {
			d[i] = le.Uint16(raw[2*i:])
		}
	case []int32:
		for i := range d {
			d[i] = int32(le.Uint32(raw[4*i:]))
		}
	case []uint32:
		for i := range d {
			d[i] = le.Uint32(raw[4*i:])
		}
	case []int64:
		for i := range d {
			d[i] = int64(le.Uint64(raw[8*i:]))
		}
	case []uint64:
		for i := range d {
			d[i] = le.Uint64(raw[8*i:])
		}
	default:
		return nil, fmt.Errorf("tensor: no raw encoding for %v", dt)
	}
	return t, nil
}

// RawBytes returns the raw encoding of a numeric tensor's elements. It
// returns nil for strings and for types with no raw encoding.
func RawBytes(t *Tensor) []byte {
	size := t.DType.Size()
	if size == 0 {
		return nil
	}
	return AppendRaw(make([]byte, 0, t.Len()*size), t, 0, t.Len())
}

// AppendRaw appends the raw encoding of elements [from, to) of a numeric
// tensor to b and returns the extended slice, so that a large tensor can
// be encoded in bounded pieces (the audit digest streams it into a hash).
// It appends nothing for strings. The range must lie within the tensor.
func AppendRaw(b []byte, t *Tensor, from, to int) []byte {
	le := binary.LittleEndian
	switch d := t.Data.(type) {
	case []float32:
		for _, v := range d[from:to] {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
	case []float64:
		for _, v := range d[from:to] {
			b = le.AppendUint64(b, math.Float64bits(v))
		}
	case []Half:
		for _, v := range d[from:to] {
			b = le.AppendUint16(b, uint16(v))
		}
	case []BHalf:
		for _, v := range d[from:to] {
			b = le.AppendUint16(b, uint16(v))
		}
	case []int8:
		for _, v := range d[from:to] {
			b = append(b, byte(v))
		}
	case []uint8:
		b = append(b, d[from:to]...)
	case []bool:
		for _, v := range d[from:to] {
			if v {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	case []int16:
		for _, v := range d[from:to] {
			b = le.AppendUint16(b, uint16(v))
		}
	case []uint16:
		for _, v := range d[from:to] {
			b = le.AppendUint16(b, v)
		}
	case []int32:
		for _, v := range d[from:to] {
			b = le.AppendUint32(b, uint32(v))
		}
	case []uint32:
		for _, v := range d[from:to] {
			b = le.AppendUint32(b, v)
		}
	case []int64:
		for _, v := range d[from:to] {
			b = le.AppendUint64(b, uint64(v))
		}
	case []uint64:
		for _, v := range d[from:to] {
			b = le.AppendUint64(b, v)
		}
	}
	return b
}
