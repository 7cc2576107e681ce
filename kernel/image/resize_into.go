package image

import (
	"slices"
	"sync"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// intoResize is Resize's (and Upsample's) Into form. A float32 Resize
// that takes the separable path at a vector level writes its output in
// place, from a plan kept in the node's State, its planes split over the
// Ctx's workers (each plane is an output range: the split changes nothing
// in any output's chain); every other case runs runResize and copies.
func intoResize(kc *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	x := kernel.Input(in, 0)
	if x == nil || len(out) == 0 || out[0] == nil {
		return viaRun(kc, n, in, out)
	}
	lv := tapsLevel(kc)
	if lv == tapsGo || x.DType != tensor.Float32 || out[0].DType != tensor.Float32 {
		return viaRun(kc, n, in, out)
	}
	p, err := kernel.Prepared(kc, resizeKey{n}, func(p *resizePrep) bool { return p.matches(x, in) },
		func() (*resizePrep, error) { return prepResize(n, x, in) })
	if err != nil {
		return err
	}
	if p.sep == nil || !slices.Equal(out[0].Shape, p.out) {
		return viaRun(kc, n, in, out)
	}
	s := p.sep
	j := sepJobs.Get().(*sepJob)
	j.s, j.src, j.dst, j.lv = s, x.Data.([]float32), out[0].Data.([]float32), lv
	taps := 1
	if s.OH > 0 {
		taps = len(s.yoffs) / s.OH
	}
	kc.Workers().Run(s.outer, s.outer*s.OH*s.ows*taps, j)
	*j = sepJob{}
	sepJobs.Put(j)
	return nil
}

func viaRun(kc *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	return kernel.ViaRun(runResize, kc, n, in, out)
}

// resizeKey keys a Resize node's prepared plan in its State.
type resizeKey struct{ n *ir.Node }

// resizePrep is the separable plan of one input shape and one set of
// roi, scales and sizes values (sep nil: not the separable path).
type resizePrep struct {
	shape  []int
	consts []*tensor.Tensor // clones of in[1:]
	out    []int
	sep    *sepPlan
}

func prepResize(n *ir.Node, x *tensor.Tensor, in []*tensor.Tensor) (*resizePrep, error) {
	p := &resizePrep{shape: slices.Clone(x.Shape)}
	for _, t := range in[1:] {
		var c *tensor.Tensor
		if t != nil {
			c = t.Clone()
		}
		p.consts = append(p.consts, c)
	}
	a, g, err := resizeOf(n, x.Shape, in)
	if err != nil {
		return nil, err
	}
	p.out = g.out
	if a.mode == "nearest" || tensor.NumElems(g.out) == 0 {
		return p, nil
	}
	for d := range x.Shape {
		if x.Shape[d] == 0 {
			return p, nil
		}
	}
	if w := walkerOf(&a, x, g); separableOK(w) {
		p.sep = newSepPlan(w)
	}
	return p, nil
}

// matches reports whether p was built for x's shape and in's constants.
func (p *resizePrep) matches(x *tensor.Tensor, in []*tensor.Tensor) bool {
	if !slices.Equal(p.shape, x.Shape) || len(in)-1 != len(p.consts) {
		return false
	}
	for i, c := range p.consts {
		if !sameValues(c, in[i+1]) {
			return false
		}
	}
	return true
}

// sameValues reports whether a and b hold the same values (false for a
// dtype Resize's roi, scales and sizes do not use: the plan is rebuilt).
func sameValues(a, b *tensor.Tensor) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) {
		return false
	}
	switch d := a.Data.(type) {
	case []float32:
		return slices.Equal(d, b.Data.([]float32))
	case []float64:
		return slices.Equal(d, b.Data.([]float64))
	case []int64:
		return slices.Equal(d, b.Data.([]int64))
	}
	return false
}

// sepJob runs planes of a separable plan, each range with its own scratch.
type sepJob struct {
	s        *sepPlan
	src, dst []float32
	lv       tapsLv
}

var (
	sepJobs    = sync.Pool{New: func() any { return new(sepJob) }}
	sepScratch sync.Pool // *[]float32
)

func (j *sepJob) Run(lo, hi int) {
	b, _ := sepScratch.Get().(*[]float32)
	if b == nil || cap(*b) < j.s.scratch {
		v := make([]float32, j.s.scratch)
		b = &v
	}
	j.s.run(j.src, j.dst, lo, hi, j.lv, (*b)[:j.s.scratch])
	sepScratch.Put(b)
}
