package tensor

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// A worked vector for each element type: the bytes are the spec.
func TestRawVectors(t *testing.T) {
	for _, c := range []struct {
		t   *Tensor
		hex string
	}{
		{&Tensor{DType: Float32, Shape: []int{2}, Data: []float32{1, -0.5}}, "0000803f000000bf"},
		{&Tensor{DType: Float64, Shape: []int{1}, Data: []float64{1}}, "000000000000f03f"},
		{&Tensor{DType: Float16, Shape: []int{1}, Data: []Half{0x3c00}}, "003c"},
		{&Tensor{DType: BFloat16, Shape: []int{1}, Data: []BHalf{0x3f80}}, "803f"},
		{&Tensor{DType: Int8, Shape: []int{2}, Data: []int8{-1, 2}}, "ff02"},
		{&Tensor{DType: Uint8, Shape: []int{2}, Data: []uint8{7, 255}}, "07ff"},
		{&Tensor{DType: Bool, Shape: []int{3}, Data: []bool{true, false, true}}, "010001"},
		{&Tensor{DType: Int16, Shape: []int{1}, Data: []int16{-2}}, "feff"},
		{&Tensor{DType: Uint16, Shape: []int{1}, Data: []uint16{0x1234}}, "3412"},
		{&Tensor{DType: Int32, Shape: []int{1}, Data: []int32{-1}}, "ffffffff"},
		{&Tensor{DType: Uint32, Shape: []int{1}, Data: []uint32{0x01020304}}, "04030201"},
		{&Tensor{DType: Int64, Shape: []int{1}, Data: []int64{-2}}, "feffffffffffffff"},
		{&Tensor{DType: Uint64, Shape: []int{1}, Data: []uint64{1}}, "0100000000000000"},
		{&Tensor{DType: Float32, Shape: []int{0, 3}, Data: []float32{}}, ""},
	} {
		want, _ := hex.DecodeString(c.hex)
		got := RawBytes(c.t)
		if !bytes.Equal(got, want) {
			t.Errorf("%v: RawBytes %x, want %s", c.t.DType, got, c.hex)
		}
		back, err := FromRawStrict(c.t.DType, c.t.Shape, want)
		if err != nil || back.String() != c.t.String() || !bytes.Equal(RawBytes(back), want) {
			t.Errorf("%v: FromRaw(%s) = %v, %v", c.t.DType, c.hex, back, err)
		}
		// Pieces concatenate to the whole.
		var pieces []byte
		for i := 0; i < c.t.Len(); i++ {
			pieces = AppendRaw(pieces, c.t, i, i+1)
		}
		if !bytes.Equal(pieces, want) {
			t.Errorf("%v: AppendRaw element by element %x, want %s", c.t.DType, pieces, c.hex)
		}
	}
}

func TestRawErrors(t *testing.T) {
	for _, c := range []struct {
		dt     DType
		shape  []int
		raw    []byte
		strict bool
		want   string
	}{
		{Float32, []int{2}, make([]byte, 7), false, "needs 8 bytes, got 7"},
		{String, []int{1}, nil, false, "no raw encoding for string"},
		{Sequence, nil, nil, false, "no raw encoding for sequence"},
		{Bool, []int{2}, []byte{1, 2}, true, "bool element 1 is 2"},
	} {
		f := FromRaw
		if c.strict {
			f = FromRawStrict
		}
		_, err := f(c.dt, c.shape, c.raw)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FromRaw(%v%v, %d bytes) = %v, want %q", c.dt, c.shape, len(c.raw), err, c.want)
		}
	}
	// Not strict, a bool byte 2 reads as true.
	if b, err := FromRaw(Bool, []int{1}, []byte{2}); err != nil || !b.Data.([]bool)[0] {
		t.Errorf("FromRaw bool 2 = %v, %v", b, err)
	}
}
