package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestHalfRoundTripExhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := Half(i)
		f := h.Float32()
		if f != f {
			if back := ToHalf(f); back.Float32() == back.Float32() {
				t.Fatalf("NaN %#04x did not stay NaN", i)
			}
			continue
		}
		if back := ToHalf(f); back != h {
			t.Fatalf("%#04x -> %g -> %#04x", i, f, uint16(back))
		}
	}
}

// nearestHalf finds the correctly rounded half by scanning neighbours.
func nearestHalf(f float32) Half {
	best := Half(0)
	bestErr := math.Inf(1)
	for i := 0; i < 1<<16; i++ {
		h := Half(i)
		v := h.Float32()
		if v != v || math.IsInf(float64(v), 0) || (i>>15 == 1) != math.Signbit(float64(f)) {
			continue
		}
		e := math.Abs(float64(v) - float64(f))
		if e < bestErr || (e == bestErr && i&1 == 0) {
			best, bestErr = h, e
		}
	}
	return best
}

func TestToHalfRounding(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 300; i++ {
		f := float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(36)-24)))
		if got, want := ToHalf(f), nearestHalf(f); got != want && math.Abs(float64(f)) < 65504 {
			t.Fatalf("ToHalf(%g) = %#04x (%g), want %#04x (%g)", f, uint16(got), got.Float32(), uint16(want), want.Float32())
		}
	}
	if ToHalf(1e6) != 0x7c00 || ToHalf(-1e6) != 0xfc00 {
		t.Error("overflow must give ±Inf")
	}
}

func TestBHalf(t *testing.T) {
	if ToBHalf(1).Float32() != 1 || ToBHalf(-2.5).Float32() != -2.5 {
		t.Error("exact values")
	}
	// 1 + 2^-8 is exactly between bfloat16 1 and 1+2^-7: ties to even gives 1.
	if got := ToBHalf(1 + 1.0/256).Float32(); got != 1 {
		t.Errorf("tie: got %g", got)
	}
	if v := ToBHalf(float32(math.NaN())).Float32(); v == v {
		t.Error("NaN lost")
	}
}

func TestCheck(t *testing.T) {
	bad := []*Tensor{
		{DType: Float32, Shape: []int{2}, Data: []float32{1}},
		{DType: Float32, Shape: []int{1}, Data: []int32{1}},
		{DType: 14, Shape: nil, Data: nil},
		{DType: Int8, Shape: []int{-1}, Data: []int8{}},
	}
	for _, b := range bad {
		if b.Check() == nil {
			t.Errorf("%+v passed Check", b)
		}
	}
	if err := New(String, 2, 0).Check(); err != nil {
		t.Error(err)
	}
}

func TestConversions(t *testing.T) {
	x := From([]int64{-3, 7}, 2)
	f, err := x.Float64s()
	if err != nil || f[0] != -3 {
		t.Fatal(f, err)
	}
	y := FromFloat64s(Int32, []int{2}, []float64{-2.7, 2.7})
	if v := y.Data.([]int32); v[0] != -2 || v[1] != 2 {
		t.Fatalf("truncation: %v", v)
	}
	if _, err := From([]float32{1}, 1).Int64s(); err == nil {
		t.Error("Int64s accepted floats")
	}
}
