package tree

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

var twinSpecs = []genSpec{
	{trees: 13, depth: 5, feats: 6, targets: 1, modes: []string{"BRANCH_LT"}, leafStop: 0.1},
	{trees: 9, depth: 7, feats: 4, targets: 3, modes: []string{"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT"}, leafStop: 0.3},
	{trees: 20, depth: 4, feats: 5, targets: 4, modes: []string{"BRANCH_LEQ", "BRANCH_GT"}, classifier: true, leafStop: 0.2},
	{trees: 3, depth: 6, feats: 3, targets: 2, modes: []string{"BRANCH_LT", "BRANCH_EQ", "BRANCH_NEQ"}, leafStop: 0.2},
}

func sameBits(a, b []*tensor.Tensor) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].DType == tensor.String {
			if len(a[i].Data.([]string)) != len(b[i].Data.([]string)) {
				return false
			}
			for k, s := range a[i].Data.([]string) {
				if b[i].Data.([]string)[k] != s {
					return false
				}
			}
			continue
		}
		if !bytes.Equal(tensor.RawBytes(a[i]), tensor.RawBytes(b[i])) {
			return false
		}
	}
	return true
}

// TestTwin: the compiled layout and the reference walk give the same bits
// on random ensembles and inputs full of thresholds, their neighbours,
// NaN, infinities and signed zeros; at 1, 2 and 3 workers; and a row
// alone gives the bits it has inside a batch.
func TestTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for si, g := range twinSpecs {
		g.thresholds = grid
		for rep := 0; rep < 5; rep++ {
			n := genNode(rng, g)
			if p, err := build(n); err != nil || (p.c == nil) != (si == 3) {
				t.Fatalf("spec %d: compiled layout %v, parse error %v", si, p != nil && p.c != nil, err)
			}
			x := genInput(rng, 37, g.feats)
			ref, err := runNode(n, x, TacticWalk, 1)
			if err != nil {
				t.Fatalf("spec %d: %v", si, err)
			}
			for _, tac := range []string{"", TacticCompiled} {
				for _, w := range []int{1, 2, 3} {
					got, err := runNode(n, x, tac, w)
					if err != nil {
						t.Fatal(err)
					}
					if !sameBits(got, ref) {
						t.Fatalf("spec %d rep %d: tactic %q at %d workers differs from the walk", si, rep, tac, w)
					}
				}
			}
			// Batch invariance: each row alone.
			xs := x.Data.([]float32)
			for r := 0; r < 37; r += 5 {
				one := tensor.From(append([]float32(nil), xs[r*g.feats:(r+1)*g.feats]...), 1, g.feats)
				got, err := runNode(n, one, "", 1)
				if err != nil {
					t.Fatal(err)
				}
				for o := range got {
					w := ref[o].Len() / 37
					a := tensor.RawBytes(got[o])
					b := tensor.RawBytes(ref[o])
					sz := len(b) / ref[o].Len()
					if got[o].DType != tensor.String && !bytes.Equal(a, b[r*w*sz:(r+1)*w*sz]) {
						t.Fatalf("spec %d: row %d alone differs from the row in its batch (output %d)", si, r, o)
					}
				}
			}
		}
	}
}

// TestPreparedState: a bound plan's ensemble is parsed and laid out once,
// at Prepare, kept in the node's kernel.State and reused by every run;
// without a State each run parses anew, with the same bits.
func TestPreparedState(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	g := twinSpecs[0]
	g.thresholds = grid
	n := genNode(rng, g)
	x := genInput(rng, 9, g.feats)
	op := Ops()[n.OpType]
	st := &kernel.State{}
	c := &kernel.Ctx{State: st}
	if err := op.Prepare(c, n, []*tensor.Tensor{x}); err != nil {
		t.Fatal(err)
	}
	if st.Len() != 1 {
		t.Fatalf("state holds %d values after Prepare, want 1", st.Len())
	}
	p, _ := prepare(c, n)
	for range 3 {
		got, err := op.Run(c, n, []*tensor.Tensor{x})
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := op.Run(&kernel.Ctx{}, n, []*tensor.Tensor{x})
		if err != nil || !sameBits(got, fresh) {
			t.Fatalf("a run without a State differs: %v", err)
		}
		if q, _ := prepare(c, n); q != p || st.Len() != 1 {
			t.Fatal("the prepared ensemble was rebuilt")
		}
	}
}
