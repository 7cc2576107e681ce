package compile_test

import (
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// BenchmarkPlan executes the plan named by -bench-plan (input
// float32[1,3,224,224], uniform in [-1,1)) on one thread, for profiling.
var benchPlan = flag.String("bench-plan", "", "a plan file for BenchmarkPlan and TestPlanInvariance")

func BenchmarkPlan(b *testing.B) {
	path := *benchPlan
	if path == "" {
		b.Skip("set -bench-plan=FILE")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	p, err := plan.Decode(raw)
	if err != nil {
		b.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ex, err := exec.New(p.Graph, builtin.Registry())
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 3*224*224)
	for i := range x {
		x[i] = 2*r.Float32() - 1
	}
	in := []*tensor.Tensor{tensor.From(x, 1, 3, 224, 224)}
	bd, err := ex.Bind([][]int{in[0].Shape})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := bd.Execute(in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPlanInvariance runs the plan named by -bench-plan (input
// float32[N,3,224,224]) on three rows at GOMAXPROCS 1, 2 and 8, and, where
// the plan's batch is dynamic, as a batch of 3; every run must give the
// same bits.
func TestPlanInvariance(t *testing.T) {
	path := *benchPlan
	if path == "" {
		t.Skip("set -bench-plan=FILE")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := exec.New(p.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	const rowLen = 3 * 224 * 224
	x := make([]float32, 3*rowLen)
	for i := range x {
		x[i] = 2*r.Float32() - 1
	}
	run := func(x []float32, n int) ([]float32, error) {
		in := []*tensor.Tensor{tensor.From(append([]float32{}, x...), n, 3, 224, 224)}
		bd, err := ex.Bind([][]int{in[0].Shape})
		if err != nil {
			return nil, err
		}
		out, err := bd.Execute(in)
		if err != nil {
			return nil, err
		}
		return append([]float32{}, out[0].Data.([]float32)...), nil
	}
	same := func(a, b []float32) bool {
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				return false
			}
		}
		return len(a) == len(b)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var want [][]float32
	for _, procs := range []int{1, 2, 8} {
		runtime.GOMAXPROCS(procs)
		for b := 0; b < 3; b++ {
			got, err := run(x[b*rowLen:(b+1)*rowLen], 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) < 3 {
				want = append(want, got)
			} else if !same(got, want[b]) {
				t.Fatalf("GOMAXPROCS=%d: row %d differs", procs, b)
			}
		}
		got, err := run(x, 3)
		if err != nil {
			t.Logf("batch of 3: %v (fixed batch)", err)
			continue
		}
		per := len(got) / 3
		for b := 0; b < 3; b++ {
			if !same(got[b*per:(b+1)*per], want[b]) {
				t.Fatalf("GOMAXPROCS=%d: row %d in the batch differs from the row alone", procs, b)
			}
		}
	}
}
