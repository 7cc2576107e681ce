package fast

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/quant"
)

func TestQuantize8(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		x, inv float32
		want   int8
	}{{2.5, 1, 2}, {3.5, 1, 4}, {-2.5, 1, -2}, {-3.5, 1, -4}, {0.49999997, 1, 0}, {126.5, 1, 126}, {127.4, 1, 127},
		{128, 1, 127}, {-127.5, 1, -127}, {-1e30, 1, -127}, {inf, 1, 127}, {-inf, 1, -127}, {nan, 1, 0},
		{float32(math.Copysign(0, -1)), 1, 0}, {1e-40, 1e30, 0}, {3, 0.5, 2}, {5, 0.5, 2}, {7, 0.5, 4}} {
		if got := Quantize8(c.x, c.inv); got != c.want {
			t.Errorf("Quantize8(%g, %g) = %d, want %d", c.x, c.inv, got, c.want)
		}
	}
	// The product is rounded to float32 before the rounding to an
	// integer: 0.1 * 25 is 2.5 in float32 (2.5000000372... in float64),
	// so it rounds to 2, where a float64 product would give 3.
	if got := Quantize8(0.1, 25); got != 2 {
		t.Errorf("Quantize8(0.1, 25) = %d, want 2 (the float32 product 2.5, ties to even)", got)
	}
}

// The packing: tap-major rows, each tap's channels padded to CPad with
// zeros, holding the (c, kh, kw) rows' values; rows padded to MPad; the
// per-channel quantization quant.WeightScales'.
func TestInt8Pack(t *testing.T) {
	g := exact.ConvGeom{N: 1, C: 20, H: 3, W: 3, M: 3, OH: 3, OW: 3, G: 1, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1}
	K := g.C * 9
	r := rand.New(rand.NewSource(1))
	w := make([]float32, g.M*K)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	q, err := QuantizeWeights(w, g.M, K, K, 1)
	if err != nil {
		t.Fatal(err)
	}
	wq, ws := quant.WeightScales(w, g.M)
	for i := range wq {
		if wq[i] != q.Q[i] {
			t.Fatalf("weight %d: %d, quant.WeightScales %d", i, q.Q[i], wq[i])
		}
	}
	for m := range ws {
		if ws[m] != q.Scale[m] {
			t.Fatalf("scale %d: %g vs %g", m, q.Scale[m], ws[m])
		}
	}
	p, err := q.PackConv(g)
	if err != nil {
		t.Fatal(err)
	}
	const Cp, Kp = 32, 320 // 9 taps of 32 bytes, to a multiple of 64
	if len(p) != MPad*Kp || int8Rows(9, g.C) != Kp {
		t.Fatalf("%d bytes, rows of %d", len(p), int8Rows(9, g.C))
	}
	for m := range MPad {
		for k := range Kp {
			want := int8(0)
			if tap, c := k/Cp, k%Cp; m < g.M && tap < 9 && c < g.C {
				want = q.Q[m*K+c*9+tap]
			}
			if int8(p[m*Kp+k]) != want {
				t.Fatalf("packed (%d, %d) = %d, want %d", m, k, int8(p[m*Kp+k]), want)
			}
		}
	}
	if gp := q.PackGemm(); len(gp) != MPad*int8Rows(1, K) || int8(gp[int8Rows(1, K)+5]) != q.Q[K+5] {
		t.Error("PackGemm")
	}
	g.C = 3
	if _, err := q.PackConv(g); err == nil {
		t.Error("weights packed for another geometry")
	}
	if _, err := QuantizeWeights(w, 3, MaxK8+1, 0, 1); err == nil {
		t.Error("a reduction past MaxK8 accepted")
	}
	if Int8Scratch(exact.ConvGeom{N: 2, C: 17, H: 3, W: 5}) != 2*15*32 || Int8Scratch(exact.ConvGeom{N: 2, C: 3, H: 3, W: 5}) != 2*15*4 {
		t.Error("Int8Scratch")
	}
	// A narrow layer (C <= Narrow8): each tap's channels padded to 4.
	g = exact.ConvGeom{N: 1, C: 3, H: 9, W: 9, M: 2, OH: 3, OW: 3, G: 1, KH: 7, KW: 7, SH: 1, SW: 1, DH: 1, DW: 1}
	K = 3 * 49
	w = w[:2*K]
	q, err = QuantizeWeights(w, 2, K, K, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = q.PackConv(g); err != nil {
		t.Fatal(err)
	}
	if int8Rows(49, 3) != 256 || len(p) != MPad*256 {
		t.Fatalf("narrow rows of %d, %d bytes", int8Rows(49, 3), len(p))
	}
	for k := range 256 {
		want := int8(0)
		if tap, c := k/4, k%4; tap < 49 && c < 3 {
			want = q.Q[K+c*49+tap]
		}
		if int8(p[256+k]) != want {
			t.Fatalf("narrow packed (1, %d) = %d, want %d", k, int8(p[256+k]), want)
		}
	}
}

// TestInt8ConvReference checks the twin against the convolution of the
// unquantized operands in float64: each output within the quantization's
// error bound, sum_k (|w|·sx + |x|·sw + sx·sw/2)/2 and the epilogue's
// float32 roundings. A wrong index, scale or epilogue is far outside it.
func TestInt8ConvReference(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for i := range 60 {
		c := randCase8(r, Tile{64, 64}, i%kindCount)
		// No specials, no clamping, no Inf channel: the bound holds.
		amax := 0.0
		for j := range c.x {
			c.x[j] = float32(r.NormFloat64())
			amax = math.Max(amax, math.Abs(float64(c.x[j])))
		}
		c.sx = float32(amax / 127)
		K := c.g.C * c.g.KH * c.g.KW
		for j, v := range c.w {
			if math.IsInf(float64(v), 0) {
				c.w[j] = 0.5
			}
		}
		w := c.weights(t)
		got := c.twin(t)
		g := c.g
		P := g.OH * g.OW
		for n := range g.N {
			for m := range g.M {
				sw := float64(w.Scale[m])
				for p := range P {
					oh, ow := p/g.OW, p%g.OW
					s, bound := 0.0, 0.0
					for k := range K {
						ci, kh, kw := k/(g.KH*g.KW), k/g.KW%g.KH, k%g.KW
						ih, iw := oh*g.SH-g.PH+kh*g.DH, ow*g.SW-g.PW+kw*g.DW
						if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
							continue
						}
						wv, xv := float64(c.w[m*K+k]), float64(c.x[((n*g.C+ci)*g.H+ih)*g.W+iw])
						s += wv * xv
						bound += (math.Abs(wv)*float64(c.sx) + math.Abs(xv)*sw + float64(c.sx)*sw/2) / 2
					}
					o := (n*g.M+m)*P + p
					if c.bias != nil {
						s += float64(c.bias[m])
					}
					if c.res != nil {
						s += float64(c.res[o])
					}
					if c.act.Relu && s < 0 {
						s = 0
					}
					if c.act.HasLo && s < float64(c.act.Lo) {
						s = float64(c.act.Lo)
					}
					if c.act.HasHi && s > float64(c.act.Hi) {
						s = float64(c.act.Hi)
					}
					if d := math.Abs(float64(got[o]) - s); !(d <= bound*1.001+1e-6*(1+math.Abs(s))) {
						t.Fatalf("%v: output %d = %g, float64 %g: |error| %g past the bound %g", c, o, got[o], s, d, bound)
					}
				}
			}
		}
	}
}

// The twin refuses operands that do not fit.
func TestInt8ConvArgs(t *testing.T) {
	g := gemmGeom(2, 3, 4)
	w, err := QuantizeWeights(make([]float32, 12), 3, 4, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 8)
	if _, err := Int8Conv(g, x, w, 0, nil, nil, exact.Act{}); err == nil {
		t.Error("a zero scale accepted")
	}
	if _, err := Int8Conv(g, x, w, float32(math.Inf(1)), nil, nil, exact.Act{}); err == nil {
		t.Error("an infinite scale accepted")
	}
	if _, err := Int8Conv(g, x[:7], w, 1, nil, nil, exact.Act{}); err == nil {
		t.Error("a short input accepted")
	}
	if _, err := Int8Conv(g, x, w, 1, make([]float32, 2), nil, exact.Act{}); err == nil {
		t.Error("a short bias accepted")
	}
	if _, err := Int8GEMM(2, x, w, 1, nil, exact.Act{}); err != nil {
		t.Error(err)
	}
}

func TestParseInt8Tile(t *testing.T) {
	tl, s, err := ParseInt8Tile("128x64 x=3c23d70a")
	if err != nil || tl != (Tile{128, 64}) || math.Float32bits(s) != 0x3c23d70a {
		t.Errorf("%v %v %v", tl, s, err)
	}
	for _, bad := range []string{"128x64", "128x64 x=3c23d70", "128x64 x=zz23d70a", "12x x=3c23d70a", "64x64 x=00000000", "64x64 x=7f800000", "64x64 x=bf800000"} {
		if _, _, err := ParseInt8Tile(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
