package npy

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vouchml/vouch/tensor"
)

func TestRoundTrip(t *testing.T) {
	for _, tt := range []*tensor.Tensor{
		tensor.From([]float32{1, 2, 3, 4, 5, 6}, 2, 3),
		tensor.From([]int64{-1}, 1),
		tensor.Scalar(float64(3.5)),
		tensor.From([]bool{true, false, true}, 3),
	} {
		var buf bytes.Buffer
		if err := Encode(&buf, tt); err != nil {
			t.Fatal(err)
		}
		got, err := Decode(buf.Bytes())
		if err != nil {
			t.Fatalf("%v: %v", tt, err)
		}
		if got.String() != tt.String() {
			t.Fatalf("got %v want %v", got, tt)
		}
	}
}

func TestKnownFile(t *testing.T) {
	// numpy.save of np.array([[1, 2]], dtype='<i4'), version 1.0.
	h := "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2), }"
	h += strings.Repeat(" ", 128-10-len(h)-1) + "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), 0)
	b = append(b, h...)
	b = append(b, 1, 0, 0, 0, 2, 0, 0, 0)
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Data.([]int32); got.String() != "int32[1 2]" || v[1] != 2 {
		t.Fatalf("got %v %v", got, v)
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"hello", "bad magic"},
		{"\x93NUMPY\x01\x00\xff\x00{", "truncated header"},
		{"\x93NUMPY\x01\x00\x3b\x00{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }  ", "unsupported dtype"},
		{"\x93NUMPY\x01\x00\x3a\x00{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }  ", "Fortran"},
		{"\x93NUMPY\x01\x00\x3b\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }  ", "needs 8 data bytes"},
		{"\x93NUMPY\x09\x00\x00\x00", "unsupported format version"},
	} {
		_, err := Decode([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.in, err, c.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	Encode(&buf, tensor.From([]float32{1, 2}, 2))
	f.Add(buf.Bytes())
	for _, name := range []string{"u2.npy", "u5_2x2.npy", "s2.npy"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'shape': (1,2)}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tt, err := Decode(b)
		if err != nil {
			return
		}
		if err := tt.Check(); err != nil {
			t.Fatal(err)
		}
		if n := tt.Len(); n > 0 && n > len(b) {
			t.Fatalf("%d elements from %d bytes", n, len(b))
		}
	})
}

// TestNumpyFiles reads files written by numpy.save (NumPy 1.24.2, Debian
// 12): np.array(['a', 'bb']) ('<U2'), a 2×2 unicode array with non-ASCII
// characters and an empty string ('<U5'), np.array([b'ab', b'c']) ('|S2'),
// and a float32 array.
func TestNumpyFiles(t *testing.T) {
	for _, c := range []struct {
		file  string
		shape string
		want  []string
	}{
		{"u2.npy", "string[2]", []string{"a", "bb"}},
		{"u5_2x2.npy", "string[2 2]", []string{"héllo", "€", "", "x\U0001F600"}},
		{"s2.npy", "string[2]", []string{"ab", "c"}},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if got.String() != c.shape || !slices.Equal(got.Data.([]string), c.want) {
			t.Fatalf("%s: got %v %q, want %s %q", c.file, got, got.Data, c.shape, c.want)
		}
		if c.file == "s2.npy" {
			continue
		}
		// Encode writes what numpy writes, byte for byte.
		var buf bytes.Buffer
		if err := Encode(&buf, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), b) {
			t.Errorf("%s: Encode differs from numpy.save:\n%x\n%x", c.file, buf.Bytes(), b)
		}
	}
	b, _ := os.ReadFile("testdata/f4.npy")
	got, err := Decode(b)
	if err != nil || got.String() != "float32[1 2]" || got.Data.([]float32)[1] != -2 {
		t.Fatalf("f4.npy: %v %v", got, err)
	}
}

func TestStringErrors(t *testing.T) {
	hdr := func(descr, shape string) string {
		h := "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }"
		return "\x93NUMPY\x01\x00" + string(rune(len(h))) + "\x00" + h
	}
	for _, c := range []struct{ in, want string }{
		{hdr("<U0", "(1,)"), "the width must be"},
		{hdr("<U2000000", "(1,)"), "the width must be"},
		{hdr("<Ux", "(1,)"), "the width must be"},
		{hdr("|O", "(1,)"), "unsupported dtype"},
		{hdr(">U1", "(1,)"), "unsupported dtype"},
		{hdr("<U1", "(2,)") + "a\x00\x00\x00", "needs 8 data bytes"},
		{hdr("<U1", "(1,)") + "\x00\xd8\x00\x00", "not a Unicode code point"},
		{hdr("<U1", "(1,)") + "\x00\x00\x11\x00", "not a Unicode code point"},
		{hdr("<U1", "(1099511627776,)"), "needs 4398046511104 data bytes"},
	} {
		_, err := Decode([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.in, err, c.want)
		}
	}
}
