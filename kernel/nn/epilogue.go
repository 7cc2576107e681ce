package nn

import (
	"math"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/vmath"
)

// Fused epilogues. A fused layer (kernel/fused) hands Conv's Into a
// kernel.Epilogue through kernel.Ctx: a residual to add and a clamp (Relu,
// Clip) to apply after the bias. The kernels apply it to each output
// block as soon as the block's chains are finished and its bias is added
// (a GEMM tile after its last k block, a depthwise output row), while the
// block is in cache, instead of in two more passes over the tensor. The
// operations are the unfused nodes', in their order, per element:
//
//	v = acc + bias          (the kernel's own store, as without epilogue)
//	v = v + r               (the Add: the base output is its first operand)
//	                        (or v = v + cb[j], j the column: a MatMul's bias)
//	v = v + r2              (a second Add, after the bias: Residual2)
//	if v < lo { v = lo }    (Relu: lo = 0; Clip's min; -Inf when absent)
//	if v > hi { v = hi }    (Clip's max; +Inf when absent)
//
// A missing bound as ±Inf changes nothing: no float32, NaN included,
// compares below -Inf or above +Inf. The vector form (amd64.Epi) uses
// VMAXPS(lo, v) and VMINPS(hi, v), which return v unless lo > v (hi < v),
// exactly the comparisons above, NaN and -0 included.

// epi is a kernel.Epilogue as the kernels take it; on is false for none.
// When col is set, r is a column bias (kernel.Epilogue.ColBias): the
// operand of output (i, j) is r[j] rather than r at the output's offset.
type epi struct {
	r []float32
	// r2 is kernel.Epilogue.Residual2: added after r, before the clamp,
	// laid out as the output (MatMul only).
	r2     []float32
	lo, hi float32
	on     bool
	col    bool
	// act is kernel.Epilogue.Act: applied in place after the clamp, to
	// whole runs of finished outputs (see activate), with vec.
	act func(v vmath.Vec, dst, src []float32)
	vec vmath.Vec
	// fast runs block through amd64.Epi (the call's machine allows it).
	fast bool
}

// epiOf converts the context's epilogue for an output of n elements (a
// Conv's): the residual, the clamp and the activation; ok is false when
// the kernel cannot apply it (a residual of another length, or a column
// bias: Conv's outputs have no GEMM columns to match).
func epiOf(pool machine, e *kernel.Epilogue, n int) (ep epi, ok bool) {
	if !e.Active() {
		return epi{}, true
	}
	if e.ColBias != nil || e.Residual2 != nil || e.Residual != nil && len(e.Residual) != n {
		return epi{}, false
	}
	return epiClamp(pool, e, epi{r: e.Residual, act: e.Act}), true
}

// epiCols converts the context's epilogue for a GEMM output of n columns
// (MatMul's): a column bias of n floats, a second residual (Residual2,
// which the caller must check against the output: see fitsOut), the
// clamp and the activation; ok is false for anything else (a residual
// before the bias).
func epiCols(pool machine, e *kernel.Epilogue, n int) (ep epi, ok bool) {
	if !e.Active() {
		return epi{}, true
	}
	if e.Residual != nil || e.ColBias != nil && len(e.ColBias) != n {
		return epi{}, false
	}
	return epiClamp(pool, e, epi{r: e.ColBias, col: e.ColBias != nil, r2: e.Residual2, act: e.Act}), true
}

// fitsOut reports whether ep's second residual, if any, can be applied to
// the output y of a MatMul of shape s in one GEMM: it has y's length,
// does not share y's memory (it must be read after the tile that covers
// it is written), and B has no batch (A's batches are then rows of one
// GEMM whose output is y itself, so r2 is laid out as the GEMM's C).
func (ep *epi) fitsOut(s *mmShape, y []float32) bool {
	return ep.r2 == nil || len(ep.r2) == len(y) && s.bUnbatched() && !overlaps(ep.r2, y)
}

// epiClamp completes ep with e's bounds and pool's instruction set.
func epiClamp(pool machine, e *kernel.Epilogue, ep epi) epi {
	ep.lo, ep.hi, ep.on = float32(math.Inf(-1)), float32(math.Inf(1)), true
	ep.fast, ep.vec = pool.fast, pool.vec
	if e.HasLo {
		ep.lo = e.Lo
	}
	if e.HasHi {
		ep.hi = e.Hi
	}
	return ep
}

// at returns ep with its residual starting at offset off (for the output
// slice that starts there). A column bias is left as it is: off must then
// start a row.
func (ep epi) at(off int) epi {
	if ep.r != nil && !ep.col {
		ep.r = ep.r[off:]
	}
	if ep.r2 != nil {
		ep.r2 = ep.r2[off:]
	}
	return ep
}

// tile returns ep for the block of a GEMM output that starts at offset
// off, column col: the residual from off, or the column bias from col.
func (ep epi) tile(off, col int) epi {
	if ep.r2 != nil {
		ep.r2 = ep.r2[off:]
	}
	if ep.r == nil {
		return ep
	}
	if ep.col {
		ep.r = ep.r[col:]
	} else {
		ep.r = ep.r[off:]
	}
	return ep
}

// ldr is the row stride of ep's operand in a block of row stride ld: 0
// for a column bias (every row adds the same floats).
func (ep *epi) ldr(ld int) int {
	if ep.col {
		return 0
	}
	return ld
}

// block applies ep to rows x cols of y (row stride ld) whose residual is
// ep.r at the same offsets (a column bias: ep.r[0:cols] for every row),
// and whose second residual is ep.r2 at the same offsets.
func (ep *epi) block(y []float32, ld, rows, cols int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	_ = y[(rows-1)*ld+cols-1]
	ldr := ep.ldr(ld)
	if ep.r != nil {
		_ = ep.r[(rows-1)*ldr+cols-1]
	}
	if ep.r2 != nil {
		_ = ep.r2[(rows-1)*ld+cols-1]
	}
	if ep.fast {
		var r *float32
		if ep.r != nil {
			r = &ep.r[0]
		}
		lo, hi := ep.lo, ep.hi
		if ep.r2 != nil {
			// Two passes: v + r (unbounded: ±Inf change nothing), then
			// + r2 and the bounds, as epiPortable does per element.
			if r != nil {
				amd64.Epi(&y[0], ld, r, ldr, rows, cols, float32(math.Inf(-1)), float32(math.Inf(1)))
			}
			r, ldr = &ep.r2[0], ld
		}
		amd64.Epi(&y[0], ld, r, ldr, rows, cols, lo, hi)
		return
	}
	epiPortable2(y, ep.r, ep.r2, ld, ldr, rows, cols, ep.lo, ep.hi)
}

// epiPortable is amd64.Epi's portable twin (r's row stride ldr).
func epiPortable(y, r []float32, ld, ldr, rows, cols int, lo, hi float32) {
	epiPortable2(y, r, nil, ld, ldr, rows, cols, lo, hi)
}

// epiPortable2 is epiPortable with, per element, the second residual r2
// (row stride ld, or nil) added after r and before the bounds.
func epiPortable2(y, r, r2 []float32, ld, ldr, rows, cols int, lo, hi float32) {
	for i := 0; i < rows; i++ {
		yr := y[i*ld : i*ld+cols]
		var rr, rr2 []float32
		if r != nil {
			rr = r[i*ldr : i*ldr+cols]
		}
		if r2 != nil {
			rr2 = r2[i*ld : i*ld+cols]
		}
		for j, v := range yr {
			if rr != nil {
				v = vmath.Add32(v, rr[j])
			}
			if rr2 != nil {
				v = vmath.Add32(v, rr2[j])
			}
			if v < lo {
				v = lo
			}
			if v > hi {
				v = hi
			}
			yr[j] = v
		}
	}
}

// activate applies ep's activation, if any, to rows x cols of y (row
// stride ld) whose clamp is done, one call per row: the activation is
// elementwise, so the runs it is called on do not change its bits.
func (ep *epi) activate(y []float32, ld, rows, cols int) {
	if ep.act == nil || rows <= 0 || cols <= 0 {
		return
	}
	for i := 0; i < rows; i++ {
		r := y[i*ld : i*ld+cols]
		ep.act(ep.vec, r, r)
	}
}

// actRun returns the end of the run of planes [nc, e) (of plane outputs
// each) that a depthwise kernel computes in one call before ep's
// activation runs over them: with an activation, at most dwActRun
// outputs' worth (at least one plane), so that they are still in cache.
func (ep *epi) actRun(nc, e, plane int) int {
	if ep.act == nil {
		return e
	}
	return min(e, nc+max(1, dwActRun/max(plane, 1)))
}

// dwActRun is actRun's bound: 8192 outputs (32 KiB).
const dwActRun = 8192

// all applies ep to the whole of y (len(y) outputs; with a column bias,
// rows of len(ep.r)).
func (ep *epi) all(y []float32) {
	if !ep.on || len(y) == 0 {
		return
	}
	if ep.col {
		n := len(ep.r)
		ep.block(y, n, len(y)/n, n)
	} else {
		ep.block(y, len(y), 1, len(y))
	}
	ep.activate(y, len(y), 1, len(y))
}
