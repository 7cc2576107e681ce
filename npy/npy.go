// Package npy reads and writes NumPy .npy files (format versions 1.0, 2.0
// and 3.0) holding little-endian numeric or bool arrays in C order.
//
// The format: the magic "\x93NUMPY", a major and minor version byte, a
// header length (2 bytes little-endian in version 1, 4 bytes in versions 2
// and 3), then an ASCII (version 3: UTF-8) Python dict literal with keys
// 'descr', 'fortran_order' and 'shape', padded with spaces and a newline,
// then the raw data. Fortran-ordered, big-endian, object and structured
// arrays are refused with an error.
//
// String tensors are NumPy's fixed-width unicode arrays, what numpy.save
// writes for np.array(['a', 'bb']): descr '<U2', each element 2 UTF-32LE
// code points, shorter strings padded with NUL code points (which are
// stripped on reading, as NumPy does). Encode writes the width of the
// longest element (at least 1); Decode also reads byte strings ('|S3':
// each element 3 bytes, NUL padded). Object arrays ('|O') hold Python
// pickles and are refused. A width is at most 2^20 characters, and every
// element must be valid Unicode (no surrogates, nothing past U+10FFFF).
package npy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

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
	h, err := parseHeader(string(b[off : off+hlen]))
	if err != nil {
		return nil, err
	}
	dt, shape := h.dt, h.shape
	data := b[off+hlen:]
	n := int64(1)
	for _, d := range shape {
		if d > 0 && n > (1<<40)/int64(d) {
			return nil, fmt.Errorf("npy: shape %v is too large", shape)
		}
		n *= int64(d)
	}
	size := int64(dt.Size())
	if dt == tensor.String {
		size = int64(h.width) * int64(h.unit)
	}
	if want := n * size; int64(len(data)) != want {
		return nil, fmt.Errorf("npy: %s%v needs %d data bytes, file has %d", h.descr, shape, want, len(data))
	}
	if dt == tensor.String {
		return decodeStrings(h, shape, data)
	}
	return tensor.FromRaw(dt, shape, data)
}

// maxWidth bounds the characters of one fixed-width string element.
const maxWidth = 1 << 20

// header is a parsed .npy header.
type header struct {
	descr string
	dt    tensor.DType
	shape []int
	// width and unit: a string element is width units of unit bytes
	// (4: UTF-32LE code points, 1: bytes).
	width, unit int
}

// stringDescr parses '<U7' (unicode, 7 code points) and '|S7' or 'S7'
// (7 bytes); ok false for any other descr.
func stringDescr(d string) (width, unit int, ok bool, err error) {
	var num string
	switch {
	case strings.HasPrefix(d, "<U"):
		num, unit = d[2:], 4
	case strings.HasPrefix(d, "|S"):
		num, unit = d[2:], 1
	case strings.HasPrefix(d, "S"):
		num, unit = d[1:], 1
	default:
		return 0, 0, false, nil
	}
	w, e := strconv.Atoi(num)
	if e != nil || w < 1 || w > maxWidth {
		return 0, 0, true, fmt.Errorf("npy: string dtype %q: the width must be 1 to %d", d, maxWidth)
	}
	return w, unit, true, nil
}

func decodeStrings(h header, shape []int, data []byte) (*tensor.Tensor, error) {
	step := h.width * h.unit
	out := make([]string, len(data)/step)
	for i := range out {
		el := data[i*step : (i+1)*step]
		if h.unit == 1 {
			out[i] = strings.TrimRight(string(el), "\x00")
			continue
		}
		var sb strings.Builder
		end := len(el)
		for end >= 4 && binary.LittleEndian.Uint32(el[end-4:end]) == 0 {
			end -= 4
		}
		for k := 0; k < end; k += 4 {
			c := binary.LittleEndian.Uint32(el[k : k+4])
			if c > utf8.MaxRune || (c >= 0xd800 && c <= 0xdfff) {
				return nil, fmt.Errorf("npy: element %d holds %#x, not a Unicode code point", i, c)
			}
			sb.WriteRune(rune(c))
		}
		out[i] = sb.String()
	}
	return tensor.From(out, shape...), nil
}

func parseHeader(h string) (header, error) {
	dt, descr, width, unit, shape, err := parseDict(h)
	return header{descr: descr, dt: dt, shape: shape, width: width, unit: unit}, err
}

func parseDict(h string) (dt tensor.DType, descr string, width, unit int, shape []int, err error) {
	fail := func(e error) (tensor.DType, string, int, int, []int, error) { return 0, "", 0, 0, nil, e }
	h = strings.TrimSpace(h)
	if !strings.HasPrefix(h, "{") || !strings.HasSuffix(strings.TrimRight(h, ", "), "}") {
		return fail(fmt.Errorf("npy: header is not a dict: %q", h))
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
		return fail(fmt.Errorf("npy: header has no descr: %q", h))
	}
	d = d[1:]
	end := strings.IndexByte(d, '\'')
	if end < 0 {
		return fail(fmt.Errorf("npy: bad descr in %q", h))
	}
	descr = d[:end]
	if width, unit, ok, err = stringDescr(descr); err != nil {
		return fail(err)
	}
	if ok {
		dt = tensor.String
	} else if dt, ok = descrs[descr]; !ok {
		return fail(fmt.Errorf("npy: unsupported dtype %q (little-endian numeric or bool, '<U' unicode or '|S' bytes)", descr))
	}
	f, ok := get("fortran_order")
	if !ok {
		return fail(fmt.Errorf("npy: header has no fortran_order"))
	}
	if strings.HasPrefix(f, "True") {
		return fail(fmt.Errorf("npy: Fortran-ordered arrays are not supported"))
	}
	s, ok := get("shape")
	if !ok || !strings.HasPrefix(s, "(") {
		return fail(fmt.Errorf("npy: header has no shape"))
	}
	end = strings.IndexByte(s, ')')
	if end < 0 {
		return fail(fmt.Errorf("npy: bad shape in %q", h))
	}
	for _, p := range strings.Split(s[1:end], ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		v, e := strconv.Atoi(strings.TrimSuffix(p, "L"))
		if e != nil || v < 0 || v > 1<<40 {
			return fail(fmt.Errorf("npy: bad dimension %q", p))
		}
		shape = append(shape, v)
	}
	return dt, descr, width, unit, shape, nil
}

// Encode writes t as a version 1.0 .npy file.
func Encode(w io.Writer, t *tensor.Tensor) error {
	var descr string
	for k, v := range descrs {
		if v == t.DType && (k[0] == '<' || k[0] == '|') {
			descr = k
		}
	}
	strs, isStr := t.Data.([]string)
	width := 1
	if isStr {
		for _, e := range strs {
			width = max(width, utf8.RuneCountInString(e))
		}
		if width > maxWidth {
			return fmt.Errorf("npy: a string of %d characters is wider than %d", width, maxWidth)
		}
		descr = fmt.Sprintf("<U%d", width)
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
	if isStr {
		for _, e := range strs {
			k := 0
			for _, c := range e {
				binary.Write(&buf, binary.LittleEndian, uint32(c))
				k++
			}
			buf.Write(make([]byte, 4*(width-k)))
		}
	} else {
		buf.Write(tensor.RawBytes(t))
	}
	_, err := w.Write(buf.Bytes())
	return err
}
