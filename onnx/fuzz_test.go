package onnx

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/vouchml/vouch/tensor"
)

// suiteFiles returns up to max files matching pattern under the ONNX
// backend test data, when it is installed.
func suiteFiles(t testing.TB, pattern string, max int) [][]byte {
	paths, _ := filepath.Glob(filepath.Join("/usr/share/libonnx-testdata/data/node", pattern))
	var out [][]byte
	for i, p := range paths {
		if i%7 != 0 { // a spread sample keeps the seed corpus small
			continue
		}
		b, err := os.ReadFile(p)
		if err == nil && len(b) < 1<<16 {
			out = append(out, b)
		}
		if len(out) >= max {
			break
		}
	}
	return out
}

func FuzzDecode(f *testing.F) {
	for _, b := range suiteFiles(f, "*/model.onnx", 60) {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x08, 0x07, 0x3a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b, "")
		if err != nil {
			return
		}
		if m.Graph == nil {
			t.Fatal("nil graph without error")
		}
	})
}

func FuzzDecodeTensor(f *testing.F) {
	for _, b := range suiteFiles(f, "*/test_data_set_0/*.pb", 80) {
		f.Add(b)
	}
	f.Add([]byte{0x08, 0x02, 0x08, 0x03, 0x10, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		tt, err := DecodeTensor(b)
		if err != nil {
			return
		}
		if err := tt.Check(); err != nil {
			t.Fatalf("decoded an invalid tensor: %v", err)
		}
		// Allocation is bounded by the input: every element came from bytes
		// of b (a zero-element tensor may have any shape).
		if n := tt.Len(); n > 0 && n > 8*len(b)+8 {
			t.Fatalf("%d elements from %d bytes", n, len(b))
		}
		enc, err := EncodeTensor(tt, "x")
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeTensor(enc)
		if err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if back.DType != tt.DType || tensor.ShapeString(back.Shape) != tensor.ShapeString(tt.Shape) {
			t.Fatalf("round trip changed %v to %v", tt, back)
		}
		if tt.DType != tensor.String && !bytes.Equal(tensor.RawBytes(back), tensor.RawBytes(tt)) {
			t.Fatal("round trip changed the data")
		}
	})
}
