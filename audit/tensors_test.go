package audit

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/vouchml/vouch/tensor"
)

func TestEncodeDecodeTensors(t *testing.T) {
	in := map[string]*tensor.Tensor{
		"x": tensor.From([]float32{1, -2.5}, 1, 2),
		"b": tensor.From([]bool{true}, 1),
		"s": tensor.From([]string{"", "ab"}, 2),
		"u": tensor.From([]uint8{7, 8, 9}, 3),
		"e": tensor.New(tensor.Int64, 0, 3),
	}
	b, err := EncodeTensors(in)
	if err != nil {
		t.Fatal(err)
	}
	d, _, _ := InputDigest(in)
	if DigestOf(b) != d {
		t.Fatalf("digest of the encoding %s, InputDigest %s", DigestOf(b), d)
	}
	out, err := DecodeTensors(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip: %v", out)
	}
	// The worked example of the canonical encoding.
	one, _ := EncodeTensors(map[string]*tensor.Tensor{"x": tensor.From([]float32{1, -2.5}, 1, 2)})
	if DigestOf(one) != "sha256:1ecc0bdc29fb96d249c058166db012fe2c554016303a540d2ec4be6e05c48f04" {
		t.Fatalf("worked example digest %s", DigestOf(one))
	}
	for _, bad := range [][]byte{nil, []byte("vouch-tensors-v1\n\x01"), b[:len(b)-1], append(bytes.Clone(b), 0)} {
		if _, err := DecodeTensors(bad); err == nil {
			t.Errorf("DecodeTensors accepted %q", bad)
		}
	}
}

func FuzzDecodeTensors(f *testing.F) {
	b, _ := EncodeTensors(map[string]*tensor.Tensor{"x": tensor.From([]float32{1, -2.5}, 1, 2), "s": tensor.From([]string{"q"}, 1)})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := DecodeTensors(b)
		if err != nil {
			return
		}
		again, err := EncodeTensors(ts)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decode → encode is not the identity: %v", err)
		}
	})
}
