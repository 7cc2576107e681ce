// Package npy reads and writes NumPy .npy files (format versions 1.0, 2.0
// and 3.0) holding little-endian numeric or bool arrays in C order.
//
// The format: the magic "\x93NUMPY", a major and minor version byte, a
// header length (2 bytes little-endian in version 1, 4 bytes in versions 2
// and 3), then an ASCII (version 3: UTF-8) Python dict literal with keys
// 'descr', 'fortran_order' and 'shape', padded with spaces and a newline,
// then the raw data. Fortran-ordered, big-endian, object and structured
// arrays are refused with an error.
package npy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/tensor"
)

const magic = "\x93NUMPY"

// maxHeader bounds the header dict; real headers are well under 1 KiB.
const maxHeader = 1 << 16

var descrs = map[string]tensor.DType{
	"<f4": tensor.Float32, "<f8": tensor.Float64, "<f2": tensor.Float16,
	"|i1": tensor.Int8, "|u1": tensor.Uint8, "<i2": tensor.Int16, "<u2": tensor.Uint16,
	"<i4": tensor.Int32, "<u4": tensor.Uint32, "<i8": tensor.Int64, "<u8": tensor.Uint64,
	"|b1": tensor.Bool, "i1": tensor.Int8, "u1": tensor.Uint8, "b1": tensor.Bool,
}

// Decode parses a whole .npy file.
func Decode(b []byte) (*tensor.Tensor, error) {
	if len(b) < 10 || string(b[:6]) != magic {
		return nil, fmt.Errorf("npy: not a .npy file (bad magic)")
	}
	major := b[6]
	var hlen, off int
	switch major {
	case 1:
		hlen, off = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return nil, fmt.Errorf("npy: truncated header")
		}
		h := binary.LittleEndian.Uint32(b[8:12])
		if h > maxHeader {
			return nil, fmt.Errorf("npy: header of %d bytes is too long", h)
		}
		hlen, off = int(h), 12
	default:
		return nil, fmt.Errorf("npy: unsupported format version %d.%d", major, b[7])
	}
	if off+hlen > len(b) {
		return nil, fmt.Errorf("npy: truncated header (%d bytes declared, %d present)", hlen, len(b)-off)
	}
	dt, shape, err := parseHeader(string(b[off : off+hlen]))
	if err != nil {
		return nil, err
	}
	data := b[off+hlen:]
	n := int64(1)
	for _, d := range shape {
		if d > 0 && n > (1<<40)/int64(d) {
			return nil, fmt.Errorf("npy: shape %v is too large", shape)
		}
		n *= int64(d)
	}
	if want := n * int64(dt.Size()); int64(len(data)) != want {
		return nil, fmt.Errorf("npy: %v%v needs %d data bytes, file has %d", dt, shape, want, len(data))
	}
	return onnx.FromRaw(dt, shape, data)
}

func parseHeader(h string) (tensor.DType, []int, error) {
	h = strings.TrimSpace(h)
	if !strings.HasPrefix(h, "{") || !strings.HasSuffix(strings.TrimRight(h, ", "), "}") {
		return 0, nil, fmt.Errorf("npy: header is not a dict: %q", h)
	}
	get := func(key string) (string, bool) {
		i := strings.Index(h, "'"+key+"'")
		if i < 0 {
			return "", false
		}
		rest := strings.TrimSpace(h[i+len(key)+2:])
		if !strings.HasPrefix(rest, ":") {
			return "", false
		}
		return strings.TrimSpace(rest[1:]), true
	}
	d, ok := get("descr")
	if !ok || len(d) < 2 || d[0] != '\'' {
		return 0, nil, fmt.Errorf("npy: header has no descr: %q", h)
	}
	d = d[1:]
	end := strings.IndexByte(d, '\'')
	if end < 0 {
		return 0, nil, fmt.Errorf("npy: bad descr in %q", h)
	}
	dt, ok := descrs[d[:end]]
	if !ok {
		return 0, nil, fmt.Errorf("npy: unsupported dtype %q (little-endian numeric or bool only)", d[:end])
	}
	f, ok := get("fortran_order")
	if !ok {
		return 0, nil, fmt.Errorf("npy: header has no fortran_order")
	}
	if strings.HasPrefix(f, "True") {
		return 0, nil, fmt.Errorf("npy: Fortran-ordered arrays are not supported")
	}
	s, ok := get("shape")
	if !ok || !strings.HasPrefix(s, "(") {
		return 0, nil, fmt.Errorf("npy: header has no shape")
	}
	end = strings.IndexByte(s, ')')
	if end < 0 {
		return 0, nil, fmt.Errorf("npy: bad shape in %q", h)
	}
	var shape []int
	for _, p := range strings.Split(s[1:end], ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		v, err := strconv.Atoi(strings.TrimSuffix(p, "L"))
		if err != nil || v < 0 || v > 1<<40 {
			return 0, nil, fmt.Errorf("npy: bad dimension %q", p)
		}
		shape = append(shape, v)
	}
	return dt, shape, nil
}

// Encode writes t as a version 1.0 .npy file.
func Encode(w io.Writer, t *tensor.Tensor) error {
	var descr string
	for k, v := range descrs {
		if v == t.DType && (k[0] == '<' || k[0] == '|') {
			descr = k
		}
	}
	if descr == "" {
		return fmt.Errorf("npy: cannot encode %v", t.DType)
	}
	dims := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = strconv.Itoa(d)
	}
	shape := strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape)
	pad := 64 - (10+len(h)+1)%64
	if pad == 64 {
		pad = 0
	}
	h += strings.Repeat(" ", pad) + "\n"
	var buf bytes.Buffer
	buf.WriteString(magic)
	buf.Write([]byte{1, 0})
	binary.Write(&buf, binary.LittleEndian, uint16(len(h)))
	buf.WriteString(h)
	buf.Write(onnx.RawBytes(t))
	_, err := w.Write(buf.Bytes())
	return err
}
