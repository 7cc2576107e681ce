package exec_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

const models = "../../shared/models"

// sharedPlan builds a shared model with the default options and decodes
// the plan, as a server would load it.
func sharedPlan(t testing.TB, name string) (*plan.Plan, []*tensor.Tensor) {
	t.Helper()
	path := filepath.Join(models, name, "model.onnx")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("shared model %s: %v", name, err)
	}
	m, err := onnx.Decode(src, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	res, err := compile.Build(m, src, name, "test", compile.DefaultOptions(), builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	var in []*tensor.Tensor
	for i := range p.Graph.Inputs {
		x, _, err := onnx.DecodeTensorFile(filepath.Join(models, name, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, x)
	}
	return p, in
}

func shapesOf(in []*tensor.Tensor) [][]int {
	s := make([][]int, len(in))
	for i, t := range in {
		s[i] = t.Shape
	}
	return s
}

func feeds(g *ir.Graph, in []*tensor.Tensor) map[string]*tensor.Tensor {
	m := map[string]*tensor.Tensor{}
	for i, v := range g.Inputs {
		m[v.Name] = in[i]
	}
	return m
}

func sameBits(a, b *tensor.Tensor) bool {
	return a.String() == b.String() && bytes.Equal(tensor.RawBytes(a), tensor.RawBytes(b))
}

// TestExecuteMatchesRun: a Bound gives Executor.Run's bits on every shared
// model, on its first run and again on a later one (the arena is reused).
func TestExecuteMatchesRun(t *testing.T) {
	names := []string{"breast_cancer_mlp", "digits_cnn", "tiny_bert", "resnet18", "mobilenet_v2"}
	if testing.Short() {
		names = names[:2]
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			p, in := sharedPlan(t, name)
			ex, err := exec.New(p.Graph, builtin.Registry())
			if err != nil {
				t.Fatal(err)
			}
			ref, err := ex.Run(feeds(p.Graph, in))
			if err != nil {
				t.Fatal(err)
			}
			b, err := ex.Bind(shapesOf(in))
			if err != nil {
				t.Fatal(err)
			}
			for round := 0; round < 2; round++ {
				out, err := b.Execute(in)
				if err != nil {
					t.Fatal(err)
				}
				for i, o := range p.Graph.Outputs {
					if !sameBits(out[i], ref[o.Name]) {
						t.Fatalf("round %d: output %q differs from Executor.Run", round, o.Name)
					}
				}
			}
			var alloc []string
			for _, n := range b.Allocating() {
				alloc = append(alloc, n.OpType)
			}
			t.Logf("%s: arena %d bytes, %d values; allocating layers: %v", name, b.Arena().PeakBytes, len(b.Arena().Slots), alloc)
		})
	}
}

// TestExecuteAllocs: after warm-up, Execute allocates nothing on plans
// whose layers all have Into. Layers without one are listed; the test
// then checks that the allocations are theirs alone.
func TestExecuteAllocs(t *testing.T) {
	for _, name := range []string{"breast_cancer_mlp", "digits_cnn"} {
		t.Run(name, func(t *testing.T) {
			p, in := sharedPlan(t, name)
			ex, err := exec.New(p.Graph, builtin.Registry())
			if err != nil {
				t.Fatal(err)
			}
			b, err := ex.Bind(shapesOf(in))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Execute(in); err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(20, func() {
				if _, err := b.Execute(in); err != nil {
					t.Fatal(err)
				}
			})
			var missing []string
			for _, n := range b.Allocating() {
				missing = append(missing, n.Name+" ("+n.OpType+" "+n.String("base", "")+")")
			}
			t.Logf("%s: %.0f allocations per Execute; layers without Into: %v", name, allocs, missing)
			if len(missing) == 0 && allocs != 0 && !raceEnabled {
				t.Fatalf("%s: Execute allocates %.0f times per run; want 0", name, allocs)
			}
			if len(missing) > 0 {
				t.Logf("not all layers have Into yet: %s", strings.Join(missing, ", "))
			}
		})
	}
}
