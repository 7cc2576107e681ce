package audit

import (
	"testing"

	"github.com/vouchml/vouch/tensor"
)

// TestDigestCoversSequencesOfMaps: ZipMap-style outputs (a sequence of
// maps) that differ in any key or value get different digests, and the
// same value always the same digest.
func TestDigestCoversSequencesOfMaps(t *testing.T) {
	zip := func(p0, p1 float32, k1 int64) *tensor.Tensor {
		m := tensor.NewMap(&tensor.Tensor{DType: tensor.Int64, Shape: []int{2}, Data: []int64{0, k1}},
			&tensor.Tensor{DType: tensor.Float32, Shape: []int{2}, Data: []float32{p0, p1}})
		return tensor.NewSequence([]*tensor.Tensor{m})
	}
	digest := func(v *tensor.Tensor) string {
		t.Helper()
		d, _, err := InputDigest(map[string]*tensor.Tensor{"output_probability": v})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := digest(zip(0.25, 0.75, 1))
	if base != digest(zip(0.25, 0.75, 1)) {
		t.Fatal("the same value digests differently")
	}
	for name, v := range map[string]*tensor.Tensor{
		"value":  zip(0.75, 0.25, 1),
		"key":    zip(0.25, 0.75, 2),
		"length": tensor.NewSequence([]*tensor.Tensor{zip(0.25, 0.75, 1).Data.([]*tensor.Tensor)[0], zip(0.25, 0.75, 1).Data.([]*tensor.Tensor)[0]}),
		"empty":  tensor.NewSequence(nil),
	} {
		if digest(v) == base {
			t.Errorf("a sequence differing in its %s has the same digest", name)
		}
	}
}
