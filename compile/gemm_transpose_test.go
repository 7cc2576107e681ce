package compile_test

import (
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// TestTransposeGemmWeights: a Gemm with transB=1 and a constant B gets B
// stored K x N (the pass logs it), and the plan's output has the same bits
// as the graph run node by node and as the plan built without the pass;
// a B read twice is left alone.
func TestTransposeGemmWeights(t *testing.T) {
	transB := &ir.Attr{Name: "transB", Kind: ir.AttrInt, I: 1}
	for _, tc := range []struct {
		m, k, n int
		bias    bool
		act     string
		shared  bool
	}{
		{1, 1280, 1000, true, "", false},
		{1, 37, 19, false, "", false},
		{3, 64, 33, true, "Relu", false},
		{7, 20, 9, true, "", false},
		{1, 16, 24, true, "", true},
	} {
		mk := func() (*gb, string) {
			b := newGB([]int{tc.m, tc.k})
			in := []string{"x", b.constant("w", []int{tc.n, tc.k})}
			if tc.bias {
				in = append(in, b.constant("c", []int{tc.n}))
			}
			y := b.node("Gemm", in, "h", transB)
			if tc.act != "" {
				y = b.node(tc.act, []string{y}, "a")
			}
			if tc.shared {
				// a second reader of w: y2 = x·wᵀ again, added to y
				y2 := b.node("Gemm", []string{"x", "w"}, "h2", transB)
				y = b.node("Add", []string{y, y2}, "s")
			}
			return b, y
		}
		b, y := mk()
		b.check(t, y, true) // the plan against the graph run node by node
		b, y = mk()
		on, fired := buildRun(t, b, y, nil)
		b, y = mk()
		off, _ := buildRun(t, b, y, []string{"transpose-gemm-weights"})
		if want := !tc.shared; fired != want {
			t.Fatalf("%+v: pass fired = %v, want %v", tc, fired, want)
		}
		if !sameBits(on, off) {
			t.Fatalf("%+v: outputs differ with and without the pass", tc)
		}
	}
}

// buildRun builds b's graph (output out) with the given passes disabled,
// runs it on a fixed input and reports whether transpose-gemm-weights
// transposed a weight.
func buildRun(t *testing.T, b *gb, out string, disabled []string) (*tensor.Tensor, bool) {
	t.Helper()
	b.g.Outputs = []*ir.Value{{Name: out, Type: ir.Type{DType: tensor.Float32}}}
	shape, _ := b.g.Inputs[0].Type.Static()
	x := tensor.New(tensor.Float32, shape...)
	for i, d := 0, x.Data.([]float32); i < len(d); i++ {
		d[i] = float32(i%23) - 11.5
	}
	opts := compile.DefaultOptions()
	opts.Tactics = "heuristic"
	opts.DisabledPasses = disabled
	log := buildlog.New(nil)
	res, err := compile.Build(&ir.Model{Graph: b.g, Opsets: map[string]int64{"": 17}}, []byte("t"), "t", "test", opts, builtin.Registry(), log)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := exec.New(p.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	got, err := ex.Run(map[string]*tensor.Tensor{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	return got[out], log.Count("transpose-gemm-weights", "transposed") > 0
}
