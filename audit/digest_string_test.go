package audit

import (
	"testing"

	"github.com/vouchml/vouch/tensor"
)

// TestStringDigestVector checks the worked string example of the
// canonical tensor encoding (digest.go), computed independently with
// Python's hashlib.
func TestStringDigestVector(t *testing.T) {
	s := tensor.From([]string{"yes", "né"}, 2)
	one, err := TensorDigestOf("s", s)
	if err != nil {
		t.Fatal(err)
	}
	if one.Digest != "sha256:b2eee6d6bfc95ee698a750b7e244ec9c0e1aa653be58f6d83ebece9b0b75327f" {
		t.Errorf("tensor digest %s", one.Digest)
	}
	set, _, err := InputDigest(map[string]*tensor.Tensor{"s": s})
	if err != nil {
		t.Fatal(err)
	}
	if set != "sha256:f883eb0ae2f68fa3c504ddc444501ef6602fd14acbf0928b7ce1cd45b22046d9" {
		t.Errorf("input digest %s", set)
	}
}
