package nn

import (
	"fmt"
	"math/rand"
	"os"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// BenchmarkConvMobileNet is mobilenet_v2's early convolutions (with bias
// and the Relu6 epilogue where the model has one) through Into, one worker.
func BenchmarkConvMobileNet(b *testing.B) {
	for _, c := range []struct {
		name          string
		cin, cout, hw int
		k, s, g       int
		tactic        string
		clip          bool
	}{
		{"stem", 3, 32, 224, 3, 2, 1, "", true},
		{"dw112", 32, 32, 112, 3, 1, 32, "", true},
		{"pw32to16", 32, 16, 112, 1, 1, 1, TacticGemm1x1, false},
		{"pw16to96", 16, 96, 112, 1, 1, 1, TacticGemm1x1, true},
		{"pw16to96i", 16, 96, 112, 1, 1, 1, TacticIm2col, true},
		{"pw16to96d", 16, 96, 112, 1, 1, 1, TacticDirect, true},
		{"stemd", 3, 32, 224, 3, 2, 1, TacticDirect, true},
		{"pw16to96at56", 16, 96, 56, 1, 1, 1, TacticGemm1x1, true},
		{"pw16to96at28", 16, 96, 28, 1, 1, 1, TacticGemm1x1, true},
		{"dw56s2", 96, 96, 56, 3, 2, 96, "", true},
		{"dw28", 96, 96, 28, 3, 1, 96, "", true},
		{"dw112s2", 96, 96, 112, 3, 2, 96, "", true},
		{"pw96to24", 96, 24, 56, 1, 1, 1, TacticGemm1x1, false},
		{"pw24to144", 24, 144, 56, 1, 1, 1, TacticGemm1x1, true},
		{"pw160to960", 160, 960, 7, 1, 1, 1, TacticGemm1x1, true},
		{"pw160to960d", 160, 960, 7, 1, 1, 1, TacticDirect, true},
		{"pw960to160d", 960, 160, 7, 1, 1, 1, TacticDirect, false},
		{"pw960to160", 960, 160, 7, 1, 1, 1, TacticGemm1x1, false},
		{"pw96to576at14", 96, 576, 14, 1, 1, 1, TacticGemm1x1, true},
		{"pw96to576at14d", 96, 576, 14, 1, 1, 1, TacticDirect, true},
		{"pw576to96at14d", 576, 96, 14, 1, 1, 1, TacticDirect, false},
		{"pw64to384at14d", 64, 384, 14, 1, 1, 1, TacticDirect, true},
		{"pw64to384at14", 64, 384, 14, 1, 1, 1, TacticGemm1x1, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := rand.New(rand.NewSource(1))
			p := c.k / 2
			n := node("Conv", ints("strides", int64(c.s), int64(c.s)), ints("pads", int64(p), int64(p), int64(p), int64(p)), intAttr("group", int64(c.g)))
			if c.g == 1 {
				n = node("Conv", ints("strides", int64(c.s), int64(c.s)), ints("pads", int64(p), int64(p), int64(p), int64(p)))
			}
			if c.tactic != "" {
				n.Attrs[kernel.TacticAttr] = strAttr(kernel.TacticAttr, c.tactic)
			}
			oh := (c.hw+2*p-c.k)/c.s + 1
			x := tensor.From(randF32(r, c.cin*c.hw*c.hw), 1, c.cin, c.hw, c.hw)
			w := tensor.From(randF32(r, c.cout*c.cin/c.g*c.k*c.k), c.cout, c.cin/c.g, c.k, c.k)
			bias := tensor.From(randF32(r, c.cout), c.cout)
			y := tensor.New(tensor.Float32, 1, c.cout, oh, oh)
			pl := parallel.New(1)
			defer pl.Close()
			ctx := &kernel.Ctx{Pool: pl}
			var cold []float32
			if coldBench {
				cold = make([]float32, 8<<20)
			}
			for i := 0; i < b.N; i++ {
				if coldBench {
					b.StopTimer()
					for j := range cold {
						cold[j]++
					}
					b.StartTimer()
				}
				if c.clip {
					ctx.Epilogue = kernel.Epilogue{Lo: 0, Hi: 6, HasLo: true, HasHi: true}
				}
				if err := intoConv(ctx, n, []*tensor.Tensor{x, w, bias}, []*tensor.Tensor{y}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2*float64(c.cout*c.cin/c.g*c.k*c.k*oh*oh)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

var _ = fmt.Sprint

// coldBench (COLD=1 in the environment) evicts the caches before each
// timed call (32 MiB written outside the timer), as a model's later layers
// find their weights: in memory, not in L2.
var coldBench = os.Getenv("COLD") != ""
