package q8

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/elementwise"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

var vnniTwins = twins{fast: hasAVX2, vnni: hasVNNI}

// TestRowsColsTileTwins: the VPDPBUSD tiles against their portable twin
// and against exact int64 sums, over the whole u8 and s8 ranges (so that
// the int32 sums wrap), every row count and odd quad counts.
func TestRowsColsTileTwins(t *testing.T) {
	if !hasVNNI {
		t.Skip("no AVX512_VNNI")
	}
	r := rand.New(rand.NewPCG(16, 4))
	for _, kq := range []int{0, 1, 3, 17, 300} {
		for rr := 1; rr <= 4; rr++ {
			ldx := 4*kq + 4*r.IntN(3)
			xu := make([]uint8, 4*ldx+4)
			for i := range xu {
				xu[i] = uint8(r.IntN(256))
			}
			pan := make([]int8, kq*vnniCols*4+1)
			for i := range pan {
				pan[i] = int8(r.IntN(256) - 128)
			}
			init := make([]int32, vnniCols)
			for i := range init {
				init[i] = int32(r.Uint32())
			}
			want := make([]int32, 4*vnniCols)
			rowsTile(twins{}, rr, kq, xu, ldx, pan, init, want)
			for i := 0; i < rr; i++ {
				for jj := 0; jj < vnniCols; jj++ {
					s := int64(init[jj])
					for k := 0; k < 4*kq; k++ {
						s += int64(xu[i*ldx+k]) * int64(pan[(k/4*vnniCols+jj)*4+k%4])
					}
					if int32(s) != want[i*vnniCols+jj] {
						t.Fatalf("kq %d rows %d: portable [%d,%d] = %d, exact %d", kq, rr, i, jj, want[i*vnniCols+jj], int32(s))
					}
				}
			}
			got := make([]int32, 4*vnniCols)
			rowsTile(vnniTwins, rr, kq, xu, ldx, pan, init, got)
			for i := 0; i < rr*vnniCols; i++ {
				if got[i] != want[i] {
					t.Fatalf("rows%d kq %d: acc[%d] = %d, portable %d", rr, kq, i, got[i], want[i])
				}
			}
			// The cols tiles: the same sums with the operands' roles
			// swapped (rows of signed weights, a panel of unsigned
			// activations, one starting value per row).
			wr := make([]int8, 4*ldx+4)
			for i := range wr {
				wr[i] = int8(r.IntN(256) - 128)
			}
			pu := make([]uint8, kq*vnniCols*4+1)
			for i := range pu {
				pu[i] = uint8(r.IntN(256))
			}
			colsTile(twins{}, rr, kq, wr, ldx, pu, init[:4], want)
			for i := 0; i < rr; i++ {
				for jj := 0; jj < vnniCols; jj++ {
					s := int64(init[i])
					for k := 0; k < 4*kq; k++ {
						s += int64(wr[i*ldx+k]) * int64(pu[(k/4*vnniCols+jj)*4+k%4])
					}
					if int32(s) != want[i*vnniCols+jj] {
						t.Fatalf("kq %d rows %d: portable cols [%d,%d] = %d, exact %d", kq, rr, i, jj, want[i*vnniCols+jj], int32(s))
					}
				}
			}
			colsTile(vnniTwins, rr, kq, wr, ldx, pu, init[:4], got)
			for i := 0; i < rr*vnniCols; i++ {
				if got[i] != want[i] {
					t.Fatalf("cols%d kq %d: acc[%d] = %d, portable %d", rr, kq, i, got[i], want[i])
				}
			}
		}
	}
}

// TestQuantU8Twins: the u8 quantizer against quantize1 + 128, specials
// and ties included.
func TestQuantU8Twins(t *testing.T) {
	if !hasVNNI {
		t.Skip("no AVX512_VNNI")
	}
	r := rand.New(rand.NewPCG(3, 9))
	x := []float32{0, float32(math.Copysign(0, -1)), 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.4, 127.6, -127.6, 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3.49999, -3.5}
	for len(x) < 16*7+5 {
		x = append(x, float32(r.NormFloat64()*80))
	}
	for _, inv := range []float32{1, 0.37, 53} {
		want := make([]uint8, len(x))
		got := make([]uint8, len(x))
		quantizeU8(twins{}, want, x, inv)
		quantizeU8(vnniTwins, got, x, inv)
		for i := range x {
			if w := uint8(quantize1(x[i], inv) + 128); want[i] != w {
				t.Fatalf("portable %v*%v = %d, want %d", x[i], inv, want[i], w)
			}
			if got[i] != want[i] {
				t.Fatalf("quantU8 %v*%v = %d, portable %d", x[i], inv, got[i], want[i])
			}
		}
	}
}

// TestEpiColsTwins: the per-column epilogue against epiColsGo, with and
// without residual and Relu.
func TestEpiColsTwins(t *testing.T) {
	if !hasVNNI {
		t.Skip("no AVX512_VNNI")
	}
	r := rand.New(rand.NewPCG(7, 1))
	n := 16*5 + 9
	a := make([]int32, n)
	m, b, res := randPos(r, n), randF32(r, n), randF32(r, n)
	for i := range a {
		a[i] = int32(r.IntN(1<<24) - 1<<23)
	}
	a[0], a[1], a[2] = 0, math.MaxInt32, math.MinInt32
	b[0], res[0] = float32(math.Copysign(0, -1)), float32(math.Copysign(0, -1))
	res[3] = float32(math.NaN())
	for _, withRes := range []bool{false, true} {
		for _, relu := range []bool{false, true} {
			rs := res
			if !withRes {
				rs = nil
			}
			want, got := make([]float32, n), make([]float32, n)
			epiColsGo(want, a, m, b, rs, relu)
			epilogueCols(vnniTwins, got, a, m, b, rs, relu)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("res %v relu %v: y[%d] = %v, portable %v", withRes, relu, i, got[i], want[i])
				}
			}
		}
	}
}

// TestQ8RowsLayerTwins: Gemm and MatMul layers through the u8 x s8 tiles
// give the bits of the int16 GEMM (AVX2 and VNNI tiles) and of the
// portable twins, at 1, 2 and 3 workers: row counts across the 4-row
// groups, K not a multiple of 4, N across the 64-column blocks, residual
// and Relu, no bias.
func TestQ8RowsLayerTwins(t *testing.T) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add("vouch", Ops(reg))
	r := rand.New(rand.NewPCG(11, 12))
	type cs struct {
		base    string
		rows, k int
		n       int
		mode    int // bit 0: residual, bit 1: Relu, bit 2: no bias
	}
	cases := []cs{{"Gemm", 1, 9216 / 8, 4096 / 8, 0}, {"Gemm", 1, 30, 1000, 2}, {"Gemm", 2, 13, 70, 1}, {"Gemm", 5, 64, 64, 3},
		{"Gemm", 9, 7, 129, 4}, {"MatMul", 12, 96, 384, 0}, {"MatMul", 3, 1, 16, 7}, {"Gemm", 4, 255, 17, 6}}
	for _, s := range cases {
		wq := make([]int8, s.n*s.k)
		for i := range wq {
			wq[i] = int8(r.IntN(255) - 127)
		}
		inputs := []string{"x", "w", "s", "b"}
		if s.mode&4 != 0 {
			inputs[3] = ""
		}
		add := int64(0)
		if s.mode&1 != 0 {
			inputs, add = append(inputs, "r"), 1
		}
		node := &ir.Node{Name: "g", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: inputs, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{
			"base":    {Name: "base", Kind: ir.AttrString, S: s.base},
			"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: 0.03},
			"layout":  {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, add, 0}},
		}}
		if s.mode&2 != 0 {
			node.Attrs["activation"] = &ir.Attr{Name: "activation", Kind: ir.AttrString, S: "Relu"}
			node.Attrs["act_version"] = &ir.Attr{Name: "act_version", Kind: ir.AttrInt, I: 14}
		}
		xs := []int{s.rows, s.k}
		ys := []int{s.rows, s.n}
		if s.base == "MatMul" && s.rows%3 == 0 {
			xs, ys = []int{3, s.rows / 3, s.k}, []int{3, s.rows / 3, s.n}
		}
		x := randF32(r, s.rows*s.k)
		x[0] = 1e9 // clamped to 127
		in := []*tensor.Tensor{tensor.From(x, xs...), tensor.From(wq, s.n, s.k), tensor.From(randPos(r, s.n), s.n), nil}
		if s.mode&4 == 0 {
			in[3] = tensor.From(randF32(r, s.n), s.n)
		}
		if s.mode&1 != 0 {
			in = append(in, tensor.From(randF32(r, s.rows*s.n), ys...))
		}
		op, err := reg.Lookup(node)
		if err != nil {
			t.Fatal(err)
		}
		var want []float32
		for v, name := range []string{"portable", "avx2", "vnni-gemm", "vnni-rows"} {
			for _, threads := range []int{1, 2, 3} {
				l := []kernel.ISA{kernel.ISAPortable, kernel.ISAAVX2, kernel.ISABest, kernel.ISABest}[v]
				ctx := ctxAt(parallel.New(threads), l, &forced{noRowsQ8: v != 3})
				out := []*tensor.Tensor{tensor.New(tensor.Float32, ys...)}
				err := op.Into(ctx, node, in, out)
				ctx.Pool.Close()
				if err != nil {
					t.Fatal(err)
				}
				got := out[0].Data.([]float32)
				if want == nil {
					want = got
					continue
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%+v: %s on %d workers: y[%d] = %v, portable %v", s, name, threads, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestQ8PointwiseTwins: 1×1 convolutions (unit and larger strides,
// trailing pads) through the cols tiles give
// the bits of the direct kernels, of both GEMM tiles and of the portable
// twins, at 1, 2 and 3 workers: positions across the 64-position blocks
// (and fewer than one), channel counts not a multiple of 4, output
// channels across the 4-row groups, groups, batch 2, residual, Relu, no
// bias, clamped and NaN inputs; 1×1 maps (squeeze-excitation) through the
// rows tiles as linear layers over the batch.
func TestQ8PointwiseTwins(t *testing.T) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add("vouch", Ops(reg))
	r := rand.New(rand.NewPCG(21, 22))
	type cs struct{ n, c, h, w, m, group, mode, stride, padEnd int } // mode: bit 0 residual, bit 1 Relu, bit 2 no bias
	cases := []cs{{1, 64, 56, 56, 24, 1, 0, 1, 0}, {1, 3, 10, 10, 5, 1, 2, 1, 0}, {2, 18, 7, 7, 36, 1, 1, 1, 0}, {1, 40, 9, 13, 10, 2, 3, 1, 0},
		{1, 256, 8, 8, 64, 1, 4, 1, 0}, {1, 5, 1, 1, 7, 1, 6, 1, 0}, {2, 32, 16, 4, 20, 4, 7, 1, 0},
		{1, 64, 28, 28, 128, 1, 1, 2, 0}, {2, 12, 9, 7, 16, 1, 0, 2, 0}, {1, 8, 6, 6, 8, 2, 2, 3, 2},
		{2, 960, 1, 1, 240, 1, 1, 1, 0}, {1, 72, 1, 1, 24, 1, 2, 2, 0}, {3, 30, 1, 1, 70, 2, 4, 1, 0}}
	for _, s := range cases {
		oh, ow := (s.h+s.padEnd-1)/s.stride+1, (s.w+s.padEnd-1)/s.stride+1
		cg := s.c / s.group
		x := randF32(r, s.n*s.c*s.h*s.w)
		x[1], x[2], x[3] = 1e9, -1e9, float32(math.NaN())
		wq := make([]int8, s.m*cg)
		for i := range wq {
			wq[i] = int8(r.IntN(255) - 127)
		}
		inputs := []string{"x", "w", "s", "b"}
		if s.mode&4 != 0 {
			inputs[3] = ""
		}
		add := int64(0)
		if s.mode&1 != 0 {
			inputs, add = append(inputs, "r"), 1
		}
		node := &ir.Node{Name: "pw", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: inputs, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{
			"base":    {Name: "base", Kind: ir.AttrString, S: "Conv"},
			"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: 0.02},
			"layout":  {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, add, 0}},
			"group":   {Name: "group", Kind: ir.AttrInt, I: int64(s.group)},
			"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(s.stride), int64(s.stride)}},
			"pads":    {Name: "pads", Kind: ir.AttrInts, Ints: []int64{0, 0, int64(s.padEnd), int64(s.padEnd)}},
		}}
		if s.mode&2 != 0 {
			node.Attrs["activation"] = &ir.Attr{Name: "activation", Kind: ir.AttrString, S: "Relu"}
			node.Attrs["act_version"] = &ir.Attr{Name: "act_version", Kind: ir.AttrInt, I: 14}
		}
		ys := []int{s.n, s.m, oh, ow}
		in := []*tensor.Tensor{tensor.From(x, s.n, s.c, s.h, s.w), tensor.From(wq, s.m, cg, 1, 1), tensor.From(randPos(r, s.m), s.m), nil}
		if s.mode&4 == 0 {
			in[3] = tensor.From(randF32(r, s.m), s.m)
		}
		if s.mode&1 != 0 {
			in = append(in, tensor.From(randF32(r, s.n*s.m*oh*ow), ys...))
		}
		op, err := reg.Lookup(node)
		if err != nil {
			t.Fatal(err)
		}
		var want []float32
		variants := []struct {
			name string
			l    kernel.ISA
			f    forced
		}{{"portable", kernel.ISAPortable, forced{}}, {"avx2", kernel.ISAAVX2, forced{}},
			{"vnni-gemm", kernel.ISABest, forced{noColsQ8: true, noDirectQ8: true}}, {"direct", kernel.ISABest, forced{noColsQ8: true}},
			{"cols", kernel.ISABest, forced{noRowsQ8: true, noQuadQ8: true}}, {"all (1x1 maps: rows; quad where it applies)", kernel.ISABest, forced{}}}
		for _, v := range variants {
			for _, threads := range []int{1, 2, 3} {
				f := v.f
				ctx := ctxAt(parallel.New(threads), v.l, &f)
				out := []*tensor.Tensor{tensor.New(tensor.Float32, ys...)}
				err := op.Into(ctx, node, in, out)
				ctx.Pool.Close()
				if err != nil {
					t.Fatal(err)
				}
				got := out[0].Data.([]float32)
				if want == nil {
					want = got
					continue
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%+v: %s on %d workers: y[%d] = %v, portable %v", s, v.name, threads, i, got[i], want[i])
					}
				}
			}
		}
	}
}
