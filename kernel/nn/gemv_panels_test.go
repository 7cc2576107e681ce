package nn

import (
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestGemvPanelsTwin: Gemm through TacticGemvPanels (B packed into
// 64-column panels) gives the portable Gemm's bits: 1 to 5 rows, B
// plain or transposed, widths around the panel, NaN and Inf, bias and
// alpha/beta, 1, 2 and 8 workers, and a second call on the same packed B.
func TestGemvPanelsTwin(t *testing.T) {
	t.Parallel()
	if !fastOK() {
		t.Skip("no vector kernels")
	}
	r := rand.New(rand.NewSource(64))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for ci := 0; ci < 24; ci++ {
		m, k := 1+ci%5, 1+r.Intn(300)
		nc := []int{1, 63, 64, 65, 130, 1000}[ci%6]
		tb := ci%2 == 1
		a := specialF32(r, m*k, ci%3 == 0)
		b := specialF32(r, k*nc, ci%4 == 0)
		bs := []int{k, nc}
		attrs := []*ir.Attr{strAttr(kernel.TacticAttr, TacticGemvPanels)}
		if tb {
			bt := make([]float32, k*nc)
			for kk := 0; kk < k; kk++ {
				for j := 0; j < nc; j++ {
					bt[j*k+kk] = b[kk*nc+j]
				}
			}
			b, bs = bt, []int{nc, k}
			attrs = append(attrs, intAttr("transB", 1))
		}
		in := []*tensor.Tensor{tensor.From(a, m, k), tensor.From(b, bs...)}
		if ci%3 == 1 {
			in = append(in, tensor.From(specialF32(r, nc, false), nc))
			attrs = append(attrs, floatAttr("alpha", 0.5), floatAttr("beta", 2))
		}
		n := node("Gemm", attrs...)
		want := tensor.New(tensor.Float32, m, nc)
		if err := intoGemm(ctxAt(nil, kernel.ISAPortable, nil), n, in, []*tensor.Tensor{want}); err != nil {
			t.Fatal(err)
		}
		for rep, p := range append(pools, pools[0]) {
			got := tensor.New(tensor.Float32, m, nc)
			if err := intoGemm(&kernel.Ctx{Pool: p}, n, in, []*tensor.Tensor{got}); err != nil {
				t.Fatal(err)
			}
			if d := sameF32(got.Data.([]float32), want.Data.([]float32)); d >= 0 {
				t.Fatalf("case %d (m %d k %d n %d transB %v), call %d: y[%d] = %g, portable %g", ci, m, k, nc, tb, rep, d, got.Data.([]float32)[d], want.Data.([]float32)[d])
			}
		}
	}
}
