package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/vouchml/vouch/tensor"
)

// ErrTensors is returned (wrapped) by DecodeTensors for bytes that are not a
// canonical tensor set.
var ErrTensors = errors.New("audit: invalid tensor encoding")

// EncodeTensors returns the canonical encoding of a set of tensors, the
// bytes that [InputDigest] hashes:
//
//	"vouch-tensors-v1\n" | encoding(t₁) | … | encoding(tₙ)
//
// with the tensors in ascending byte order of their names (see the
// encoding of one tensor above TensorDigestOf). So SHA-256 of the result,
// written "sha256:" + hex, is the set's input digest, and a store that keeps
// these bytes can prove what it returns ([DecodeTensors], [DigestOf]).
func EncodeTensors(ts map[string]*tensor.Tensor) ([]byte, error) {
	names := make([]string, 0, len(ts))
	for n, t := range ts {
		if err := t.Check(); err != nil {
			return nil, fmt.Errorf("audit: tensor %q: %w", n, err)
		}
		names = append(names, n)
	}
	slices.Sort(names)
	var b bytes.Buffer
	b.WriteString(tensorsHeader)
	for _, n := range names {
		writeTensor(&b, n, ts[n])
	}
	return b.Bytes(), nil
}

// DigestOf returns "sha256:" + hex of SHA-256(b): for the bytes of
// EncodeTensors, the input digest.
func DigestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// DecodeTensors decodes the output of EncodeTensors. It accepts only the
// canonical form (the header, names strictly ascending, lengths that agree
// with dtypes and shapes, nothing after the last tensor) and returns an
// error, never panics, on anything else.
func DecodeTensors(b []byte) (map[string]*tensor.Tensor, error) {
	if !bytes.HasPrefix(b, []byte(tensorsHeader)) {
		return nil, fmt.Errorf("%w: missing %q header", ErrTensors, tensorsHeader[:len(tensorsHeader)-1])
	}
	d := &tdec{b: b[len(tensorsHeader):]}
	out := map[string]*tensor.Tensor{}
	prev := ""
	for len(d.b) > 0 {
		name := string(d.bytes(int(d.u32())))
		if d.err == nil && (len(out) > 0 && name <= prev || !utf8.ValidString(name)) {
			d.fail("tensor names not in ascending order or not UTF-8 at %q", name)
		}
		prev = name
		dt := tensor.DType(d.u32())
		rank := d.u32()
		if d.err == nil && (rank > 64 || !dt.Supported()) {
			d.fail("tensor %q: rank %d, dtype %d", name, rank, dt)
		}
		shape := make([]int, 0, rank)
		n := uint64(1)
		for range rank {
			dim := d.u64()
			if dim > math.MaxInt32 || (dim > 0 && n > math.MaxInt64/dim) {
				d.fail("tensor %q: dimension %d", name, dim)
			}
			shape = append(shape, int(dim))
			n *= dim
		}
		size := d.u64()
		if d.err != nil {
			return nil, d.err
		}
		if dt != tensor.String && (size != n*uint64(dt.Size()) || size > uint64(len(d.b))) {
			return nil, fmt.Errorf("%w: tensor %q: %d data bytes for %d elements of %v (%d left)", ErrTensors, name, size, n, dt, len(d.b))
		}
		if size > uint64(len(d.b)) {
			return nil, fmt.Errorf("%w: tensor %q: %d data bytes, %d left", ErrTensors, name, size, len(d.b))
		}
		data := d.bytes(int(size))
		t, err := decodeData(dt, shape, int(n), data)
		if err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %w", ErrTensors, name, err)
		}
		out[name] = t
	}
	return out, nil
}

func decodeData(dt tensor.DType, shape []int, n int, b []byte) (*tensor.Tensor, error) {
	le := binary.LittleEndian
	if dt == tensor.String {
		ss := make([]string, 0, min(n, len(b)/4))
		for range n {
			if len(b) < 4 || uint64(len(b)-4) < uint64(le.Uint32(b)) {
				return nil, fmt.Errorf("string element overruns the data")
			}
			k := le.Uint32(b)
			ss = append(ss, string(b[4:4+k]))
			b = b[4+k:]
		}
		if len(b) != 0 {
			return nil, fmt.Errorf("%d bytes after the last string", len(b))
		}
		return &tensor.Tensor{DType: dt, Shape: shape, Data: ss}, nil
	}
	// DecodeTensors has checked the length; the strict decoder refuses a
	// bool byte other than 0 or 1, so each tensor has one encoding.
	return tensor.FromRawStrict(dt, shape, b)
}

type tdec struct {
	b   []byte
	err error
}

func (d *tdec) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrTensors}, args...)...)
	}
	d.b = nil
}

func (d *tdec) bytes(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *tdec) u32() uint32 {
	if b := d.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *tdec) u64() uint64 {
	if b := d.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}
