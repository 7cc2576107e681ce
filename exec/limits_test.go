package exec_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

// TestShapeBytesSaturates: a hostile shape's byte count saturates instead
// of wrapping to a small or negative number that would pass a check.
func TestShapeBytesSaturates(t *testing.T) {
	cases := []struct {
		shape []int
		size  int64
		want  int64
	}{
		{[]int{2, 3}, 4, 24},
		{[]int{0, 1 << 62}, 4, 0},
		{[]int{1 << 32, 1 << 32}, 4, math.MaxInt64},
		{[]int{1 << 62, 4}, 4, math.MaxInt64},
		{[]int{-1}, 4, math.MaxInt64},
	}
	for _, c := range cases {
		if got := exec.ShapeBytes(c.shape, c.size); got != c.want {
			t.Errorf("ShapeBytes(%v, %d) = %d, want %d", c.shape, c.size, got, c.want)
		}
	}
}

// TestBudgetBeforeAllocating: ConstantOfShape of a 16-byte request
// claiming [65536, 65536] floats is refused by its shape before the kernel
// allocates 16 GiB, on the node-by-node path and the bound path alike.
func TestBudgetBeforeAllocating(t *testing.T) {
	g := &ir.Graph{
		Name:    "g",
		Inputs:  []*ir.Value{{Name: "s", Type: ir.StaticType(tensor.Int64, []int{2})}},
		Outputs: []*ir.Value{{Name: "y", Type: ir.Type{DType: tensor.Float32}}},
		Nodes:   []*ir.Node{{Name: "c", OpType: "ConstantOfShape", Version: 9, Inputs: []string{"s"}, Outputs: []string{"y"}}},
	}
	if err := ir.Verify(g, nil); err != nil {
		t.Fatal(err)
	}
	ex, err := exec.New(g, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	ex.SetLimits(exec.Limits{MaxBytes: 1 << 20})
	s := tensor.From([]int64{65536, 65536}, 2)
	_, err = ex.Run(map[string]*tensor.Tensor{"s": s})
	if !errors.Is(err, exec.ErrBudget) || !strings.Contains(err.Error(), "17179869184 bytes") {
		t.Fatalf("Run: %v", err)
	}
	b, err := ex.Bind([][]int{{2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Execute([]*tensor.Tensor{s}); !errors.Is(err, exec.ErrBudget) {
		t.Fatalf("Execute: %v", err)
	}
	// Within the budget it runs.
	out, err := ex.Run(map[string]*tensor.Tensor{"s": tensor.From([]int64{4, 4}, 2)})
	if err != nil || out["y"].Len() != 16 {
		t.Fatalf("small request: %v", err)
	}
}
