package compile_test

import (
	"slices"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

// fusions builds b's graph (output out) and returns the build log's fusion
// records of pass.
func (b *gb) fusions(t *testing.T, out, pass string) []map[string]any {
	t.Helper()
	b.g.Outputs = []*ir.Value{{Name: out, Type: ir.Type{DType: tensor.Float32}}}
	opts := compile.DefaultOptions()
	opts.Tactics = "heuristic"
	log := buildlog.New(nil)
	if _, err := compile.Build(&ir.Model{Graph: b.g, Opsets: map[string]int64{"": 17}}, []byte("t"), "t", "test", opts, builtin.Registry(), log); err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	for _, r := range log.Records {
		if r.Pass == pass && r.Event == "fused" {
			recs = append(recs, r.Fields)
		}
	}
	return recs
}

func TestFuseElementwiseChain(t *testing.T) {
	mk := func() (*gb, string) {
		b := newGB([]int{3, 4099}) // blocks of 4096 and a tail
		y := b.node("Add", []string{"x", b.constant("k", nil, 0.25)}, "a")
		y = b.node("Relu", []string{y}, "r")
		y = b.node("Mul", []string{y, "x"}, "m")
		y = b.node("Sigmoid", []string{y}, "s")
		y = b.node("Div", []string{b.constant("one", []int{1, 1}, 1), y}, "d")
		return b, b.node("Tanh", []string{y}, "y")
	}
	b, y := mk()
	if kinds := b.check(t, y, true); !slices.Equal(kinds, []string{"Elementwise"}) {
		t.Fatalf("chain became %v", kinds)
	}
	b, y = mk()
	recs := b.fusions(t, y, "fuse-elementwise")
	if len(recs) != 1 || recs[0]["kind"] != "elementwise" || len(recs[0]["from"].([]string)) != 6 {
		t.Fatalf("log: %v", recs)
	}
}

// A tree: both operands of the Mul are chains from x.
func TestFuseElementwiseTree(t *testing.T) {
	b := newGB([]int{2, 50})
	l := b.node("Tanh", []string{"x"}, "l")
	l = b.node("Exp", []string{l}, "l2")
	r := b.node("Sigmoid", []string{"x"}, "r")
	r = b.node("Sub", []string{r, b.constant("h", nil, 0.5)}, "r2")
	y := b.node("Mul", []string{l, r}, "m")
	y = b.node("Clip", []string{y, b.constant("lo", nil, -0.3), b.constant("hi", nil, 0.7)}, "y")
	if kinds := b.check(t, y, true); !slices.Equal(kinds, []string{"Elementwise"}) {
		t.Fatalf("tree became %v", kinds)
	}
}

// What may not join: an operand that broadcasts (neither one element nor
// the output's shape), and a value read twice.
func TestFuseElementwiseBoundaries(t *testing.T) {
	b := newGB([]int{4, 8})
	y := b.node("Add", []string{"x", b.constant("bias", []int{8})}, "a") // broadcast operand
	y = b.node("Relu", []string{y}, "r")
	y = b.node("Exp", []string{y}, "e")
	if kinds := b.check(t, y, true); !slices.Equal(kinds, []string{"Add", "Elementwise"}) {
		t.Fatalf("broadcast chain became %v", kinds)
	}
	b = newGB([]int{4, 8})
	y = b.node("Neg", []string{"x"}, "n")
	t1 := b.node("Exp", []string{y}, "t1") // n is read twice: a group ends there
	t2 := b.node("Abs", []string{y}, "t2")
	y = b.node("Add", []string{t1, t2}, "s")
	y = b.node("Sqrt", []string{y}, "y")
	if kinds := b.check(t, y, true); !slices.Equal(kinds, []string{"Neg", "Elementwise"}) {
		t.Fatalf("shared value: %v", kinds)
	}
}

func TestFuseSiLU(t *testing.T) {
	for _, tc := range []struct {
		name     string
		build    func(b *gb) string
		kind     string
		sigFirst bool
	}{
		{"gemm+bias+silu", func(b *gb) string {
			y := b.node("Gemm", []string{"x", b.constant("w", []int{6, 5})}, "g")
			y = b.node("Add", []string{y, b.constant("bias", []int{5})}, "a")
			s := b.node("Sigmoid", []string{y}, "s")
			return b.node("Mul", []string{y, s}, "y")
		}, "bias/residual+activation", false},
		{"matmul+silu", func(b *gb) string {
			y := b.node("MatMul", []string{"x", b.constant("w", []int{6, 7})}, "g")
			s := b.node("Sigmoid", []string{y}, "s")
			return b.node("Mul", []string{s, y}, "y")
		}, "activation", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newGB([]int{4, 6})
			y := tc.build(b)
			if kinds := b.check(t, y, true); len(kinds) != 1 || kinds[0] != "Fused" {
				t.Fatalf("became %v", kinds)
			}
			b = newGB([]int{4, 6})
			recs := b.fusions(t, tc.build(b), "fuse-activation")
			if len(recs) != 1 || recs[0]["kind"] != tc.kind || recs[0]["activation"] != "SiLU" {
				t.Fatalf("log: %v", recs)
			}
		})
	}
	// Conv + residual + SiLU.
	b := newGB([]int{1, 3, 9, 9})
	pads := ints("pads", 1, 1, 1, 1)
	y := b.node("Conv", []string{"x", b.constant("w", []int{3, 3, 3, 3})}, "c", pads)
	y = b.node("Add", []string{y, "x"}, "a")
	s := b.node("Sigmoid", []string{y}, "s")
	y = b.node("Mul", []string{y, s}, "y")
	if kinds := b.check(t, y, true); len(kinds) != 1 || kinds[0] != "Fused" {
		t.Fatalf("conv+residual+silu became %v", kinds)
	}
	// The Sigmoid's output read elsewhere too: no SiLU fusion.
	b = newGB([]int{4, 6})
	y = b.node("MatMul", []string{"x", b.constant("w", []int{6, 6})}, "g")
	s = b.node("Sigmoid", []string{y}, "s")
	m := b.node("Mul", []string{y, s}, "m")
	y = b.node("Add", []string{m, s}, "y")
	if kinds := b.check(t, y, true); slices.Contains(kinds, "Fused") {
		t.Fatalf("SiLU fused although its Sigmoid has another reader: %v", kinds)
	}
}
