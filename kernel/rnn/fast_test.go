package rnn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/kerneltest"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

func floatA(name string, v float32) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrFloat, F: v} }

// TestFast32Twins checks, bit for bit, the float32 path at every
// instruction-set level (AVX-512 chains, portable chains; vmath at that
// level) against the scalar cell (the reference: every chain is its chain), over the operators, both
// directions, both layouts, sequence lengths, clip, linear_before_reset,
// input_forget, peepholes, missing B and states, other activations, and
// hidden sizes on and off the 16-lane groups.
func TestFast32Twins(t *testing.T) {
	r := rand.New(rand.NewSource(16))
	type tc struct {
		op                       string
		dir                      string
		seq, batch, in, hidden   int
		layout, lbr, coupled     int64
		clip                     float32
		noB, noState, peep, lens bool
		acts                     []string
	}
	cases := []tc{
		{op: "LSTM", dir: "forward", seq: 7, batch: 2, in: 19, hidden: 37, peep: true},
		{op: "LSTM", dir: "bidirectional", seq: 5, batch: 3, in: 16, hidden: 160, lens: true},
		{op: "LSTM", dir: "reverse", seq: 4, batch: 1, in: 33, hidden: 64, clip: 0.7, coupled: 1, noB: true},
		{op: "LSTM", dir: "forward", seq: 3, batch: 2, in: 8, hidden: 130, layout: 1, noState: true, acts: []string{"HardSigmoid", "Relu", "Softsign"}},
		{op: "GRU", dir: "forward", seq: 6, batch: 2, in: 24, hidden: 48, lbr: 1},
		{op: "GRU", dir: "bidirectional", seq: 5, batch: 2, in: 12, hidden: 129, lbr: 0, lens: true},
		{op: "GRU", dir: "reverse", seq: 4, batch: 3, in: 40, hidden: 16, lbr: 1, noB: true, clip: 0.5},
		{op: "GRU", dir: "forward", seq: 3, batch: 1, in: 5, hidden: 7, layout: 1, lbr: 0},
		{op: "RNN", dir: "bidirectional", seq: 6, batch: 2, in: 20, hidden: 200, lens: true},
		{op: "RNN", dir: "forward", seq: 5, batch: 1, in: 3, hidden: 17, acts: []string{"Relu"}, noState: true},
		// Eight steps at a time in the input projection (chainRows8Z),
		// with column tails past the multiples of 32 and a last partial group.
		{op: "LSTM", dir: "bidirectional", seq: 19, batch: 2, in: 21, hidden: 37, lens: true},
		{op: "GRU", dir: "forward", seq: 16, batch: 1, in: 64, hidden: 48, lbr: 1},
		{op: "RNN", dir: "reverse", seq: 9, batch: 1, in: 8, hidden: 64, layout: 1},
		// Eight batch rows at a step share Rᵀ (chainRows8Z), runs of rows
		// split by sequence lengths, column tails.
		{op: "LSTM", dir: "bidirectional", seq: 6, batch: 11, in: 10, hidden: 40, lens: true, peep: true},
		{op: "GRU", dir: "forward", seq: 5, batch: 9, in: 7, hidden: 33, lbr: 0, lens: true},
		{op: "GRU", dir: "reverse", seq: 4, batch: 8, in: 12, hidden: 64, lbr: 1, layout: 1},
		{op: "RNN", dir: "forward", seq: 10, batch: 10, in: 9, hidden: 32},
		// Larger cells: 4+1 rows a step, hidden sizes past 256.
		{op: "LSTM", dir: "forward", seq: 5, batch: 5, in: 12, hidden: 136, lens: true, peep: true},
		{op: "LSTM", dir: "reverse", seq: 3, batch: 1, in: 7, hidden: 256},
		{op: "GRU", dir: "reverse", seq: 4, batch: 1, in: 9, hidden: 260, lbr: 1},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d_%s_%s_h%d", i, c.op, c.dir, c.hidden), func(t *testing.T) {
			dirs := 1
			if c.dir == "bidirectional" {
				dirs = 2
			}
			in := inputs(r, c.op, dirs, c.seq, c.batch, c.in, c.hidden)
			if c.noB {
				in[3] = nil
			}
			if c.noState {
				in[5] = nil
				if c.op == "LSTM" {
					in[6] = nil
				}
			}
			if c.op == "LSTM" && !c.peep {
				in = in[:7]
			}
			if c.lens {
				sl := make([]int32, c.batch)
				for b := range sl {
					sl[b] = int32(r.Intn(c.seq + 1))
				}
				sl[0] = int32(c.seq)
				in[4] = tensor.From(sl, c.batch)
			}
			if c.layout == 1 {
				in[0] = swap01(in[0])
				for _, k := range []int{5, 6} {
					if k < len(in) && in[k] != nil {
						in[k] = swap01(in[k])
					}
				}
			}
			attrs := []*ir.Attr{intA("hidden_size", int64(c.hidden)), str("direction", c.dir), intA("layout", c.layout)}
			if c.op == "GRU" {
				attrs = append(attrs, intA("linear_before_reset", c.lbr))
			}
			if c.op == "LSTM" {
				attrs = append(attrs, intA("input_forget", c.coupled))
			}
			if c.clip > 0 {
				attrs = append(attrs, floatA("clip", c.clip))
			}
			if c.acts != nil {
				var a []string
				for d := 0; d < dirs; d++ {
					a = append(a, c.acts...)
				}
				attrs = append(attrs, strs("activations", a...))
			}
			n := node(c.op, attrs...)
			kind := map[string]cellKind{"RNN": cellRNN, "GRU": cellGRU, "LSTM": cellLSTM}[c.op]
			cfg, err := newConfig(kind, n, in)
			if err != nil {
				t.Fatal(err)
			}
			lens := make([]int, c.batch)
			for b := range lens {
				lens[b] = c.seq
				if in[4] != nil {
					lens[b] = int(in[4].Data.([]int32)[b])
				}
			}
			ref, err := compute(cfg, in, lens, f32, identity32)
			if err != nil {
				t.Fatal(err)
			}
			// Every level (portable, AVX2, AVX-512) against the scalar cell.
			for _, l := range kerneltest.Levels() {
				got, err := compute32(cfg, in, lens, nil, (*kernel.Ctx)(nil).WithISA(l))
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(ref) {
					t.Fatalf("%s: %d outputs, want %d", l, len(got), len(ref))
				}
				for k := range ref {
					sameBits(t, fmt.Sprintf("%s output %d", l, k), got[k], ref[k])
				}
			}
			// The fused path: its AVX-512 and AVX2 steps and their
			// portable twin, on one worker and on two.
			if !fusedOK(cfg) {
				return
			}
			pool := parallel.New(2)
			defer pool.Close()
			for _, lv := range fusedLevels() {
				for _, kc := range []*kernel.Ctx{nil, {Pool: pool}} {
					got := fusedOutputs(cfg, in, lens, kc, lv)
					for k := range ref {
						sameBits(t, fmt.Sprintf("fused (level %d, pool %v) output %d", lv, kc != nil, k), got[k], ref[k])
					}
				}
			}
		})
	}
}

// swap01 swaps the first two dimensions of a rank-3 tensor (layout 0 ↔ 1).
func swap01(t *tensor.Tensor) *tensor.Tensor {
	a, b, c := t.Shape[0], t.Shape[1], t.Shape[2]
	src := t.Data.([]float32)
	dst := make([]float32, len(src))
	for i := 0; i < a; i++ {
		for j := 0; j < b; j++ {
			copy(dst[(j*a+i)*c:(j*a+i+1)*c], src[(i*b+j)*c:(i*b+j+1)*c])
		}
	}
	return tensor.From(dst, b, a, c)
}

func sameBits(t *testing.T, what string, got, want *tensor.Tensor) {
	t.Helper()
	if tensor.ShapeString(got.Shape) != tensor.ShapeString(want.Shape) {
		t.Fatalf("%s: shape %v, want %v", what, got.Shape, want.Shape)
	}
	g, w := got.Data.([]float32), want.Data.([]float32)
	for i := range w {
		if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
			t.Fatalf("%s: element %d is %v (%#x), want %v (%#x)", what, i, g[i], math.Float32bits(g[i]), w[i], math.Float32bits(w[i]))
		}
	}
}

// TestChainRowsTwins checks the AVX-512 and AVX2 chains against the
// portable ones on every column count up to 300 (the 128-, 64- and
// 16-column blocks, the 64-, 32- and 8-column ones and the portable tail),
// a row stride wider than the columns, k = 0, and NaN canonicalisation.
func TestChainRowsTwins(t *testing.T) {
	var levels []chainLevel
	if haveY {
		levels = append(levels, chainAVX2)
	}
	if haveZ {
		levels = append(levels, chainAVX512)
	}
	if len(levels) == 0 {
		t.Skip("no AVX2 or AVX-512 on this CPU: the portable chains are all there is (TestFast32Twins checks them)")
	}
	r := rand.New(rand.NewSource(3))
	for _, lv := range levels {
		for _, k := range []int{0, 1, 5, 64} {
			for n := 1; n <= 300; n += 1 + n/16 {
				ldb := n + r.Intn(20)
				x, b := make([]float32, k), make([]float32, max(k*ldb, 1))
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				for i := range b {
					b[i] = float32(r.NormFloat64())
				}
				if k > 0 && n > 3 {
					b[3] = float32(math.NaN())
					b[ldb*(k-1)] = math.Float32frombits(0xffc00001) // a NaN with a payload
				}
				y1 := make([]float32, n)
				for i := range y1 {
					y1[i] = float32(r.NormFloat64())
				}
				y2 := append([]float32{}, y1...)
				chainRows(lv, x, b, ldb, y1)
				chainRowsPortable(x, b, ldb, y2)
				for j := range y1 {
					if math.Float32bits(y1[j]) != math.Float32bits(y2[j]) {
						t.Fatalf("level %d k=%d n=%d ldb=%d: column %d is %#x, portable %#x", lv, k, n, ldb, j, math.Float32bits(y1[j]), math.Float32bits(y2[j]))
					}
				}
			}
		}
	}
}

// BenchmarkLSTM32 is one zoo-sized LSTM (batch 1, 32 steps, input 64,
// hidden 128) on the float32 path.
func BenchmarkLSTM32(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	for _, hidden := range []int{128, 512} {
		b.Run(fmt.Sprint("h", hidden), func(b *testing.B) {
			in := inputs(r, "LSTM", 1, 32, 1, 64, hidden)
			n := node("LSTM", intA("hidden_size", int64(hidden)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := Ops()["LSTM"].Run(nil, n, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPackedTactic: a node with TacticPacked gives the default path's
// bits, keeps its transposed weights in its kernel.State between runs, and
// repacks when it runs on other weights.
func TestPackedTactic(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for _, op := range []string{"RNN", "GRU", "LSTM"} {
		in := inputs(r, op, 2, 5, 2, 12, 40)
		plain := node(op, intA("hidden_size", 40), str("direction", "bidirectional"))
		packed := node(op, intA("hidden_size", 40), str("direction", "bidirectional"), str(kernel.TacticAttr, TacticPacked))
		want := runOp(t, plain, in...)
		kc := &kernel.Ctx{State: new(kernel.State)}
		var first *pack
		for run := 0; run < 2; run++ {
			got, err := Ops()[op].Run(kc, packed, in)
			if err != nil {
				t.Fatal(err)
			}
			for k := range want {
				sameBits(t, fmt.Sprintf("%s run %d output %d", op, run, k), got[k], want[k])
			}
			cfg := mustConfig(t, op, packed, in)
			p := packOf(kc, packed, cfg, in[1].Data.([]float32), in[2].Data.([]float32), haveY && fusedOK(cfg))
			if first == nil {
				first = p
			} else if p != first {
				t.Errorf("%s: the pack was rebuilt for the same weights", op)
			}
		}
		if kc.State.Len() != 1 {
			t.Errorf("%s: the State holds %d values, want 1", op, kc.State.Len())
		}
		// Other weights (a new W and R) through the same node.
		in2 := append([]*tensor.Tensor{}, in...)
		in2[1], in2[2] = random(r, in[1].Shape...), random(r, in[2].Shape...)
		want2 := runOp(t, plain, in2...)
		got2, err := Ops()[op].Run(kc, packed, in2)
		if err != nil {
			t.Fatal(err)
		}
		for k := range want2 {
			sameBits(t, op+" other weights", got2[k], want2[k])
		}
	}
}

func mustConfig(t *testing.T, op string, n *ir.Node, in []*tensor.Tensor) config {
	t.Helper()
	c, err := newConfig(map[string]cellKind{"RNN": cellRNN, "GRU": cellGRU, "LSTM": cellLSTM}[op], n, in)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fusedLevels are the fused path's levels this CPU runs: the portable
// twin, AVX2, AVX-512.
func fusedLevels() []chainLevel {
	lv := []chainLevel{chainPortable}
	if haveY {
		lv = append(lv, chainAVX2)
	}
	if haveZ {
		lv = append(lv, chainAVX512)
	}
	return lv
}

// fusedOutputs runs the fused path at level lv into fresh outputs, twice
// through one pack (the second call on the first's scratch).
func fusedOutputs(c config, in []*tensor.Tensor, lens []int, kc *kernel.Ctx, lv chainLevel) []*tensor.Tensor {
	pk := &pack{fused: packFused(c, in[1].Data.([]float32), in[2].Data.([]float32))}
	yShape, stShape := c.outShapes()
	var out []*tensor.Tensor
	for run := 0; run < 2; run++ {
		out = []*tensor.Tensor{tensor.New(tensor.Float32, yShape...), tensor.New(tensor.Float32, stShape...), tensor.New(tensor.Float32, stShape...)}
		for _, o := range out {
			for i := range o.Data.([]float32) {
				o.Data.([]float32)[i] = float32(math.NaN()) // garbage, as the executor's arena may hold
			}
		}
		computeFused(c, in, lens, pk.fused, pk, kc, lv, out[0].Data.([]float32), out[1].Data.([]float32), out[2].Data.([]float32))
	}
	if c.kind != cellLSTM {
		out = out[:2]
	}
	return out
}
