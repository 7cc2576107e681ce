package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestGlobalPool32Parallel: globalPool32 (and the float32 Run through it)
// gives the sequential chains' bits (gapRef, globalPoolInto's contract) at
// 1, 2 and 3 workers and every instruction-set level, on channel counts
// that are and are not multiples of eight, EfficientNet's
// squeeze-excitation planes among them, with NaN and Inf mixed in; it
// allocates nothing.
func TestGlobalPool32Parallel(t *testing.T) {
	r := rand.New(rand.NewSource(16))
	pools := []*parallel.Pool{nil, parallel.New(2), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	run := Ops()["GlobalAveragePool"].Run
	n := &ir.Node{OpType: "GlobalAveragePool"}
	for _, d := range [][2]int{{96, 112 * 112}, {144, 56 * 56}, {1280, 49}, {17, 50}, {9, 7}, {8, 1}, {33, 196}} {
		nc, S := d[0], d[1]
		x := make([]float32, nc*S)
		for i := range x {
			x[i] = float32(r.NormFloat64()) * float32(math.Pow(10, float64(r.Intn(7)-3)))
		}
		x[3*S] = float32(math.Inf(1))
		x[S/2] = float32(math.NaN())
		want := make([]float32, nc)
		gapRef(x, S, want)
		xt := tensor.From(x, 1, nc, S, 1)
		for _, l := range kernel.ISAs() {
			for _, p := range pools {
				ctx := ctxAt(p, l, nil)
				got := make([]float32, nc)
				globalPool32(ctx, x, S, false, got)
				out, err := run(ctx, n, []*tensor.Tensor{xt})
				if err != nil {
					t.Fatal(err)
				}
				ro := out[0].Data.([]float32)
				for c := range want {
					if math.Float32bits(got[c]) != math.Float32bits(want[c]) || math.Float32bits(ro[c]) != math.Float32bits(want[c]) {
						t.Fatalf("nc %d S %d at %v, %d workers, c %d: %v (Run %v), want %v", nc, S, l, p.Workers(), c, got[c], ro[c], want[c])
					}
				}
				if a := testing.AllocsPerRun(3, func() { globalPool32(ctx, x, S, false, got) }); a != 0 && !raceEnabled {
					t.Fatalf("nc %d S %d at %d workers: %.0f allocations", nc, S, p.Workers(), a)
				}
			}
		}
	}
}

// BenchmarkGlobalPool32 is efficientnet_b0's first squeeze-excitation
// pool (32x112x112) and its last (1280x7x7)
// through globalPool32 at avx512, 1 and 2 workers, against globalPoolInto.
func BenchmarkGlobalPool32(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	for _, d := range [][2]int{{32, 112 * 112}, {1280, 49}} {
		x, y := randF32(r, d[0]*d[1]), make([]float32, d[0])
		b.Run(fmt.Sprintf("old/%d", d[0]), func(b *testing.B) {
			for b.Loop() {
				globalPoolInto(x, d[1], false, y)
			}
		})
		for _, w := range []int{1, 2} {
			b.Run(fmt.Sprintf("w%d/%d", w, d[0]), func(b *testing.B) {
				p := parallel.New(w)
				defer p.Close()
				ctx := ctxAt(p, kernel.ISAAVX512, nil)
				for b.Loop() {
					globalPool32(ctx, x, d[1], false, y)
				}
			})
		}
	}
}
