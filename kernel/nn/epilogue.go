package nn

import (
	"math"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
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
//	if v < lo { v = lo }    (Relu: lo = 0; Clip's min; -Inf when absent)
//	if v > hi { v = hi }    (Clip's max; +Inf when absent)
//
// A missing bound as ±Inf changes nothing: no float32, NaN included,
// compares below -Inf or above +Inf. The vector form (amd64.Epi) uses
// VMAXPS(lo, v) and VMINPS(hi, v), which return v unless lo > v (hi < v),
// exactly the comparisons above, NaN and -0 included.

// epi is a kernel.Epilogue as the kernels take it; on is false for none.
type epi struct {
	r      []float32
	lo, hi float32
	on     bool
}

// epiOf converts the context's epilogue for an output of n elements; ok
// is false when the kernel cannot apply it (a residual of another length).
func epiOf(e *kernel.Epilogue, n int) (ep epi, ok bool) {
	if !e.Active() {
		return epi{}, true
	}
	if e.Residual != nil && len(e.Residual) != n {
		return epi{}, false
	}
	ep = epi{r: e.Residual, lo: float32(math.Inf(-1)), hi: float32(math.Inf(1)), on: true}
	if e.HasLo {
		ep.lo = e.Lo
	}
	if e.HasHi {
		ep.hi = e.Hi
	}
	return ep, true
}

// at returns ep with its residual starting at offset off (for the output
// slice that starts there).
func (ep epi) at(off int) epi {
	if ep.r != nil {
		ep.r = ep.r[off:]
	}
	return ep
}

// block applies ep to rows x cols of y (row stride ld) whose residual is
// ep.r at the same offsets.
func (ep *epi) block(y []float32, ld, rows, cols int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	_ = y[(rows-1)*ld+cols-1]
	if ep.r != nil {
		_ = ep.r[(rows-1)*ld+cols-1]
	}
	if fastKernels {
		var r *float32
		if ep.r != nil {
			r = &ep.r[0]
		}
		amd64.Epi(&y[0], ld, r, ld, rows, cols, ep.lo, ep.hi)
		return
	}
	epiPortable(y, ep.r, ld, rows, cols, ep.lo, ep.hi)
}

// epiPortable is amd64.Epi's portable twin.
func epiPortable(y, r []float32, ld, rows, cols int, lo, hi float32) {
	for i := 0; i < rows; i++ {
		yr := y[i*ld : i*ld+cols]
		var rr []float32
		if r != nil {
			rr = r[i*ld : i*ld+cols]
		}
		for j, v := range yr {
			if rr != nil {
				v = v + rr[j]
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

// all applies ep to the whole of y (len(y) outputs).
func (ep *epi) all(y []float32) {
	if ep.on {
		ep.block(y, len(y), 1, len(y))
	}
}
