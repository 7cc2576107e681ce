package server

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"

	"github.com/vouchml/vouch/tensor"
)

// TensorDigest names one tensor and the SHA-256 of its canonical encoding.
type TensorDigest struct {
	Name   string  `json:"name"`
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Digest string  `json:"digest"`
}

// tensorsHeader opens the digest of a set of tensors (version line of the
// canonical encoding; a future encoding changes it).
const tensorsHeader = "vouch-tensors-v1\n"

// Digest returns the digest of a set of named tensors (a request's inputs
// or a response's outputs) and of each tensor, sorted by name, in the
// canonical tensor encoding, version 1 (docs/audit-digest.md; the same as
// package audit's):
//
//	one tensor:  u32 len(name) | name | u32 dtype (ONNX number) | u32 rank |
//	             rank × u64 dim | u64 len(data) | data
//
// all integers little-endian, data the row-major elements as ONNX raw_data
// holds them (a string element is u32 len | bytes). A tensor's digest is
// SHA-256 of its encoding; the set's is
// SHA-256("vouch-tensors-v1\n" | encoding(t₁) | … | encoding(tₙ)) with the
// tensors in ascending byte order of their names. Digests are written
// "sha256:" + 64 lowercase hex digits. The tensors must be valid.
func Digest(ts map[string]*tensor.Tensor) (string, []TensorDigest) {
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	slices.Sort(names)
	all := sha256.New()
	all.Write([]byte(tensorsHeader))
	per := make([]TensorDigest, 0, len(names))
	var buf []byte
	for _, n := range names {
		t := ts[n]
		buf = appendCanonical(buf[:0], n, t)
		all.Write(buf)
		one := sha256.Sum256(buf)
		shape := make([]int64, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = int64(d)
		}
		per = append(per, TensorDigest{Name: n, DType: t.DType.String(), Shape: shape, Digest: "sha256:" + hex.EncodeToString(one[:])})
	}
	return formatDigest(all), per
}

func formatDigest(h hash.Hash) string {
	var sum [sha256.Size]byte
	return "sha256:" + hex.EncodeToString(h.Sum(sum[:0]))
}

// appendCanonical appends the canonical encoding of one tensor to b.
func appendCanonical(b []byte, name string, t *tensor.Tensor) []byte {
	le := binary.LittleEndian
	b = le.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	b = le.AppendUint32(b, uint32(t.DType))
	b = le.AppendUint32(b, uint32(len(t.Shape)))
	for _, d := range t.Shape {
		b = le.AppendUint64(b, uint64(d))
	}
	if s, ok := t.Data.([]string); ok {
		n := 0
		for _, e := range s {
			n += 4 + len(e)
		}
		b = le.AppendUint64(b, uint64(n))
		for _, e := range s {
			b = le.AppendUint32(b, uint32(len(e)))
			b = append(b, e...)
		}
		return b
	}
	raw := rawBytes(t)
	b = le.AppendUint64(b, uint64(len(raw)))
	return append(b, raw...)
}
