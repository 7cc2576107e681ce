package rnn

import (
	"fmt"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/kerneltest"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// TestStepArgsLayout: step_amd64.s reads stepArgs at gen_step.py's
// offsets (ARGS there).
func TestStepArgsLayout(t *testing.T) {
	var p stepArgs
	for _, f := range []struct {
		name      string
		got, want uintptr
	}{
		{"k", unsafe.Offsetof(p.k), 0}, {"nblk", unsafe.Offsetof(p.nblk), 8},
		{"panel", unsafe.Offsetof(p.panel), 16}, {"tab", unsafe.Offsetof(p.tab), 24},
		{"peep", unsafe.Offsetof(p.peep), 32}, {"rbh", unsafe.Offsetof(p.rbh), 40},
		{"h", unsafe.Offsetof(p.h), 48}, {"pre", unsafe.Offsetof(p.pre), 80},
		{"c", unsafe.Offsetof(p.c), 112}, {"hout", unsafe.Offsetof(p.hout), 144},
		{"hb", unsafe.Offsetof(p.hb), 176},
	} {
		if f.got != f.want {
			t.Errorf("stepArgs.%s at offset %d, gen_step.py reads it at %d", f.name, f.got, f.want)
		}
	}
}

// special draws float32 values over every range the steps' activations
// branch on: random bit patterns (every exponent, subnormals, ±Inf, NaN),
// the neighbourhoods of Tanh32's 0.625 and 9.01 and of Exp32's limits
// (Sigmoid32 of about ±87..89), zeros, and ordinary gate values.
func special(r *rand.Rand) float32 {
	switch r.Intn(8) {
	case 0:
		return math.Float32frombits(r.Uint32())
	case 1:
		return float32(r.NormFloat64() * 3)
	case 2:
		v := []float32{0.625, 9.01, 87.33654475, 88.72283935546875, 0, 1}[r.Intn(6)]
		v = math.Float32frombits(math.Float32bits(v) + uint32(r.Intn(9)) - 4)
		if r.Intn(2) == 0 {
			v = -v
		}
		return v
	case 3:
		return []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), float32(math.Copysign(0, -1)), 1e-40, -1e-40}[r.Intn(6)]
	case 4:
		return float32(r.Float64()*200 - 100)
	}
	return float32(r.Float64()*2 - 1)
}

// sameOrNaN reports whether a and b have the same bits, or are both NaN
// (the steps keep NaN payloads only as far as fast32 does: see fast.go).
func sameOrNaN(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestStepTwins checks the AVX-512 and AVX2 fused steps against
// stepPortable, bit for bit, for LSTM (with and without peepholes) and GRU, one to four
// rows, hidden sizes on and off the 16-unit blocks, chains of length 0
// (the gate values themselves reach the activations, so every range of
// Sigmoid32 and Tanh32 is checked against vmath's scalar functions) and
// longer, over ordinary and special values.
func TestStepTwins(t *testing.T) {
	levels := fusedLevels()[1:]
	if len(levels) == 0 {
		t.Skip("no AVX2 or AVX-512 on this CPU: stepPortable is all there is (TestFast32Twins checks it)")
	}
	r := rand.New(rand.NewSource(7))
	for _, lv := range levels {
		for _, kind := range []cellKind{cellLSTM, cellGRU} {
			gates := kind.gates()
			for _, peep := range []bool{false, true} {
				if peep && kind != cellLSTM {
					continue
				}
				for _, H := range []int{0, 16, 37, 128} {
					for rows := 1; rows <= 4; rows++ {
						for _, sp := range []bool{false, true} {
							name := fmt.Sprintf("level%d_%d_peep%v_h%d_rows%d_special%v", lv, kind, peep, H, rows, sp)
							val := func() float32 {
								if sp {
									return special(r)
								}
								return float32(r.Float64()*2 - 1)
							}
							K := H
							nblk := max((H+15)/16, 1)
							if H == 0 {
								K, nblk = 0, 256 // 4096 lanes a gate straight into the activations
							}
							fill := func(n int) []float32 {
								s := make([]float32, n)
								for i := range s {
									s[i] = val()
								}
								return s
							}
							panel := fill(max(nblk*K*gates*16, 1))
							p := stepArgs{k: K, nblk: nblk, panel: &panel[0], tab: &stepTab}
							rbh := fill(nblk * 16)
							p.rbh = &rbh[0]
							if peep {
								pp := fill(nblk * 48)
								p.peep = &pp[0]
							}
							var cz, cp [4][]float32
							var hz, hp [4][]float32
							q := p
							for i := 0; i < rows; i++ {
								h, pre := fill(nblk*16), fill(nblk*gates*16)
								p.h[i], p.pre[i], p.hb[i] = &h[0], &pre[0], &h[0]
								q.h[i], q.pre[i], q.hb[i] = &h[0], &pre[0], &h[0]
								cz[i] = fill(nblk * 16)
								cp[i] = append([]float32{}, cz[i]...)
								hz[i], hp[i] = make([]float32, nblk*16), make([]float32, nblk*16)
								p.c[i], q.c[i] = &cz[i][0], &cp[i][0]
								p.hout[i], q.hout[i] = &hz[i][0], &hp[i][0]
							}
							runStep(lv, kind, &p, rows)
							stepPortable(kind, &q, rows)
							for i := 0; i < rows; i++ {
								for j := range hz[i] {
									if !sameOrNaN(hz[i][j], hp[i][j]) {
										t.Fatalf("%s: row %d h[%d] is %#x, portable %#x", name, i, j, math.Float32bits(hz[i][j]), math.Float32bits(hp[i][j]))
									}
									if kind == cellLSTM && !sameOrNaN(cz[i][j], cp[i][j]) {
										t.Fatalf("%s: row %d c[%d] is %#x, portable %#x", name, i, j, math.Float32bits(cz[i][j]), math.Float32bits(cp[i][j]))
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestInto: each op's Into writes Run's bits into outputs that hold
// garbage, through the fused path and the others, with the packed tactic
// (twice through one State: the second call on the first's scratch) and
// without, with outputs omitted.
func TestInto(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	for _, tc := range []struct {
		op   string
		dirs int
		lbr  int64
		lens bool
	}{
		{"LSTM", 2, 0, true}, {"LSTM", 1, 0, false}, {"GRU", 2, 1, false}, {"GRU", 1, 0, true}, {"RNN", 2, 0, true},
	} {
		dir := map[int]string{1: "forward", 2: "bidirectional"}[tc.dirs]
		in := inputs(r, tc.op, tc.dirs, 6, 3, 11, 21)
		if tc.lens {
			in[4] = tensor.From([]int32{6, 2, 0}, 3)
		}
		for _, packed := range []bool{false, true} {
			attrs := []*ir.Attr{intA("hidden_size", 21), str("direction", dir), intA("linear_before_reset", tc.lbr)}
			if packed {
				attrs = append(attrs, str(kernel.TacticAttr, TacticPacked))
			}
			n := node(tc.op, attrs...)
			want := runOp(t, n, in...)
			kc := &kernel.Ctx{State: new(kernel.State)}
			for call := 0; call < 2; call++ {
				for omit := 0; omit < len(want); omit++ {
					out := make([]*tensor.Tensor, len(want))
					for i, w := range want {
						if i == omit && i > 0 {
							continue
						}
						out[i] = tensor.New(tensor.Float32, w.Shape...)
						for j := range out[i].Data.([]float32) {
							out[i].Data.([]float32)[j] = float32(math.NaN())
						}
					}
					if err := Ops()[tc.op].Into(kc, n, in, out); err != nil {
						t.Fatal(err)
					}
					for i, o := range out {
						if o != nil {
							sameBits(t, fmt.Sprintf("%s %s packed %v call %d output %d", tc.op, dir, packed, call, i), o, want[i])
						}
					}
				}
			}
		}
	}
}

// BenchmarkStep is one fused step of the zoo's cell sizes, at one and
// four rows.
func BenchmarkStep(b *testing.B) {
	lv := fusedLevels()[len(fusedLevels())-1]
	if lv == chainPortable {
		b.Skip("no AVX2 or AVX-512")
	}
	for _, H := range []int{128, 256} {
		for _, kind := range []cellKind{cellLSTM, cellGRU} {
			for _, rows := range []int{1, 4} {
				gates, nblk := kind.gates(), H/16
				fill := func(n int) []float32 {
					s := make([]float32, n)
					for i := range s {
						s[i] = 0.01 * float32(i%7)
					}
					return s
				}
				panel, rbh := fill(nblk*H*gates*16), fill(H)
				p := stepArgs{k: H, nblk: nblk, panel: &panel[0], tab: &stepTab, rbh: &rbh[0]}
				for r := 0; r < rows; r++ {
					p.h[r], p.hout[r], p.pre[r], p.c[r] = &fill(H)[0], &fill(H)[0], &fill(gates * H)[0], &fill(H)[0]
					p.hb[r] = p.h[r]
				}
				b.Run(fmt.Sprintf("%s/h%d/rows%d", map[cellKind]string{cellLSTM: "LSTM", cellGRU: "GRU"}[kind], H, rows), func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						runStep(lv, kind, &p, rows)
					}
				})
			}
		}
	}
}

// TestPrepare: Prepare packs a packed node's weights at bind time (X's
// values unknown), and its runs then use that pack, with Run's bits.
func TestPrepare(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for _, op := range []string{"RNN", "GRU", "LSTM"} {
		in := inputs(r, op, 2, 4, 2, 10, 24)
		n := node(op, intA("hidden_size", 24), str("direction", "bidirectional"), intA("linear_before_reset", 1), str(kernel.TacticAttr, TacticPacked))
		want := runOp(t, node(op, intA("hidden_size", 24), str("direction", "bidirectional"), intA("linear_before_reset", 1)), in...)
		kc := &kernel.Ctx{State: new(kernel.State)}
		bind := append([]*tensor.Tensor{}, in...)
		bind[0] = &tensor.Tensor{DType: tensor.Float32, Shape: in[0].Shape}
		bind[5], bind[4] = nil, nil
		if op == "LSTM" {
			bind[6] = nil
		}
		if err := Ops()[op].Prepare(kc, n, bind); err != nil {
			t.Fatal(err)
		}
		if kc.State.Len() != 1 {
			t.Fatalf("%s: Prepare left %d values in the State, want 1", op, kc.State.Len())
		}
		cfg := mustConfig(t, op, n, in)
		fused := haveY && fusedOK(cfg)
		first := packOf(kc, n, cfg, in[1].Data.([]float32), in[2].Data.([]float32), fused)
		got, err := Ops()[op].Run(kc, n, in)
		if err != nil {
			t.Fatal(err)
		}
		for k := range want {
			sameBits(t, fmt.Sprintf("%s output %d", op, k), got[k], want[k])
		}
		if p := packOf(kc, n, cfg, in[1].Data.([]float32), in[2].Data.([]float32), fused); p != first {
			t.Errorf("%s: the run repacked the weights Prepare packed", op)
		}
	}
}

// TestLevelsThreadsBatch runs the ops as a plan does (Into, the packed
// tactic, a State) at every instruction-set level, on one and two
// workers, at batch 8 with uneven sequence lengths: every run gives the
// portable level's bits on one worker, and each batch row run alone gives
// its row of the batch (zoo-like cells: the fused path where the CPU has
// AVX-512, 4+4 rows a step; the bidirectional GRU of hidden 264 is large
// enough that its directions run on two workers).
func TestLevelsThreadsBatch(t *testing.T) {
	r := rand.New(rand.NewSource(13))
	pool := parallel.New(2)
	defer pool.Close()
	for _, tc := range []struct {
		op     string
		dir    string
		hidden int
		peep   bool
	}{
		{"LSTM", "forward", 136, false}, {"LSTM", "bidirectional", 40, true}, {"LSTM", "reverse", 256, false},
		{"GRU", "bidirectional", 264, false}, {"GRU", "forward", 48, false}, {"RNN", "forward", 40, false},
		// Larger cells: on AVX2 the eight rows go over chunks of two
		// blocks (of 20) and of one (of 19).
		{"GRU", "forward", 320, false}, {"LSTM", "reverse", 300, true},
	} {
		dirs := map[string]int{"forward": 1, "reverse": 1, "bidirectional": 2}[tc.dir]
		const seq, batch, input = 5, 8, 13
		in := inputs(r, tc.op, dirs, seq, batch, input, tc.hidden)
		if tc.op == "LSTM" && !tc.peep {
			in = in[:7]
		}
		sl := make([]int32, batch)
		for b := range sl {
			sl[b] = int32(r.Intn(seq + 1))
		}
		sl[3] = seq
		in[4] = tensor.From(sl, batch)
		n := node(tc.op, intA("hidden_size", int64(tc.hidden)), str("direction", tc.dir), intA("linear_before_reset", 1), str(kernel.TacticAttr, TacticPacked))
		run := func(kc *kernel.Ctx, in []*tensor.Tensor) []*tensor.Tensor {
			want := runOp(t, n, in...) // only for the shapes
			out := make([]*tensor.Tensor, len(want))
			for i, w := range want {
				out[i] = tensor.New(tensor.Float32, w.Shape...)
			}
			for call := 0; call < 2; call++ {
				if err := Ops()[tc.op].Into(kc, n, in, out); err != nil {
					t.Fatal(err)
				}
			}
			return out
		}
		ref := run(&kernel.Ctx{ISA: kernel.ISAPortable, State: new(kernel.State)}, in)
		name := fmt.Sprintf("%s %s h%d", tc.op, tc.dir, tc.hidden)
		for _, l := range kerneltest.Levels() {
			for _, p := range []*parallel.Pool{nil, pool} {
				got := run(&kernel.Ctx{ISA: l, Pool: p, State: new(kernel.State)}, in)
				for k := range ref {
					sameBits(t, fmt.Sprintf("%s: %s, %d workers, output %d", name, l, p.Workers(), k), got[k], ref[k])
				}
			}
		}
		for b := 0; b < batch; b++ {
			one := append([]*tensor.Tensor{}, in...)
			one[0], one[5] = row(in[0], 1, b), row(in[5], 1, b)
			if tc.op == "LSTM" {
				one[6] = row(in[6], 1, b)
			}
			one[4] = tensor.From([]int32{sl[b]}, 1)
			got := run(&kernel.Ctx{Pool: pool, State: new(kernel.State)}, one)
			sameBits(t, fmt.Sprintf("%s: row %d alone, Y", name, b), got[0], row(ref[0], 2, b))
			for k := 1; k < len(got); k++ {
				sameBits(t, fmt.Sprintf("%s: row %d alone, output %d", name, b, k), got[k], row(ref[k], 1, b))
			}
		}
	}
}

// TestFusedEdges: zero steps, a zero batch and an input of size 0 through
// the ops (the fused path where the CPU has AVX-512) against the scalar
// cell.
func TestFusedEdges(t *testing.T) {
	r := rand.New(rand.NewSource(17))
	for _, op := range []string{"LSTM", "GRU"} {
		for _, sz := range [][3]int{{0, 2, 5}, {3, 0, 5}, {3, 2, 0}} {
			seq, batch, input := sz[0], sz[1], sz[2]
			in := inputs(r, op, 2, seq, batch, input, 20)
			n := node(op, intA("hidden_size", 20), str("direction", "bidirectional"), intA("linear_before_reset", 1))
			cfg := mustConfig(t, op, n, in)
			lens := make([]int, batch)
			for b := range lens {
				lens[b] = seq
			}
			want, err := compute(cfg, in, lens, f32, identity32)
			if err != nil {
				t.Fatal(err)
			}
			got := runOp(t, n, in...)
			for k := range want {
				sameBits(t, fmt.Sprintf("%s seq %d batch %d input %d output %d", op, seq, batch, input, k), got[k], want[k])
			}
		}
	}
}

// TestChainRows8Twins checks chainRows8Y and chainRows8Z against
// chainRowsPortable row by row: k of 0 and more, 16 to 96 columns, row
// strides wider than the columns, NaN canonicalisation.
func TestChainRows8Twins(t *testing.T) {
	type kern func(k int, xp *float32, b *float32, ldb int, y *float32, ldy int, n int)
	var ks []kern
	if haveY {
		ks = append(ks, chainRows8Y)
	}
	if haveZ {
		ks = append(ks, chainRows8Z)
	}
	if len(ks) == 0 {
		t.Skip("no AVX2 or AVX-512 on this CPU")
	}
	r := rand.New(rand.NewSource(19))
	for ki, f := range ks {
		for _, k := range []int{0, 1, 7, 40} {
			for _, n := range []int{32, 64, 96} {
				if ki == 0 && n == 32 {
					n = 16 // chainRows8Y takes multiples of 16
				}
				ldb, ldy := n+r.Intn(9), n+r.Intn(9)
				x := make([]float32, 8*max(k, 1))
				b := make([]float32, max(k*ldb, 1))
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				for i := range b {
					b[i] = float32(r.NormFloat64())
				}
				if k > 0 {
					b[5] = float32(math.NaN())
					b[ldb*(k-1)+1] = math.Float32frombits(0xffc00001)
				}
				y := make([]float32, 8*ldy)
				for i := range y {
					y[i] = float32(r.NormFloat64())
				}
				want := append([]float32{}, y...)
				for q := 0; q < 8; q++ {
					xr := make([]float32, k)
					for kk := range xr {
						xr[kk] = x[kk*8+q]
					}
					chainRowsPortable(xr, b, ldb, want[q*ldy:q*ldy+n])
				}
				f(k, &x[0], &b[0], ldb, &y[0], ldy, n)
				for i := range y {
					if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
						t.Fatalf("kernel %d k=%d n=%d: y[%d] is %#x, portable %#x", ki, k, n, i, math.Float32bits(y[i]), math.Float32bits(want[i]))
					}
				}
			}
		}
	}
}

// BenchmarkChainRows8 is the input projection's kernel on one panel of a
// zoo layer (input 1024, 32 columns: 128 KB, from L2).
func BenchmarkChainRows8(b *testing.B) {
	f := chainRows8Z
	if !haveZ {
		if !haveY {
			b.Skip("no AVX2 or AVX-512")
		}
		f = chainRows8Y
	}
	const k = 1024
	x, w, y := make([]float32, 8*k), make([]float32, k*32), make([]float32, 8*32)
	for i := range w {
		w[i] = 1e-3 * float32(i%13)
	}
	for i := 0; i < b.N; i++ {
		f(k, &x[0], &w[0], 32, &y[0], 32, 32)
	}
}
