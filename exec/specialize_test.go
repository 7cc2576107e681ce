package exec_test

import (
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
)

// TestBindFoldsShapeArithmetic: binding tiny_bert (dynamic batch and
// sequence) folds its shape subgraph, so no Shape, Gather, Concat,
// Unsqueeze or Reshape layer is left to run (and allocate) per inference.
func TestBindFoldsShapeArithmetic(t *testing.T) {
	p, in := sharedPlan(t, "tiny_bert")
	ex, err := exec.New(p.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ex.Bind(shapesOf(in))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range b.Allocating() {
		switch n.OpType {
		case "Shape", "Gather", "Concat", "Unsqueeze", "Reshape", "Range":
			t.Errorf("%s still runs per inference: its shapes were not specialized", n.Label())
		}
	}
}
