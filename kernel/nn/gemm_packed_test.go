package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestPackedBTwin: a B packed into panels at bind time (packB16) gives
// the bits of the portable GEMM followed by the row bias and the unfused
// epilogue, at every vector level, on 1, 2 and 3 workers, with B stored
// row-major (power-of-two strides among them) and transposed, A read in
// place and packed, several k blocks (the AVX-512 k block lowered),
// partial column panels, every epilogue form, NaN/Inf in every operand.
// Bit equality only.
func TestPackedBTwin(t *testing.T) {
	t.Parallel()
	if !fastOK() {
		t.Skip("no AVX2+FMA: only the portable path exists here")
	}
	r := rand.New(rand.NewSource(161))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	inf := float32(math.Inf(1))
	shapes := [][3]int{{64, 1024, 512}, {64, 256, 300}, {6, 16, 1}, {7, 17, 5}, {13, 40, 600}, {100, 300, 37},
		{101, 33, 513}, {9, 47, 260}, {30, 24, 1}, {17, 1, 70}, {8, 2048, 40}, {250, 70, 96}}
	for i := 0; i < 12; i++ {
		shapes = append(shapes, [3]int{gemmPackMin + r.Intn(90), 1 + r.Intn(200), 1 + r.Intn(600)})
	}
	for si, sh := range shapes {
		m, n, k := sh[0], sh[1], sh[2]
		a := specialF32(r, m*k, si%2 == 0)
		b := specialF32(r, k*n, si%3 == 0)
		bias := specialF32(r, m, si%3 == 1)
		res := specialF32(r, m*n, si%2 == 1)
		cb := specialF32(r, n, si%2 == 0)
		r2 := specialF32(r, m*n, si%4 == 0)
		at, bt := transposed(a, m, k), transposed(b, k, n)
		base := make([]float32, m*n)
		sgemmP(mach(pools[0], kernel.ISAPortable, nil), m, n, k, a, k, 1, b, n, 1, base, n)
		pbRow, pbT := packB16(b, n, 1, k, n), packB16(bt, 1, k, k, n)
		for ei := 0; ei < 6; ei++ {
			var ep epi
			var bs []float32
			if ei%2 == 1 {
				bs = bias
			}
			switch ei / 2 {
			case 1:
				ep = epi{r: res, lo: -0.5, hi: 6, on: true, fast: true}
			case 2:
				ep = epi{r: cb, col: true, r2: r2, lo: -inf, hi: inf, on: true, fast: true}
			}
			want := append([]float32{}, base...)
			if bs != nil {
				addBias(want, bs, m, n)
			}
			if ep.on {
				epiPortable2(want, ep.r, ep.r2, n, ep.ldr(n), m, n, ep.lo, ep.hi)
			}
			for mode := 0; mode < 6; mode++ {
				level := vectorLevels()[mode%len(vectorLevels())]
				var f *forced
				switch mode / 2 {
				case 1:
					zs := gemmZShape{gemmZMR, gemmZNZ, 1 + r.Intn(100)} // many k blocks
					f = &forced{gemmZ: &zs}
				case 2:
					f = &forced{packA: true}
				}
				pb := pbRow
				if (si+mode)%2 == 1 {
					pb = pbT
				}
				av, ars, acs := a, k, 1
				if mode == 5 {
					av, ars, acs = at, 1, m
				}
				for pi, p := range pools {
					got := make([]float32, m*n)
					for i := range got {
						got[i] = -7
					}
					sgemmFastB(mach(p, level, f), m, n, k, av, ars, acs, pb, bs, ep, got, n)
					if d := sameF32(got, want); d >= 0 {
						t.Fatalf("%s: c[%d] = %#x, portable %#x",
							fmt.Sprintf("%dx%dx%d epi %d mode %d (%v) transB %v pool %d", m, n, k, ei, mode, level, pb == pbT, pi),
							d, math.Float32bits(got[d]), math.Float32bits(want[d]))
					}
				}
			}
		}
		// The packed panels themselves, read back through packB.
		blk := make([]float32, gemmNC*gemmKC)
		j0, cols := 0, min(n, gemmNC)
		kb := min(k, gemmKC)
		pbRow.packB(blk, 0, kb, j0, cols)
		want := make([]float32, len(blk))
		(&matB{b: b, brs: n, bcs: 1}).packB(want, 0, kb, j0, cols)
		if d := sameF32(blk[:(cols+15)/16*16*kb], want[:(cols+15)/16*16*kb]); d >= 0 {
			t.Fatalf("%dx%dx%d: packB of the packed B differs at %d", m, n, k, d)
		}
	}
}

// TestPackedBPrepare: MatMul and Gemm (transB, a Linear layer) with a
// constant B pack it in Prepare, their Into reads the packed B and gives
// the bits of a call without any State and of the portable level; a B
// that is not constant (Data nil at Prepare) is never packed, and a
// GEMV-sized A leaves B unpacked.
func TestPackedBPrepare(t *testing.T) {
	t.Parallel()
	if !fastOK() {
		t.Skip("no AVX2+FMA: only the portable path exists here")
	}
	r := rand.New(rand.NewSource(162))
	f := func(shape ...int) *tensor.Tensor { return tensor.From(specialF32(r, prod(shape), true), shape...) }
	ops := Ops()
	cases := []struct {
		op     string
		n      *ir.Node
		in     []*tensor.Tensor
		out    []int
		packed bool
	}{
		{"MatMul", node("MatMul"), []*tensor.Tensor{f(2, 32, 128), f(128, 512)}, []int{2, 32, 512}, true},
		{"MatMul", node("MatMul"), []*tensor.Tensor{f(9, 300), f(300, 77)}, []int{9, 77}, true},
		{"MatMul", node("MatMul"), []*tensor.Tensor{f(3, 64), f(64, 256)}, []int{3, 256}, false},
		{"Gemm", node("Gemm", intAttr("transB", 1)), []*tensor.Tensor{f(8, 200), f(100, 200), f(100)}, []int{8, 100}, true},
		{"Gemm", node("Gemm"), []*tensor.Tensor{f(40, 64), f(64, 1024)}, []int{40, 1024}, true},
	}
	for ci, c := range cases {
		for _, constB := range []bool{true, false} {
			op := ops[c.op]
			k := &kernel.Ctx{State: new(kernel.State)}
			in := make([]*tensor.Tensor, len(c.in))
			for i, x := range c.in {
				in[i] = &tensor.Tensor{DType: x.DType, Shape: x.Shape}
				if i >= 1 && constB {
					in[i] = x
				}
			}
			if err := op.Prepare(k, c.n, in); err != nil {
				t.Fatalf("case %d: Prepare: %v", ci, err)
			}
			b := c.in[1].Data.([]float32)
			g := packedBOf(k, c.n, b, c.out[len(c.out)-1], 1, c.in[1].Shape[0], c.out[len(c.out)-1])
			if c.op == "Gemm" && c.n.Int("transB", 0) != 0 {
				g = packedBOf(k, c.n, b, 1, c.in[1].Shape[1], c.in[1].Shape[1], c.in[1].Shape[0])
			}
			if (g != nil) != (c.packed && constB) {
				t.Fatalf("case %d (constant B %v): packed %v, want %v", ci, constB, g != nil, c.packed && constB)
			}
			before := k.State.Len()
			got := tensor.New(tensor.Float32, c.out...)
			if err := op.Into(k, c.n, c.in, []*tensor.Tensor{got}); err != nil {
				t.Fatal(err)
			}
			if k.State.Len() != before {
				t.Fatalf("case %d: Into kept %d values, Prepare %d", ci, k.State.Len(), before)
			}
			for _, ctx := range []*kernel.Ctx{{}, {ISA: kernel.ISAPortable}} {
				want := tensor.New(tensor.Float32, c.out...)
				if err := op.Into(ctx, c.n, c.in, []*tensor.Tensor{want}); err != nil {
					t.Fatal(err)
				}
				if d := sameF32(got.Data.([]float32), want.Data.([]float32)); d >= 0 {
					t.Fatalf("case %d (constant B %v, %v): y[%d] differs with the packed B", ci, constB, ctx.ISA, d)
				}
			}
		}
	}
}

// transposed returns the cols x rows transpose of the rows x cols matrix a.
func transposed(a []float32, rows, cols int) []float32 {
	t := make([]float32, len(a))
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			t[j*rows+i] = a[i*cols+j]
		}
	}
	return t
}
