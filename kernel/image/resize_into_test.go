package image

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/kerneltest"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestResizeInto checks Resize's Into form against Run, bit for bit, at
// every level, on 1, 2 and 3 workers, with a State kept across calls whose
// input shape and sizes change (the prepared plan must be rebuilt), over
// the separable path (planes split, rows stored in place, the last row of
// an odd width through the row buffer) and the others (nearest, rank 2,
// float64), each over garbage-filled output slots.
func TestResizeInto(t *testing.T) {
	r := rand.New(rand.NewSource(19))
	type tc struct {
		mode, ctm string
		dt        tensor.DType
		in, sizes []int
	}
	cases := []tc{
		{"linear", "half_pixel", tensor.Float32, []int{1, 21, 20, 20}, []int{1, 21, 160, 160}},
		{"linear", "half_pixel", tensor.Float32, []int{1, 5, 7, 9}, []int{1, 5, 13, 19}},
		{"linear", "align_corners", tensor.Float32, []int{2, 3, 6, 5}, []int{2, 3, 11, 3}},
		{"cubic", "pytorch_half_pixel", tensor.Float32, []int{1, 4, 9, 7}, []int{1, 4, 18, 21}},
		{"linear", "asymmetric", tensor.Float32, []int{5, 6}, []int{9, 17}},
		{"nearest", "asymmetric", tensor.Float32, []int{1, 2, 5, 6}, []int{1, 2, 10, 12}},
		{"linear", "half_pixel", tensor.Float64, []int{1, 2, 5, 6}, []int{1, 2, 10, 12}},
	}
	pools := []*parallel.Pool{nil, parallel.New(2), parallel.New(3)}
	for _, p := range pools {
		if p != nil {
			defer p.Close()
		}
	}
	n := func(c tc) *ir.Node {
		return node("Resize", 13, str("mode", c.mode), str("coordinate_transformation_mode", c.ctm))
	}
	for pi, pool := range pools {
		st := &kernel.State{} // one State for every case: one node per mode
		nodes := map[string]*ir.Node{}
		for i, c := range cases {
			t.Run(fmt.Sprintf("%d_%d_%s_%s_%v", pi, i, c.mode, c.ctm, c.in), func(t *testing.T) {
				key := c.mode + c.ctm + c.dt.String()
				nd, ok := nodes[key]
				if !ok {
					nd = n(c)
					nodes[key] = nd
				}
				x := tensor.New(c.dt, c.in...)
				switch d := x.Data.(type) {
				case []float32:
					for j := range d {
						d[j] = float32(r.NormFloat64())
					}
					d[0], d[len(d)/3] = float32(math.NaN()), -math.Float32frombits(1)
				case []float64:
					for j := range d {
						d[j] = r.NormFloat64()
					}
				}
				sz := make([]int64, len(c.sizes))
				for j, v := range c.sizes {
					sz[j] = int64(v)
				}
				in := []*tensor.Tensor{x, nil, nil, tensor.From(sz, len(sz))}
				want, err := runResize(nil, nd, in)
				if err != nil {
					t.Fatal(err)
				}
				kerneltest.TestAllImplementations(t, &kernel.Ctx{Pool: pool, State: st}, func(t *testing.T, kc *kernel.Ctx) {
					for rep := 0; rep < 2; rep++ {
						o := tensor.New(c.dt, c.sizes...)
						if d, ok := o.Data.([]float32); ok {
							for j := range d {
								d[j] = float32(r.NormFloat64()) * 1e30
							}
						}
						if err := intoResize(kc, nd, in, []*tensor.Tensor{o}); err != nil {
							t.Fatal(err)
						}
						if d := kerneltest.Diff(want, []*tensor.Tensor{o}); d != "" {
							t.Fatalf("Into (call %d) differs from Run: %s", rep, d)
						}
					}
				})
			})
		}
	}
}
