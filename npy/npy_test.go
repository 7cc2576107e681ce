package npy

import (
	"bytes"
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
