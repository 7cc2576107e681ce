package q8

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/elementwise"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/tensor"
)

// s7Inputs returns kq quads of rr broadcast rows and a 64-lane panel:
// the unsigned side 255 or random bytes, the signed side the 7-bit
// extremes ±63 or random 7-bit values (mode 0: all 255 by +63, 1: 255 by
// −63, 2: 255 by alternating ±63, 3: random).
func s7Inputs(r *rand.Rand, mode, rr, kq, wmax int) (u []uint8, s []int8) {
	u = make([]uint8, max(rr*4*kq, kq*vnniCols*4))
	s = make([]int8, len(u))
	for i := range u {
		u[i] = 255
		switch mode {
		case 0:
			s[i] = int8(wmax)
		case 1:
			s[i] = int8(-wmax)
		case 2:
			s[i] = int8(wmax)
			if i&1 == 1 {
				s[i] = int8(-wmax)
			}
		default:
			u[i] = uint8(r.IntN(256))
			s[i] = int8(r.IntN(2*wmax+1) - wmax)
		}
	}
	return u, s
}

// TestTile7Twins checks the AVX2 u8 × s7 tiles against the portable rows
// and cols tiles, bit for bit, at the saturation worst case (activations
// 255, weights ±63) and on random 7-bit values.
func TestTile7Twins(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(7, 7))
	init := make([]int32, vnniCols)
	for i := range init {
		init[i] = int32(r.IntN(1<<20) - 1<<19)
	}
	for mode := 0; mode < 4; mode++ {
		for rr := 1; rr <= 4; rr++ {
			for _, kq := range []int{0, 1, 3, 17, 64} {
				u, s := s7Inputs(r, mode, rr, kq, WeightBits7Max)
				ld := 4 * kq
				want, got := make([]int32, 4*vnniCols), make([]int32, 4*vnniCols)
				// rows: u the activation rows, s the weights' panel.
				rowsTile(twins{}, rr, kq, u, ld, s, init, want)
				rowsTile(twins{s7: true}, rr, kq, u, ld, s, init, got)
				if !slices.Equal(want[:rr*vnniCols], got[:rr*vnniCols]) {
					t.Fatalf("rows mode %d rr %d kq %d: AVX2 u8 x s7 differs from the portable twin", mode, rr, kq)
				}
				// cols: s the weight rows, u the activations' panel.
				colsTile(twins{}, rr, kq, s, ld, u, init, want)
				colsTile(twins{s7: true}, rr, kq, s, ld, u, init, got)
				if !slices.Equal(want[:rr*vnniCols], got[:rr*vnniCols]) {
					t.Fatalf("cols mode %d rr %d kq %d: AVX2 u8 x s7 differs from the portable twin", mode, rr, kq)
				}
				if mode == 0 && kq > 0 && want[0] != init[0]+int32(255*63*4*kq) {
					t.Fatalf("rows sum %d, want %d", want[0], init[0]+int32(255*63*4*kq))
				}
			}
		}
	}
}

// TestTile7Saturates is the mutation check of the 7-bit guard: fed 8-bit
// weights (127) against activations 255, VPMADDUBSW's pair sums saturate
// and the tile gives other sums than the portable twin. This is why
// twins.s7 is set only for layers whose weights are checked to be 7-bit.
func TestTile7Saturates(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(7, 8))
	u, s := s7Inputs(r, 0, 1, 4, 127)
	init := make([]int32, vnniCols)
	want, got := make([]int32, 4*vnniCols), make([]int32, 4*vnniCols)
	colsTile(twins{}, 1, 4, s, 16, u, init, want)
	tile7(true, 1, 4, unsafe.Pointer(&s[0]), 16, unsafe.Pointer(&u[0]), init, got)
	if want[0] != 255*127*16 || got[0] != 32767*2*4 {
		t.Fatalf("8-bit weights: portable %d (want %d), AVX2 tile %d (want the saturated %d)", want[0], 255*127*16, got[0], 32767*2*4)
	}
}

// q7Node is a Q8 node over base with 7-bit weights (bits 7) or bits.
func q7Node(base string, bits int64, extra map[string]*ir.Attr) *ir.Node {
	n := &ir.Node{Name: "q7", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: []string{"x", "w", "s", "b"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{
		"base":         {Name: "base", Kind: ir.AttrString, S: base},
		"x_scale":      {Name: "x_scale", Kind: ir.AttrFloat, F: 0.01},
		"layout":       {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, 0, 0}},
		AttrWeightBits: {Name: AttrWeightBits, Kind: ir.AttrInt, I: bits},
	}}
	for k, v := range extra {
		n.Attrs[k] = v
	}
	return n
}

// TestQ8Layer7Twins runs 7-bit layers (pointwise convolutions, strided
// ones, k×k convolutions with strides, padding and groups through
// im2col, linear layers) portable and with the AVX2 u8 × s7 tiles: the
// same bits, also with inputs that quantize to 127 (u8 255) and weights
// at ±63.
func TestQ8Layer7Twins(t *testing.T) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add("vouch", Ops(reg))
	r := rand.New(rand.NewPCG(9, 7))
	w7 := func(n int, extreme bool) []int8 {
		w := make([]int8, n)
		for i := range w {
			w[i] = int8(r.IntN(127) - 63)
			if extreme {
				w[i] = int8(63 - 126*(i%2))
			}
		}
		return w
	}
	xs := func(n int, extreme bool) []float32 {
		x := randF32(r, n)
		if extreme {
			for i := range x {
				x[i] = 10 // x/0.01 clamps to 127: u8 255
			}
		}
		return x
	}
	type cs struct{ n, c, h, w, m, stride int }
	for _, ext := range []bool{true, false} {
		for _, s := range []cs{{1, 16, 8, 8, 24, 1}, {1, 35, 9, 7, 9, 1}, {2, 64, 5, 5, 130, 2}, {1, 200, 14, 14, 32, 1}} {
			node := q7Node("Conv", 7, map[string]*ir.Attr{"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(s.stride), int64(s.stride)}}})
			in := []*tensor.Tensor{tensor.From(xs(s.n*s.c*s.h*s.w, ext), s.n, s.c, s.h, s.w), tensor.From(w7(s.m*s.c, ext), s.m, s.c, 1, 1),
				tensor.From(randPos(r, s.m), s.m), tensor.From(randF32(r, s.m), s.m)}
			checkTwins(t, reg, node, in)
		}
		type ks struct{ n, c, h, w, m, k, stride, pad, group int }
		for _, s := range []ks{{1, 3, 9, 9, 8, 3, 1, 1, 1}, {2, 4, 7, 5, 6, 3, 2, 1, 2}, {1, 16, 20, 20, 32, 3, 1, 1, 2}, {1, 3, 23, 23, 16, 7, 2, 3, 1}, {1, 64, 40, 40, 8, 5, 1, 2, 1}} {
			node := q7Node("Conv", 7, map[string]*ir.Attr{
				"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(s.stride), int64(s.stride)}},
				"pads":    {Name: "pads", Kind: ir.AttrInts, Ints: []int64{int64(s.pad), int64(s.pad), int64(s.pad), int64(s.pad)}},
				"group":   {Name: "group", Kind: ir.AttrInt, I: int64(s.group)},
			})
			cg := s.c / s.group
			in := []*tensor.Tensor{tensor.From(xs(s.n*s.c*s.h*s.w, ext), s.n, s.c, s.h, s.w), tensor.From(w7(s.m*cg*s.k*s.k, ext), s.m, cg, s.k, s.k),
				tensor.From(randPos(r, s.m), s.m), tensor.From(randF32(r, s.m), s.m)}
			checkTwins(t, reg, node, in)
		}
		for _, s := range [][3]int{{1, 30, 64}, {7, 64, 32}, {33, 17, 5}, {2, 512, 1000}} {
			rows, k, n := s[0], s[1], s[2]
			node := q7Node("Gemm", 7, nil)
			in := []*tensor.Tensor{tensor.From(xs(rows*k, ext), rows, k), tensor.From(w7(n*k, ext), n, k), tensor.From(randPos(r, n), n), tensor.From(randF32(r, n), n)}
			checkTwins(t, reg, node, in)
		}
	}
}

// TestWeightBitsChecked checks that a plan's w_bits is validated when the
// layer is parsed: 7 with a weight outside ±63, or a width other than 7
// and 8, is an error.
func TestWeightBitsChecked(t *testing.T) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add("vouch", Ops(reg))
	in := func(w0 int8) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.From(make([]float32, 8), 2, 4), tensor.From([]int8{w0, 1, 2, 3, 4, 5, 6, 7}, 2, 4),
			tensor.From([]float32{1, 1}, 2), tensor.From([]float32{0, 0}, 2)}
	}
	for _, c := range []struct {
		bits int64
		w0   int8
		err  string
	}{{7, 63, ""}, {7, -63, ""}, {7, 64, "outside [-63, 63]"}, {7, -64, "outside"}, {8, 127, ""}, {6, 1, "want the int 7 or 8"}, {9, 1, "want the int 7 or 8"}} {
		node := q7Node("Gemm", c.bits, nil)
		op, err := reg.Lookup(node)
		if err != nil {
			t.Fatal(err)
		}
		_, err = op.Run(&kernel.Ctx{}, node, in(c.w0))
		if c.err == "" && err != nil {
			t.Errorf("w_bits %d, w %d: %v", c.bits, c.w0, err)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("w_bits %d, w %d: error %v, want %q", c.bits, c.w0, err, c.err)
		}
	}
	q, s := WeightScalesBits([]float32{-2, 1, 0.5, 2, 0, 0, 0, 0}, 2, 7)
	if !slices.Equal(q, []int8{-63, 31, 16, 63, 0, 0, 0, 0}) || s[0] != float32(2.0/63) {
		t.Fatalf("WeightScalesBits 7: %v %v", q, s)
	}
}

// TestPackQuad7Twins checks the AVX2 quad packers (float32 rows
// quantized, u8 rows zipped) against the portable loops, with NaN, ±Inf,
// halves and values past ±127, at widths around the 8-position blocks.
func TestPackQuad7Twins(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(7, 9))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0.5, 1.5, -2.5, 127.5, -127.5, 300, -300}
	for _, n := range []int{8, 9, 15, 16, 23, 64, 70} {
		ld := n + 3
		x := make([]float32, 4*ld)
		u := make([]uint8, 4*ld)
		for i := range x {
			x[i] = float32(r.NormFloat64() * 60)
			if r.IntN(4) == 0 {
				x[i] = special[r.IntN(len(special))]
			}
			u[i] = uint8(r.IntN(256))
		}
		want, got := make([]uint8, 4*n), make([]uint8, 4*n)
		quadRow(twins{}, want, x, ld, n, 1)
		quadRow(twins{fast: true, s7: true}, got, x, ld, n, 1)
		if !slices.Equal(want, got) {
			t.Fatalf("quadRow n %d: AVX2 %v, portable %v", n, got, want)
		}
		zipRow(twins{}, want, u, ld, n)
		zipRow(twins{fast: true, s7: true}, got, u, ld, n)
		if !slices.Equal(want, got) {
			t.Fatalf("zipRow n %d: AVX2 %v, portable %v", n, got, want)
		}
	}
}
