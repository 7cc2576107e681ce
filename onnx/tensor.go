package onnx

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vouchml/vouch/onnx/onnxpb"
	"github.com/vouchml/vouch/tensor"
	"google.golang.org/protobuf/proto"
)

// maxElems caps the element count of any decoded tensor (2^31): a hostile
// file cannot make vouch allocate beyond what its bytes justify, and this
// bound keeps shape arithmetic far from overflow.
const maxElems = 1 << 31

// DecodeTensor decodes a serialized TensorProto (a .pb file of the ONNX
// test-data layout). External data is refused: use DecodeTensorFile.
func DecodeTensor(b []byte) (*tensor.Tensor, error) {
	var tp onnxpb.TensorProto
	if err := proto.Unmarshal(b, &tp); err != nil {
		return nil, fmt.Errorf("onnx: decoding TensorProto: %w", err)
	}
	return TensorFromProto(&tp, "")
}

// DecodeTensorFile reads and decodes a TensorProto file; external data is
// resolved relative to the file's directory.
func DecodeTensorFile(path string) (*tensor.Tensor, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("onnx: %w", err)
	}
	var tp onnxpb.TensorProto
	if err := proto.Unmarshal(b, &tp); err != nil {
		return nil, "", fmt.Errorf("onnx: %s: decoding TensorProto: %w", path, err)
	}
	t, err := TensorFromProto(&tp, filepath.Dir(path))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return t, tp.GetName(), nil
}

// TensorFromProto converts a TensorProto. dir is where external data files
// live ("" refuses external data).
func TensorFromProto(tp *onnxpb.TensorProto, dir string) (*tensor.Tensor, error) {
	dt := tensor.DType(tp.GetDataType())
	name := tp.GetName()
	if !dt.Supported() {
		return nil, fmt.Errorf("onnx: tensor %q: unsupported data type %v", name, dt)
	}
	if tp.Segment != nil {
		return nil, fmt.Errorf("onnx: tensor %q: segmented tensors are not supported", name)
	}
	shape := make([]int, len(tp.Dims))
	n := int64(1)
	for i, d := range tp.Dims {
		if d < 0 {
			return nil, fmt.Errorf("onnx: tensor %q: negative dimension %d", name, d)
		}
		if d > maxElems || (d > 0 && n > maxElems/d) {
			return nil, fmt.Errorf("onnx: tensor %q: shape %v has too many elements", name, tp.Dims)
		}
		n *= d
		shape[i] = int(d)
	}
	raw := tp.RawData
	if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		var err error
		raw, err = readExternal(tp, dir, n*int64(dt.Size()))
		if err != nil {
			return nil, err
		}
	}
	if raw != nil && dt != tensor.String {
		want := n * int64(dt.Size())
		if int64(len(raw)) != want {
			return nil, fmt.Errorf("onnx: tensor %q: %v%v needs %d bytes of raw data, has %d", name, dt, shape, want, len(raw))
		}
		return tensor.FromRaw(dt, shape, raw)
	}
	return fromTyped(tp, dt, shape, int(n))
}

func readExternal(tp *onnxpb.TensorProto, dir string, want int64) ([]byte, error) {
	name := tp.GetName()
	if dir == "" {
		return nil, fmt.Errorf("onnx: tensor %q: external data is not allowed here", name)
	}
	var loc string
	var off, length int64 = 0, -1
	for _, kv := range tp.ExternalData {
		var err error
		switch kv.GetKey() {
		case "location":
			loc = kv.GetValue()
		case "offset":
			off, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		case "length":
			length, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		}
		if err != nil || off < 0 {
			return nil, fmt.Errorf("onnx: tensor %q: bad external_data %s=%q", name, kv.GetKey(), kv.GetValue())
		}
	}
	if loc == "" || filepath.IsAbs(loc) || strings.Contains(filepath.ToSlash(loc), "..") {
		return nil, fmt.Errorf("onnx: tensor %q: external data location %q must be a relative path inside the model's directory", name, loc)
	}
	if length < 0 {
		length = want
	}
	if length != want {
		return nil, fmt.Errorf("onnx: tensor %q: external data length %d, shape needs %d bytes", name, length, want)
	}
	f, err := openExternal(dir, loc)
	if err != nil {
		return nil, fmt.Errorf("onnx: tensor %q: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("onnx: tensor %q: %w", name, err)
	}
	if off+length > st.Size() {
		return nil, fmt.Errorf("onnx: tensor %q: external data %s[%d:%d] is past the end of the file (%d bytes)", name, loc, off, off+length, st.Size())
	}
	buf := make([]byte, length)
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("onnx: tensor %q: reading %s: %w", name, loc, err)
	}
	return buf, nil
}

func fromTyped(tp *onnxpb.TensorProto, dt tensor.DType, shape []int, n int) (*tensor.Tensor, error) {
	name := tp.GetName()
	count := func(got int, field string) error {
		if got != n {
			return fmt.Errorf("onnx: tensor %q: %v%v needs %d values, %s has %d", name, dt, shape, n, field, got)
		}
		return nil
	}
	t := &tensor.Tensor{DType: dt, Shape: shape}
	switch dt {
	case tensor.Float32:
		if err := count(len(tp.FloatData), "float_data"); err != nil {
			return nil, err
		}
		t.Data = append([]float32{}, tp.FloatData...)
	case tensor.Float64:
		if err := count(len(tp.DoubleData), "double_data"); err != nil {
			return nil, err
		}
		t.Data = append([]float64{}, tp.DoubleData...)
	case tensor.Int64:
		if err := count(len(tp.Int64Data), "int64_data"); err != nil {
			return nil, err
		}
		t.Data = append([]int64{}, tp.Int64Data...)
	case tensor.Uint32, tensor.Uint64:
		if err := count(len(tp.Uint64Data), "uint64_data"); err != nil {
			return nil, err
		}
		if dt == tensor.Uint64 {
			t.Data = append([]uint64{}, tp.Uint64Data...)
		} else {
			d := make([]uint32, n)
			for i, v := range tp.Uint64Data {
				d[i] = uint32(v)
			}
			t.Data = d
		}
	case tensor.String:
		if err := count(len(tp.StringData), "string_data"); err != nil {
			return nil, err
		}
		d := make([]string, n)
		for i, v := range tp.StringData {
			d[i] = string(v)
		}
		t.Data = d
	default: // int32_data carries int8..int32, uint8, uint16, bool, float16, bfloat16
		if err := count(len(tp.Int32Data), "int32_data"); err != nil {
			return nil, err
		}
		t.Data = tensor.MakeSlice(dt, n)
		v := tp.Int32Data
		switch d := t.Data.(type) {
		case []int32:
			copy(d, v)
		case []int16:
			for i := range d {
				d[i] = int16(v[i])
			}
		case []int8:
			for i := range d {
				d[i] = int8(v[i])
			}
		case []uint8:
			for i := range d {
				d[i] = uint8(v[i])
			}
		case []uint16:
			for i := range d {
				d[i] = uint16(v[i])
			}
		case []bool:
			for i := range d {
				d[i] = v[i] != 0
			}
		case []tensor.Half:
			for i := range d {
				d[i] = tensor.Half(v[i])
			}
		case []tensor.BHalf:
			for i := range d {
				d[i] = tensor.BHalf(v[i])
			}
		}
	}
	return t, nil
}

// EncodeTensor serializes t as a TensorProto named name, numeric data in
// raw_data (little-endian), strings in string_data.
func EncodeTensor(t *tensor.Tensor, name string) ([]byte, error) {
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("onnx: encoding %q: %w", name, err)
	}
	tp := &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(t.DType))}
	for _, d := range t.Shape {
		tp.Dims = append(tp.Dims, int64(d))
	}
	if s, ok := t.Data.([]string); ok {
		for _, v := range s {
			tp.StringData = append(tp.StringData, []byte(v))
		}
	} else {
		tp.RawData = tensor.RawBytes(t)
	}
	return proto.Marshal(tp)
}
