package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestLayerNormParallel: a float32 LayerNormalization large enough to be
// split over the workers (and one just below the split, and row counts
// that are not multiples of eight) gives, at 1, 2 and 3 workers and at
// every instruction-set level, in place too, the bits of the scalar
// definition one row at a time, Mean and InvStdDev included; the split
// Into allocates nothing.
func TestLayerNormParallel(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 6))
	pools := []*parallel.Pool{nil, parallel.New(2), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	ops := Ops()
	n := &ir.Node{OpType: "LayerNormalization", Version: 17, Outputs: []string{"y", "m", "i"}}
	for _, dims := range [][]int{{1, 197, 768}, {1, 3136, 96}, {1, 56, 56, 96}, {4, 61, 130}, {255, 128}, {1, 49, 7}} {
		D := dims[len(dims)-1]
		R := prod(dims) / D
		x := tensor.New(tensor.Float32, dims...)
		xd := x.Data.([]float32)
		for i := range xd {
			xd[i] = float32(r.NormFloat64()*3 + 0.5)
		}
		xd[7*D+3] = float32(math.NaN())
		xd[len(xd)-2] = float32(math.Inf(-1))
		sc, b := tensor.New(tensor.Float32, D), tensor.New(tensor.Float32, D)
		for i := range D {
			sc.Data.([]float32)[i] = float32(r.NormFloat64())
			b.Data.([]float32)[i] = float32(r.NormFloat64())
		}
		want, wm, wi := make([]float32, len(xd)), make([]float32, R), make([]float32, R)
		layerNorm32Ref(xd, sc.Data.([]float32), b.Data.([]float32), nil, nil, D, 1e-5, want, wm, wi)
		canonNaNs(want, wm, wi)
		for _, l := range kernel.ISAs() {
			for _, p := range pools {
				ctx := ctxAt(p, l, nil)
				outs := []*tensor.Tensor{tensor.New(tensor.Float32, dims...), tensor.New(tensor.Float32, R), tensor.New(tensor.Float32, R)}
				in := tensor.From(append([]float32(nil), xd...), dims...)
				ins := []*tensor.Tensor{x, sc, b}
				if err := ops["LayerNormalization"].Into(ctx, n, ins, outs); err != nil {
					t.Fatal(err)
				}
				inPlace := []*tensor.Tensor{in, tensor.New(tensor.Float32, R), tensor.New(tensor.Float32, R)}
				if err := ops["LayerNormalization"].Into(ctx, n, []*tensor.Tensor{in, sc, b}, inPlace); err != nil {
					t.Fatal(err)
				}
				for k, w := range [][]float32{want, wm, wi} {
					g, gi := outs[k].Data.([]float32), inPlace[k].Data.([]float32)
					for i := range w {
						if math.Float32bits(g[i]) != math.Float32bits(w[i]) || math.Float32bits(gi[i]) != math.Float32bits(w[i]) {
							t.Fatalf("%v at %v, %d workers, output %d element %d: %g (in place %g), want %g", dims, l, p.Workers(), k, i, g[i], gi[i], w[i])
						}
					}
				}
				if got := testing.AllocsPerRun(3, func() { _ = ops["LayerNormalization"].Into(ctx, n, ins, outs) }); got != 0 && !raceEnabled {
					t.Fatalf("LayerNormalization Into of %v at %d workers allocates %.0f times", dims, p.Workers(), got)
				}
			}
		}
	}
}
