package mma

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// Every finite binary16 converts to float32 and back to itself, and every
// midpoint between two neighbours rounds to the even one.
func TestFromFloat32FP16Exhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		v := Value(FP16, uint16(h))
		if math.IsNaN(v) {
			if g := FromFloat32(FP16, float32(v)); g&0x7c00 != 0x7c00 || g&0x3ff == 0 {
				t.Fatalf("NaN %#04x -> %#04x, not a NaN", h, g)
			}
			continue
		}
		if g := FromFloat32(FP16, float32(v)); g != uint16(h) && !(v == 0 && g&0x7fff == 0 && g>>15 == uint16(h)>>15) {
			t.Fatalf("%#04x (%g) -> %#04x", h, v, g)
		}
		if h&0x7fff >= 0x7bff || math.IsInf(v, 0) {
			continue // the largest finite and infinities have no finite upper neighbour
		}
		next := Value(FP16, uint16(h+1))
		mid := float32((v + next) / 2) // 12 significant bits: exact in float32
		want := uint16(h)
		if h&1 == 1 {
			want = uint16(h + 1)
		}
		if g := FromFloat32(FP16, mid); g != want {
			t.Fatalf("midpoint %g of %#04x and %#04x -> %#04x, want %#04x (ties to even)", mid, h, h+1, g, want)
		}
	}
	if g := FromFloat32(FP16, 65520); g != 0x7c00 {
		t.Fatalf("65520 -> %#04x, want +Inf (rounds past the largest finite)", g)
	}
	if g := FromFloat32(FP16, 65519); g != 0x7bff {
		t.Fatalf("65519 -> %#04x, want 65504", g)
	}
}

// bfloat16 conversion is float32 rounded to its top 16 bits, ties to even.
func TestFromFloat32BF16(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		b := r.Uint32()
		v := math.Float32frombits(b)
		if v != v || math.IsInf(float64(v), 0) || (b>>16)&0x7fff == 0x7f7f {
			continue // NaNs, infinities, and values whose upper neighbour is infinite
		}
		g := FromFloat32(BF16, v)
		lo, hi := b&^0xffff, b&^0xffff+0x10000
		dlo := math.Abs(float64(v) - float64(math.Float32frombits(lo)))
		dhi := math.Abs(float64(v) - float64(math.Float32frombits(hi)))
		want := uint16(lo >> 16)
		if dhi < dlo || dhi == dlo && (lo>>16)&1 == 1 {
			want = uint16(hi >> 16)
		}
		if g != want {
			t.Fatalf("%#08x (%g) -> %#04x, want %#04x", b, v, g, want)
		}
	}
}

// When every product and the sum are small integers, every model gives the
// exact sum: the models differ only in what they drop.
func TestModelsExactOnIntegers(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, f := range []Format{FP16, BF16} {
		a, b := make([]uint16, 32), make([]uint16, 32)
		for trial := 0; trial < 200; trial++ {
			want := float64(r.IntN(2001) - 1000)
			c := float32(want)
			for k := range a {
				x, y := float64(r.IntN(15)-7), float64(r.IntN(15)-7)
				a[k], b[k] = FromFloat32(f, float32(x)), FromFloat32(f, float32(y))
				want += x * y
			}
			for _, m := range Candidates() {
				got, err := m.Dot(f, a, b, c)
				if err != nil {
					t.Fatal(err)
				}
				if float64(got) != want {
					t.Fatalf("%v %v: %g, want %g", f, m, got, want)
				}
			}
		}
	}
}

func one(f Format, v float32) []uint16 {
	s := make([]uint16, 16)
	s[0] = FromFloat32(f, v)
	for i := 1; i < 16; i++ {
		s[i] = 0
	}
	return s
}

// The parameters decide what a small term next to a large one leaves.
func TestModelSemantics(t *testing.T) {
	// 1 + 2^-30: below every alignment width here, dropped; the floor
	// variant of -2^-30 takes one unit of the alignment grid away.
	a, b := one(FP16, 1.0/(1<<15)), one(FP16, 1.0/(1<<15))
	neg := one(FP16, -1.0/(1<<15))
	cases := []struct {
		m    Model
		b    []uint16
		want float32
	}{
		{Model{Block: 16, Frac: 25, Round: TowardZero, TruncateMagnitude: true}, b, 1},
		{Model{Block: 16, Frac: 25, Round: TowardZero, TruncateMagnitude: true}, neg, 1},
		{Model{Block: 16, Frac: 25, Round: TowardZero, TruncateMagnitude: false}, neg, math.Nextafter32(1, 0)},
		{Model{Block: 16, Frac: 25, Round: NearestEven, TruncateMagnitude: false}, neg, 1},                      // 1-2^-25 is a tie-free value nearest 1
		{Model{Block: 16, Frac: 24, Round: NearestEven, TruncateMagnitude: false}, neg, math.Nextafter32(1, 0)}, // 1-2^-24 is representable
		{Model{Block: 16, Frac: 30, Round: TowardZero, TruncateMagnitude: true}, b, 1},                          // 1+2^-30 kept, rounded down to 1
		{Model{Block: 16, Frac: 30, Round: TowardZero, TruncateMagnitude: true}, neg, math.Nextafter32(1, 0)},   // 1-2^-30 kept, rounded down
		{Model{Block: 16, Frac: 30, Round: NearestEven, TruncateMagnitude: true}, neg, 1},                       // and to nearest: 1
	}
	for _, c := range cases {
		got, err := c.m.Dot(FP16, a, c.b, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%v: 1 + %g = %.9g, want %.9g", c.m, Value(FP16, a[0])*Value(FP16, c.b[0]), got, c.want)
		}
	}
	// Blocks: with block 1 the accumulator is rounded after every product
	// (2^24 + 1 + 1 = 2^24 in float32 steps, truncated each time);
	// with block 16 both ones are summed first (2^24 + 2, exact).
	x := make([]uint16, 16)
	y := make([]uint16, 16)
	x[0], y[0], x[1], y[1] = FromFloat32(FP16, 1), FromFloat32(FP16, 1), FromFloat32(FP16, 1), FromFloat32(FP16, 1)
	for i := 2; i < 16; i++ {
		x[i], y[i] = 0, 0
	}
	m1 := Model{Block: 1, Frac: 25, Round: TowardZero, TruncateMagnitude: true}
	m16 := Model{Block: 16, Frac: 25, Round: TowardZero, TruncateMagnitude: true}
	if got, _ := m1.Dot(FP16, x, y, 1<<24); got != 1<<24 {
		t.Errorf("block 1: %v, want 2^24", got)
	}
	if got, _ := m16.Dot(FP16, x, y, 1<<24); got != 1<<24+2 {
		t.Errorf("block 16: %v, want 2^24+2", got)
	}
}

// Operands the models do not cover are refused, not guessed.
func TestRefusals(t *testing.T) {
	m := Model{Block: 16, Frac: 25}
	inf := one(FP16, float32(math.Inf(1)))
	if _, err := m.Dot(FP16, inf, one(FP16, 1), 0); err == nil {
		t.Error("an infinite operand was emulated")
	}
	if _, err := m.Dot(FP16, make([]uint16, 8), make([]uint16, 8), 0); err == nil {
		t.Error("a dot of 8 elements was accepted")
	}
	if _, err := (Model{Block: 3, Frac: 25}).Dot(FP16, make([]uint16, 16), make([]uint16, 16), 0); err == nil {
		t.Error("block 3 accepted")
	}
	if _, err := m.MMA16816(FP16, make([]uint16, 255), make([]uint16, 128), make([]float32, 128)); err == nil {
		t.Error("a short A accepted")
	}
}

// A product of two significands in [1, 2) lies in [1, 4): aligned by its
// operands' exponent sum (ExponentSum), 1.5·1.5 = 2.25 keeps the
// accumulator's -2^-25, which alignment by its leading bit drops.
func TestExponentSumAlignment(t *testing.T) {
	a, b := one(FP16, 1.5), one(FP16, 1.5)
	c := float32(-1.0 / (1 << 25))
	lead := Model{Block: 16, Frac: 25, Round: TowardZero, TruncateMagnitude: true}
	sum := lead
	sum.ExponentSum = true
	if got, _ := lead.Dot(FP16, a, b, c); got != 2.25 {
		t.Errorf("by leading bit: %.9g, want 2.25", got)
	}
	if got, _ := sum.Dot(FP16, a, b, c); got != math.Nextafter32(2.25, 0) {
		t.Errorf("by exponent sum: %.9g, want %.9g", got, math.Nextafter32(2.25, 0))
	}
}

// The sm_90 model gives, bit for bit, the outputs an H200 gave for the
// first 400 probe problems of seed 7 (recorded by TestProbe -mmaout on the
// device, 2026-12-02): 51,200 outputs per format.
func TestSM90Recorded(t *testing.T) {
	for _, f := range []Format{FP16, BF16} {
		b, err := os.ReadFile(filepath.Join("testdata", "h200_"+f.String()+"_seed7.bin"))
		if err != nil {
			t.Fatal(err)
		}
		hw := make([]float32, len(b)/4)
		for i := range hw {
			hw[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		pr := NewProblems(f, len(hw)/128, 7)
		m, ok := ModelFor("sm_90", f)
		if !ok {
			t.Fatalf("no sm_90 model for %v", f)
		}
		fits, err := pr.FitModels(hw, []Model{m, {Block: 16, Frac: 25, Round: TowardZero, TruncateMagnitude: true}})
		if err != nil {
			t.Fatal(err)
		}
		for _, fit := range fits {
			if fit.Model == m && fit.Differ != 0 {
				t.Errorf("%v: the sm_90 model differs from the H200 on %d of %d outputs", f, fit.Differ, len(hw))
			}
			if fit.Model != m && fit.Differ == 0 {
				t.Errorf("%v: alignment by the leading bit also matches the H200: the recording does not tell them apart", f)
			}
		}
	}
	// The edge problems of seed 99 (subnormals, zeros, signed zeros; a
	// sum that underflows is +0): the first 200 of the second device run.
	for _, f := range []Format{FP16, BF16} {
		b, err := os.ReadFile(filepath.Join("testdata", "h200_"+f.String()+"-edge_seed99.bin"))
		if err != nil {
			t.Fatal(err)
		}
		hw := make([]float32, len(b)/4)
		for i := range hw {
			hw[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		m, _ := ModelFor("sm_90", f)
		// The device drew 2,000 (TestProbe's -problems 8000 / 4); the
		// operands are drawn array by array, so draw as many and keep 200.
		all := NewEdgeProblems(f, 2000, 99)
		q := len(hw) / 128
		pr := &Problems{F: f, P: q, A: all.A[:q*256], B: all.B[:q*128], C: all.C[:q*128]}
		fits, err := pr.FitModels(hw, []Model{m})
		if err != nil {
			t.Fatal(err)
		}
		if fits[0].Differ != 0 {
			t.Errorf("%v edge problems: the sm_90 model differs from the H200 on %d of %d outputs", f, fits[0].Differ, len(hw))
		}
	}
	if _, ok := ModelFor("sm_80", FP16); ok {
		t.Error("sm_80 has a model nobody fitted")
	}
}
