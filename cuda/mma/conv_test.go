package mma

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

func randConv(r *rand.Rand, g ConvGeom) (x, w, bias []float32) {
	x = make([]float32, g.N*g.C*g.H*g.W)
	w = make([]float32, g.M*g.C*g.KH*g.KW)
	bias = make([]float32, g.M)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.1)
	}
	for i := range bias {
		bias[i] = float32(r.NormFloat64())
	}
	return x, w, bias
}

var convGeoms = []ConvGeom{
	{N: 2, C: 3, H: 9, W: 8, M: 5, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1},
	{N: 1, C: 17, H: 6, W: 7, M: 4, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1},
	{N: 3, C: 4, H: 11, W: 10, M: 6, KH: 3, KW: 2, SH: 2, SW: 1, PH: 2, PW: 0, DH: 2, DW: 1},
	{N: 4, C: 40, H: 1, W: 1, M: 7, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}, // a Gemm
}

// Conv2D is within the 16-bit formats' rounding of a float64 convolution,
// and its decoded fast path gives the same bits as the model's Dot.
func TestConv2DReferenceAndPaths(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, f := range []Format{FP16, BF16} {
		m, _ := ModelFor("sm_90", f)
		tol := 4e-3
		if f == BF16 {
			tol = 3e-2
		}
		for _, g := range convGeoms {
			x, w, bias := randConv(r, g)
			oh, ow := g.Out()
			y := make([]float32, g.N*g.M*oh*ow)
			y2 := make([]float32, len(y))
			if err := m.conv2D(f, g, x, w, Epilogue{Bias: bias}, y, true); err != nil {
				t.Fatal(err)
			}
			if err := m.conv2D(f, g, x, w, Epilogue{Bias: bias}, y2, false); err != nil {
				t.Fatal(err)
			}
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(y2[i]) {
					t.Fatalf("%v %+v: output %d: fast path %g, Dot %g", f, g, i, y[i], y2[i])
				}
			}
			K := g.C * g.KH * g.KW
			for n := 0; n < g.N; n++ {
				for mm := 0; mm < g.M; mm++ {
					for p := 0; p < oh*ow; p++ {
						ref, mag := float64(bias[mm]), math.Abs(float64(bias[mm]))
						for c := 0; c < g.C; c++ {
							for kh := 0; kh < g.KH; kh++ {
								for kw := 0; kw < g.KW; kw++ {
									ih, iw := p/ow*g.SH-g.PH+kh*g.DH, p%ow*g.SW-g.PW+kw*g.DW
									if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
										continue
									}
									v := float64(x[((n*g.C+c)*g.H+ih)*g.W+iw]) * float64(w[mm*K+(c*g.KH+kh)*g.KW+kw])
									ref += v
									mag += math.Abs(v)
								}
							}
						}
						got := float64(y[(n*g.M+mm)*oh*ow+p])
						if math.Abs(got-ref) > tol*mag+1e-6 {
							t.Fatalf("%v %+v: image %d filter %d pixel %d: %g, float64 %g (tolerance %g)", f, g, n, mm, p, got, ref, tol*mag)
						}
					}
				}
			}
		}
	}
}

// An image alone and the same image in a batch have the same bits, at any
// number of goroutines.
func TestConv2DBatchAndThreadInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	g := convGeoms[0]
	g.N = 5
	x, w, bias := randConv(r, g)
	oh, ow := g.Out()
	m, _ := ModelFor("sm_90", FP16)
	all := make([]float32, g.N*g.M*oh*ow)
	if err := m.Conv2D(FP16, g, x, w, Epilogue{Bias: bias, Relu: true}, all); err != nil {
		t.Fatal(err)
	}
	one := g
	one.N = 1
	per := g.C * g.H * g.W
	out := g.M * oh * ow
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	for n := 0; n < g.N; n++ {
		y := make([]float32, out)
		if err := m.Conv2D(FP16, one, x[n*per:(n+1)*per], w, Epilogue{Bias: bias, Relu: true}, y); err != nil {
			t.Fatal(err)
		}
		for i := range y {
			if math.Float32bits(y[i]) != math.Float32bits(all[n*out+i]) {
				t.Fatalf("image %d output %d: alone %g, in the batch %g", n, i, y[i], all[n*out+i])
			}
		}
	}
}

// The epilogue's order: NaN canonical, + bias, + residual, Relu, clip.
func TestEpilogueOrder(t *testing.T) {
	e := Epilogue{Bias: []float32{1e8}, Res: []float32{-1e8}, Relu: true, HasHi: true, Hi: 10}
	// 5 + 1e8 rounds to 1e8 + 8 in float32 before the residual takes 1e8
	// away: 8 (the bias and the residual summed first would give 5).
	if got := e.apply(5, 0, 0); got != 8 {
		t.Errorf("apply(5) = %g, want 8 (bias before residual, each rounded)", got)
	}
	if got := e.apply(float32(math.NaN()), 0, 0); math.Float32bits(got) != 0x7fc00000 {
		t.Errorf("apply(NaN) = %#x, want the canonical NaN", math.Float32bits(got))
	}
	e = Epilogue{Relu: true, HasLo: true, Lo: 1, HasHi: true, Hi: 6}
	for in, want := range map[float32]float32{-3: 1, 0.5: 1, 7: 6, 2: 2} {
		if got := e.apply(in, 0, 0); got != want {
			t.Errorf("apply(%g) = %g, want %g", in, got, want)
		}
	}
}

// Infinite operands follow IEEE 754's rules for the exact sum.
func TestConv2DInfinities(t *testing.T) {
	g := ConvGeom{N: 1, C: 2, H: 1, W: 1, M: 1, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
	m, _ := ModelFor("sm_90", FP16)
	y := make([]float32, 1)
	for _, c := range []struct {
		x, w []float32
		want float64
	}{
		{[]float32{70000, 1}, []float32{1, 1}, math.Inf(1)}, // 70000 is +Inf in binary16
		{[]float32{70000, -70000}, []float32{1, 1}, math.NaN()},
		{[]float32{70000, 1}, []float32{0, 1}, math.NaN()},
	} {
		if err := m.Conv2D(FP16, g, c.x, c.w, Epilogue{}, y); err != nil {
			t.Fatal(err)
		}
		if got := float64(y[0]); !(got == c.want || got != got && c.want != c.want) {
			t.Errorf("x %v w %v: %g, want %g", c.x, c.w, got, c.want)
		}
	}
}

func TestConv2DRefusals(t *testing.T) {
	m, _ := ModelFor("sm_90", FP16)
	g := convGeoms[0]
	if err := m.Conv2D(FP16, g, make([]float32, 3), make([]float32, 3), Epilogue{}, make([]float32, 3)); err == nil {
		t.Error("short tensors accepted")
	}
	bad := g
	bad.KH = 20
	if err := m.Conv2D(FP16, bad, nil, nil, Epilogue{}, nil); err == nil {
		t.Error("a kernel larger than the input accepted")
	}
	huge := ConvGeom{N: 1 << 20, C: 1 << 12, H: 1, W: 1, M: 1, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
	if err := m.Conv2D(FP16, huge, nil, nil, Epilogue{}, nil); err == nil {
		t.Error("a 2^32-element input accepted")
	}
}

// BenchmarkConv2DResNet is the emulation's speed on a ResNet-50 layer
// (layer2's 3×3, 128 → 128 channels on 28×28): 115.6 M multiply-adds.
func BenchmarkConv2DResNet(b *testing.B) {
	g := ConvGeom{N: 1, C: 128, H: 28, W: 28, M: 128, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1}
	x, w, bias := randConv(rand.New(rand.NewPCG(1, 1)), g)
	m, _ := ModelFor("sm_90", FP16)
	y := make([]float32, 128*28*28)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := m.Conv2D(FP16, g, x, w, Epilogue{Bias: bias}, y); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(115.6e6*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
}

// The decoded float64 step gives Dot's bits on every probe problem, the
// edge problems (subnormals, zeros, signed zeros) included.
func TestChainMatchesDot(t *testing.T) {
	for _, f := range []Format{FP16, BF16} {
		m, _ := ModelFor("sm_90", f)
		for _, pr := range []*Problems{NewProblems(f, 60, 3), NewEdgeProblems(f, 60, 3)} {
			a, b := make([]operand, 16), make([]operand, 16)
			col := make([]uint16, 16)
			for q := 0; q < pr.P; q++ {
				for n := 0; n < 8; n++ {
					for k := 0; k < 16; k++ {
						col[k] = pr.B[q*128+k*8+n]
						b[k] = decodeOperand(f, col[k])
					}
					for r := 0; r < 16; r++ {
						row := pr.A[q*256+r*16 : q*256+r*16+16]
						for k := range a {
							a[k] = decodeOperand(f, row[k])
						}
						c := pr.C[q*128+r*8+n]
						want, err := m.Dot(f, row, col, c)
						if err != nil {
							t.Fatal(err)
						}
						if got := m.chain(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%v problem %d (%d, %d): chain %g (%#x), Dot %g (%#x)", f, q, r, n, got, math.Float32bits(got), want, math.Float32bits(want))
						}
					}
				}
			}
		}
	}
}
