package reduce

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/kerneltest"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestSoftmaxParallel: a float32 Softmax and LogSoftmax over the last axis
// with enough lines to be split over the workers gives, at 1, 2 and 3
// workers and at every instruction-set level, in place too, the bits of
// the portable Run; the split Into allocates nothing.
func TestSoftmaxParallel(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 2))
	pools := []*parallel.Pool{nil, parallel.New(2), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	ops := Ops()
	for _, dims := range [][]int{{3, 49, 49}, {1, 12, 197, 197}, {37, 1000}, {4, 10, 2049}, {9, 33}} {
		x := tensor.New(tensor.Float32, dims...)
		for i := range x.Data.([]float32) {
			x.Data.([]float32)[i] = float32(r.NormFloat64() * 4)
		}
		x.Data.([]float32)[5] = float32(math.Inf(1))
		for _, op := range []string{"Softmax", "LogSoftmax"} {
			n := &ir.Node{OpType: op, Version: 13}
			want, err := ops[op].Run(&kernel.Ctx{ISA: kernel.ISAPortable}, n, []*tensor.Tensor{x})
			if err != nil {
				t.Fatal(err)
			}
			wd := want[0].Data.([]float32)
			for _, l := range kerneltest.Levels() {
				for _, p := range pools {
					ctx := &kernel.Ctx{ISA: l, Pool: p}
					out := tensor.New(tensor.Float32, dims...)
					in := tensor.From(append([]float32(nil), x.Data.([]float32)...), dims...)
					if err := ops[op].Into(ctx, n, []*tensor.Tensor{x}, []*tensor.Tensor{out}); err != nil {
						t.Fatal(err)
					}
					if err := ops[op].Into(ctx, n, []*tensor.Tensor{in}, []*tensor.Tensor{in}); err != nil {
						t.Fatal(err)
					}
					for i, w := range wd {
						g, gi := out.Data.([]float32)[i], in.Data.([]float32)[i]
						if math.Float32bits(g) != math.Float32bits(w) || math.Float32bits(gi) != math.Float32bits(w) {
							t.Fatalf("%s of %v at %v, %d workers, element %d: %g (in place %g), want %g", op, dims, l, p.Workers(), i, g, gi, w)
						}
					}
					ins, outs := []*tensor.Tensor{x}, []*tensor.Tensor{out}
					got := 0.0
					if !raceEnabled {
						got = testing.AllocsPerRun(3, func() { _ = ops[op].Into(ctx, n, ins, outs) })
					}
					if got != 0 {
						t.Fatalf("%s Into at %d workers allocates %.0f times", op, p.Workers(), got)
					}
				}
			}
		}
	}
}
