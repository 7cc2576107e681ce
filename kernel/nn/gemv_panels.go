package nn

import (
	"math"
	"sync"
	"unsafe"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/tensor"
)

// TacticGemvPanels runs a Gemm of fewer rows than a GEMM tile (a
// classifier) with its constant B packed once into panels of 64 columns,
// each panel one contiguous stream (amd64.GemvPanel64): a GEMV is bound by
// reading B, and one sequential stream reads it fastest. Each output is
// the chain over k ascending from +0 of every other path, then canon, so
// the bits are the same. B (input 1) must be an initializer.
const TacticGemvPanels = "gemm.gemv-panels"

func init() { kernel.RegisterConstInputs(TacticGemvPanels, 1) }

// gemvPanelsMax is the most rows (of A) the panels tactic takes.
const gemvPanelsMax = gemmMR - 1

// gemmTactics lists a float32 Gemm's candidate tactics: the packed panels
// where A has few rows and B is wide, else none. The panels are the only
// candidate there: timed with B hot in cache (as tuning times) they are as
// fast as the row-streaming GEMV, and with B coming from memory (as in a
// model, a classifier's weights are read once per inference) they are
// 25-30% faster (BenchmarkGemvMClassifier/.../cold).
func gemmTactics(n *ir.Node, in []ir.Type) []string {
	if len(in) < 2 || in[0].DType != tensor.Float32 || in[1].DType != tensor.Float32 {
		return nil
	}
	a, ok1 := in[0].Static()
	b, ok2 := in[1].Static()
	if !ok1 || !ok2 || len(a) != 2 || len(b) != 2 {
		return nil
	}
	g, err := gemmGeom(n, a, b, nil)
	if err != nil || g.m > gemvPanelsMax || g.n < 64 || g.k < 1 {
		return nil
	}
	return []string{TacticGemvPanels}
}

// gemvPack is a B matrix packed into 64-column panels: panel p, step kk
// at panels[(p*k+kk)*64:], columns past n zero.
type gemvPack struct {
	b      unsafe.Pointer // the B it was packed from
	brs    int
	bcs    int
	k, n   int
	panels []float32
}

// gemvPackKey keys a Gemm node's packed B in its kernel.State.
type gemvPackKey struct{ n *ir.Node }

// gemvPackOf returns n's B packed into panels, kept in c's kernel.State
// (packed again for another B or shape, and on every call without a
// State).
func gemvPackOf(c *kernel.Ctx, n *ir.Node, g gemmShape, b []float32) *gemvPack {
	p, _ := kernel.Prepared(c, gemvPackKey{n}, func(p *gemvPack) bool {
		return p.b == unsafe.Pointer(&b[0]) && p.brs == g.brs && p.bcs == g.bcs && p.k == g.k && p.n == g.n
	}, func() (*gemvPack, error) {
		np := (g.n + 63) / 64
		p := &gemvPack{b: unsafe.Pointer(&b[0]), brs: g.brs, bcs: g.bcs, k: g.k, n: g.n, panels: make([]float32, np*g.k*64)}
		for kk := 0; kk < g.k; kk++ {
			for j := 0; j < g.n; j++ {
				p.panels[(j/64*g.k+kk)*64+j%64] = b[kk*g.brs+j*g.bcs]
			}
		}
		return p, nil
	})
	return p
}

// gemvPanelsOK reports whether n runs TacticGemvPanels here.
func gemvPanelsOK(pool machine, n *ir.Node, g gemmShape) bool {
	return pool.fast && kernel.Tactic(n) == TacticGemvPanels && g.m <= gemvPanelsMax && g.n >= 1 && g.k >= 1
}

// gemvPanels sets y (m x n, row stride n) to A times the packed B, canon.
func gemvPanels(pool machine, g gemmShape, a []float32, p *gemvPack, y []float32) {
	np := (g.n + 63) / 64
	j := gemvPanelsJobs.Get().(*gemvPanelsJob)
	*j = gemvPanelsJob{g: g, a: a, p: p, y: y, np: np}
	pool.Run(g.m*np, g.m*g.n*g.k, j)
	*j = gemvPanelsJob{}
	gemvPanelsJobs.Put(j)
}

var gemvPanelsJobs = sync.Pool{New: func() any { return new(gemvPanelsJob) }}

type gemvPanelsJob struct {
	g  gemmShape
	a  []float32
	p  *gemvPack
	y  []float32
	np int
}

func (j *gemvPanelsJob) Run(lo, hi int) {
	var out [64]float32
	g := j.g
	for u := lo; u < hi; u++ {
		i, q := u/j.np, u%j.np
		_ = j.a[i*g.ars+(g.k-1)*g.acs]
		pan := j.p.panels[q*g.k*64 : (q+1)*g.k*64]
		amd64.GemvPanel64(g.k, &j.a[i*g.ars], g.acs, &pan[0], &out[0])
		cols := min(64, g.n-q*64)
		row := j.y[i*g.n+q*64 : i*g.n+q*64+cols]
		for c, v := range out[:cols] {
			if v != v {
				v = math.Float32frombits(0x7fc00000)
			}
			row[c] = v
		}
	}
}
