package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"slices"

	"github.com/vouchml/vouch/tensor"
)

// The canonical tensor encoding, version 1, from which input and output
// digests are computed. A client can compute them without vouch.
//
// One tensor named name is encoded as, all integers little-endian:
//
//	u32 len(name) | name (UTF-8 bytes)
//	u32 dtype     ONNX TensorProto.DataType number (FLOAT = 1, INT64 = 7, …)
//	u32 rank      | rank × u64 dim
//	u64 len(data) | data
//
// where data is the elements in row-major order, each as ONNX raw_data holds
// it: IEEE 754 bits little-endian for float16, bfloat16, float32 and float64,
// two's complement little-endian for integers, one byte 0x00 or 0x01 for
// bool; a string element is u32 len | bytes.
//
// The digest of one tensor is SHA-256(encoding). The digest of a set of
// tensors (a request's inputs, a response's outputs) is
//
//	SHA-256("vouch-tensors-v1\n" | encoding(t₁) | … | encoding(tₙ))
//
// with the tensors in ascending byte order of their names. Digests are
// written "sha256:" followed by 64 lowercase hex digits.
//
// Worked example: the single input x, float32, shape [1 2], values 1 and
// -2.5, encodes as the 45 bytes
//
//	01000000 78 01000000 02000000 0100000000000000 0200000000000000
//	0800000000000000 0000803f 000020c0
//
// Its tensor digest is
//
//	sha256:e802f8801f685d67ccb368b2e2edeed01140e910d095aaa682febe53babda39b
//
// and the input digest of the set {x} is
//
//	sha256:1ecc0bdc29fb96d249c058166db012fe2c554016303a540d2ec4be6e05c48f04
//
// Worked example with strings (each element u32 byte length, then its
// UTF-8 bytes; len(data) counts both): the input s, string, shape [2],
// values "yes" and "né", encodes as the 43 bytes
//
//	01000000 73 08000000 01000000 0200000000000000
//	0e00000000000000 03000000 796573 03000000 6ec3a9
//
// Its tensor digest is
//
//	sha256:b2eee6d6bfc95ee698a750b7e244ec9c0e1aa653be58f6d83ebece9b0b75327f
//
// and the input digest of the set {s} is
//
//	sha256:f883eb0ae2f68fa3c504ddc444501ef6602fd14acbf0928b7ce1cd45b22046d9
//
// (both computed independently with Python's hashlib).
//
// A sequence (vouch dtype 1024) or map (1025) value — ZipMap's output is a
// sequence of maps — is encoded with rank 1 and its element count as the
// one dimension; its data is the encodings of its parts, each with an
// empty name: a sequence's elements in order; a map's keys tensor, then
// its values tensor. So every key and value is covered by the digest.
const tensorsHeader = "vouch-tensors-v1\n"

// TensorDigestOf returns the digest of one tensor's canonical encoding, with
// its name, dtype and shape.
func TensorDigestOf(name string, t *tensor.Tensor) (TensorDigest, error) {
	if err := t.Check(); err != nil {
		return TensorDigest{}, fmt.Errorf("audit: tensor %q: %w", name, err)
	}
	h := sha256.New()
	writeTensor(h, name, t)
	return TensorDigest{Name: name, DType: t.DType.String(), Shape: shape64(t.Shape), Digest: formatDigest(h)}, nil
}

// InputDigest returns the digest of a set of named tensors and the digest of
// each, sorted by name, as a record's input_digest and inputs (or
// output_digest and outputs) hold them. A nil or invalid tensor is an error.
func InputDigest(ts map[string]*tensor.Tensor) (string, []TensorDigest, error) {
	names := make([]string, 0, len(ts))
	for n, t := range ts {
		if err := t.Check(); err != nil {
			return "", nil, fmt.Errorf("audit: tensor %q: %w", n, err)
		}
		names = append(names, n)
	}
	slices.Sort(names)
	all := sha256.New()
	all.Write([]byte(tensorsHeader))
	per := make([]TensorDigest, 0, len(names))
	for _, n := range names {
		one := sha256.New()
		writeTensor(&tee{all, one}, n, ts[n])
		per = append(per, TensorDigest{Name: n, DType: ts[n].DType.String(), Shape: shape64(ts[n].Shape), Digest: formatDigest(one)})
	}
	return formatDigest(all), per, nil
}

type tee struct{ a, b hash.Hash }

func (t *tee) Write(p []byte) (int, error) {
	t.a.Write(p)
	return t.b.Write(p)
}

func formatDigest(h hash.Hash) string {
	var sum [sha256.Size]byte
	return "sha256:" + hex.EncodeToString(h.Sum(sum[:0]))
}

func shape64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

// writeTensor writes the canonical encoding of a checked tensor to w.
func writeTensor(w io.Writer, name string, t *tensor.Tensor) {
	le := binary.LittleEndian
	if t.DType == tensor.Sequence || t.DType == tensor.Map {
		var parts bytes.Buffer
		n := 0
		if m, ok := t.MapOf(); ok {
			writeTensor(&parts, "", m.Keys)
			writeTensor(&parts, "", m.Values)
			n = m.Keys.Len()
		} else if elems, ok := t.Data.([]*tensor.Tensor); ok {
			for _, e := range elems {
				writeTensor(&parts, "", e)
			}
			n = len(elems)
		}
		b := le.AppendUint32(nil, uint32(len(name)))
		b = append(b, name...)
		b = le.AppendUint32(b, uint32(t.DType))
		b = le.AppendUint32(b, 1)
		b = le.AppendUint64(b, uint64(n))
		b = le.AppendUint64(b, uint64(parts.Len()))
		w.Write(b)
		w.Write(parts.Bytes())
		return
	}
	b := make([]byte, 0, 4096)
	b = le.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	b = le.AppendUint32(b, uint32(t.DType))
	b = le.AppendUint32(b, uint32(len(t.Shape)))
	for _, d := range t.Shape {
		b = le.AppendUint64(b, uint64(d))
	}
	b = le.AppendUint64(b, uint64(dataLen(t)))
	if ss, ok := t.Data.([]string); ok {
		for _, v := range ss {
			b = le.AppendUint32(b, uint32(len(v)))
			w.Write(b)
			b = b[:0]
			w.Write([]byte(v))
		}
		w.Write(b)
		return
	}
	// The data part is the tensor's raw encoding, streamed in pieces of
	// 4 KiB so that digesting a large tensor does not copy it whole.
	const piece = 512 // elements of at most 8 bytes
	w.Write(b)
	for i, n := 0, t.Len(); i < n; i += piece {
		b = tensor.AppendRaw(b[:0], t, i, min(i+piece, n))
		w.Write(b)
	}
}

// dataLen is the byte length of the data part of t's encoding.
func dataLen(t *tensor.Tensor) int {
	if ss, ok := t.Data.([]string); ok {
		n := 0
		for _, s := range ss {
			n += 4 + len(s)
		}
		return n
	}
	return t.Len() * t.DType.Size()
}
