package server

import (
	"testing"

	"github.com/vouchml/vouch/tensor"
)

// The worked example of docs/audit-digest.md (and of package audit, whose
// encoding this is: both must give these digests).
func TestDigestWorkedExample(t *testing.T) {
	x := tensor.From([]float32{1, -2.5}, 1, 2)
	enc := appendCanonical(nil, "x", x)
	const wantHex = "010000007801000000020000000100000000000000020000000000000008000000000000000000803f000020c0"
	if got := fmtHex(enc); got != wantHex {
		t.Errorf("encoding\n got %s\nwant %s", got, wantHex)
	}
	all, per := Digest(map[string]*tensor.Tensor{"x": x})
	if want := "sha256:e802f8801f685d67ccb368b2e2edeed01140e910d095aaa682febe53babda39b"; per[0].Digest != want {
		t.Errorf("tensor digest %s, want %s", per[0].Digest, want)
	}
	if want := "sha256:1ecc0bdc29fb96d249c058166db012fe2c554016303a540d2ec4be6e05c48f04"; all != want {
		t.Errorf("input digest %s, want %s", all, want)
	}
}

// Order of the set is by name, not by insertion or map order.
func TestDigestOrder(t *testing.T) {
	a := tensor.From([]int64{7}, 1)
	b := tensor.From([]float32{3}, 1)
	d1, _ := Digest(map[string]*tensor.Tensor{"b": b, "a": a})
	d2, per := Digest(map[string]*tensor.Tensor{"a": a, "b": b})
	if d1 != d2 || per[0].Name != "a" {
		t.Fatalf("digest depends on order: %s %s %v", d1, d2, per)
	}
}

func fmtHex(b []byte) string {
	const h = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, h[c>>4], h[c&15])
	}
	return string(out)
}
