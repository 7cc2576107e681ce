package fast

import (
	"math"
	"testing"

	"github.com/vouchml/vouch/plan"
)

// Every finite binary16 round-trips; the midpoint between two neighbours
// rounds to the even one, a float32 step either side to the nearer one
// (subnormals, the largest finite value's midpoint to infinity included).
func TestHalfBitsRounding(t *testing.T) {
	for h := uint32(0); h < 0x7c00; h++ {
		v := HalfFloat(uint16(h))
		if got := HalfBits(v); got != uint16(h) {
			t.Fatalf("HalfBits(%g) = %#04x, want %#04x", v, got, h)
		}
		if got := HalfBits(-v); got != uint16(h)|0x8000 {
			t.Fatalf("HalfBits(%g) = %#04x", -v, got)
		}
		next := float32(65536)
		if h+1 < 0x7c00 {
			next = HalfFloat(uint16(h + 1))
		}
		mid := (v + next) / 2 // exact: 12 significant bits
		even := uint16(h)
		if h&1 == 1 {
			even = uint16(h + 1)
		}
		if got := HalfBits(mid); got != even {
			t.Fatalf("HalfBits(midpoint %g of %#04x) = %#04x, want %#04x", mid, h, got, even)
		}
		if got := HalfBits(math.Nextafter32(mid, 0)); got != uint16(h) {
			t.Fatalf("HalfBits(just below %g) = %#04x, want %#04x", mid, got, h)
		}
		if got := HalfBits(math.Nextafter32(mid, 1e9)); got != uint16(h+1) {
			t.Fatalf("HalfBits(just above %g) = %#04x, want %#04x", mid, got, h+1)
		}
	}
	for _, c := range []struct {
		f    float32
		want uint16
	}{{float32(math.Inf(1)), 0x7c00}, {float32(math.Inf(-1)), 0xfc00}, {1e10, 0x7c00}, {1e-10, 0}, {float32(math.Copysign(0, -1)), 0x8000}} {
		if got := HalfBits(c.f); got != c.want {
			t.Errorf("HalfBits(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if h := HalfBits(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("HalfBits(NaN) = %#04x", h)
	}
}

func TestBF16BitsRounding(t *testing.T) {
	for h := uint32(0); h < 0x7f80; h++ {
		v := BF16Float(uint16(h))
		if got := BF16Bits(v); got != uint16(h) {
			t.Fatalf("BF16Bits(%g) = %#04x, want %#04x", v, got, h)
		}
		mid := math.Float32frombits(h<<16 | 0x8000)
		even := uint16(h + h&1)
		if got := BF16Bits(mid); got != even {
			t.Fatalf("BF16Bits(midpoint %g) = %#04x, want %#04x", mid, got, even)
		}
		if got := BF16Bits(math.Float32frombits(h<<16 | 0x7fff)); got != uint16(h) {
			t.Fatalf("BF16Bits(below the midpoint above %#04x) = %#04x", h, got)
		}
	}
	if h := BF16Bits(float32(math.NaN())); h&0x7f80 != 0x7f80 || h&0x7f == 0 {
		t.Errorf("BF16Bits(NaN) = %#04x", h)
	}
}

func TestPackWeights(t *testing.T) {
	w := []float32{1, 2, 3, 4, 5, 6} // 2 x 3, or its transpose 3 x 2 at strides 1, 3
	p, err := PackWeights(w, 3, 2, 1, 3, plan.FP16)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != MPad*BK {
		t.Fatalf("%d values", len(p))
	}
	for m := range 3 {
		for k := range 2 {
			if got := HalfFloat(p[m*BK+k]); got != w[k*3+m] {
				t.Errorf("(%d, %d) = %g, want %g", m, k, got, w[k*3+m])
			}
		}
	}
	for i, v := range p {
		if i%BK >= 2 || i/BK >= 3 {
			if v != 0 {
				t.Fatalf("padding %d = %#04x", i, v)
			}
		}
	}
	if _, err := PackWeights(w, 3, 3, 3, 1, plan.FP16); err == nil {
		t.Error("weights past the slice accepted")
	}
	if _, err := PackWeights(w, 2, 3, 3, 1, plan.Int8); err == nil {
		t.Error("int8 packed as 16-bit")
	}
}

// The tile depends on the layer's shape only, and is always a tile fast.cu has.
func TestChooseTile(t *testing.T) {
	for _, c := range []struct {
		M, P int
		want Tile
	}{{64, 3136, Tile{64, 64}}, {256, 3136, Tile{128, 64}}, {512, 784, Tile{128, 64}}, {1024, 196, Tile{128, 64}},
		{2048, 49, Tile{128, 64}}, {64, 49, Tile{64, 64}}, {1000, 1, Tile{64, 32}}, {300, 0, Tile{128, 64}}} {
		got := ChooseTile(c.M, c.P)
		if got != c.want {
			t.Errorf("ChooseTile(%d, %d) = %v, want %v", c.M, c.P, got, c.want)
		}
		if _, err := ParseTile(got.String()); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseTile("32x32"); err == nil {
		t.Error("ParseTile accepted a tile fast.cu lacks")
	}
}
