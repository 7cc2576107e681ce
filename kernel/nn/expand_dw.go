package nn

import (
	"math"
	"sync"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/vmath"
)

// ExpandDW is the data of a fused expansion + depthwise layer (package
// fused's ExpandDepthwise): X [N, Cin, H, W] through the 1x1 convolution
// W1 [E, Cin, 1, 1] with bias B1 (or nil) and clamp and activation E1,
// then the depthwise 3x3 convolution W2 [E, 1, 3, 3] (attributes from
// Attrs) with bias B2 (or nil) and clamp and activation E2, into Y (an
// activation, kernel.Epilogue.Act, after the clamp, on each block as it
// is finished).
type ExpandDW struct {
	X       []float32
	XShape  []int
	W1      []float32
	W1Shape []int
	B1      []float32
	E1      kernel.Epilogue
	W2      []float32
	W2Shape []int
	B2      []float32
	E2      kernel.Epilogue
	Attrs   *ir.Node
	Y       []float32
	YShape  []int
}

// edwSetup is a layer's geometry and depthwise masks, kept per Attrs node.
type edwSetup struct {
	x, w2 [4]int
	g     *geom
	mid   int
	masks amd64.DwMasks
	// z: stride-2 rows run on AVX-512 (amd64.DwS2P1Z, masks mz); zOK:
	// the machine it was made for allowed that kernel.
	z, zOK bool
	mz     amd64.DwMasksZ
}

// edwKey keys an ExpandDepthwise layer's depthwise geometry in its
// kernel.State (by the node that holds the depthwise attributes).
type edwKey struct{ attrs *ir.Node }

// ExpandDepthwise computes the layer on the vector kernels and reports
// true, or reports false (doing nothing) where they do not apply: the
// caller then runs the two convolutions one after the other. Each output
// of the expansion is its 1x1 convolution's (the GEMM's chain over the
// input channels, canon(acc) + B1, then the clamp), and each output of the
// layer the depthwise convolution's over those values (DwS1P1 / DwS2P1):
// the bits of the two layers run apart. The expansion is computed a band
// of rows at a time into a buffer of a few rows per channel, just before
// the depthwise rows that read them, so the expanded tensor stays in
// cache.
func ExpandDepthwise(c *kernel.Ctx, a ExpandDW) bool {
	pool := machineOf(c)
	if !pool.fast || len(a.XShape) != 4 || len(a.W1Shape) != 4 || len(a.W2Shape) != 4 || len(a.YShape) != 4 {
		return false
	}
	for _, e := range []*kernel.Epilogue{&a.E1, &a.E2} {
		if e.Residual != nil || e.ColBias != nil || e.Residual2 != nil {
			return false
		}
	}
	N, Cin, H, W := a.XShape[0], a.XShape[1], a.XShape[2], a.XShape[3]
	E := a.W1Shape[0]
	if a.W1Shape[1] != Cin || a.W1Shape[2] != 1 || a.W1Shape[3] != 1 ||
		a.W2Shape[0] != E || a.W2Shape[1] != 1 || a.W2Shape[2] != 3 || a.W2Shape[3] != 3 ||
		len(a.X) != N*Cin*H*W || len(a.W1) != E*Cin || len(a.W2) != E*9 ||
		(a.B1 != nil && len(a.B1) != E) || (a.B2 != nil && len(a.B2) != E) {
		return false
	}
	s := edwSetupOf(pool, a.Attrs, [4]int{N, E, H, W}, [4]int{E, 1, 3, 3})
	if s == nil {
		return false
	}
	g := s.g
	OH, OW := g.out[0], g.out[1]
	if a.YShape[0] != N || a.YShape[1] != E || a.YShape[2] != OH || a.YShape[3] != OW || len(a.Y) != N*E*OH*OW {
		return false
	}
	w := pool.Workers()
	bands := max(1, min(OH/8, w))
	j := edwJobs.Get().(*edwJob)
	*j = edwJob{a: &a, s: s, N: N, Cin: Cin, H: H, W: W, E: E, bands: bands,
		ep1: epiFrom(pool, &a.E1), m: machine{fast: pool.fast, z: pool.z, vec: pool.vec, force: pool.force}, lo2: float32(math.Inf(-1)), hi2: float32(math.Inf(1)),
		act2: a.E2.Act}
	if a.E2.HasLo {
		j.lo2 = a.E2.Lo
	}
	if a.E2.HasHi {
		j.hi2 = a.E2.Hi
	}
	pool.Run(N*bands, N*E*(H*W*Cin+OH*OW*9), j)
	*j = edwJob{}
	edwJobs.Put(j)
	return true
}

// epiFrom is e (a clamp and an activation, or nothing) as the GEMM's
// epilogue.
func epiFrom(pool machine, e *kernel.Epilogue) epi {
	if !e.Active() {
		return epi{}
	}
	return epiClamp(pool, e, epi{act: e.Act})
}

// edwSetupOf returns the depthwise geometry for attrs at these shapes, or
// nil where the direct depthwise kernels do not apply (other strides or
// pads, rows narrower than a vector).
func edwSetupOf(pool machine, attrs *ir.Node, x, w2 [4]int) *edwSetup {
	zOK := pool.z && !pool.f().noDwZ
	s, _ := kernel.Prepared(pool.k, edwKey{attrs}, func(s *edwSetup) bool {
		return s != nil && s.x == x && s.w2 == w2 && s.zOK == zOK
	}, func() (*edwSetup, error) { return newEdwSetup(pool, attrs, x, w2, zOK), nil })
	return s
}

func newEdwSetup(pool machine, attrs *ir.Node, x, w2 [4]int, zOK bool) *edwSetup {
	g, err := convGeom(attrs, x[2:], w2[2:], false)
	if err != nil || g.stride[0] != g.stride[1] || g.stride[0] > 2 || g.dil[0] != 1 || g.dil[1] != 1 ||
		g.padB[0] > 1 || g.out[1] < 8 {
		return nil
	}
	mid, masks, ok := dwDirectSetup(g)
	if !ok {
		return nil
	}
	s := &edwSetup{x: x, w2: w2, g: g, mid: mid, masks: masks, z: dwZOK(pool, g), zOK: zOK}
	if s.z {
		s.mz = dwMasksZ(g.in[1], g.out[1])
	}
	return s
}

// edwJob is one call of ExpandDepthwise; units are (image, band of output
// rows).
type edwJob struct {
	a               *ExpandDW
	s               *edwSetup
	N, Cin, H, W, E int
	bands           int
	ep1             epi
	lo2, hi2        float32
	// act2 is the depthwise part's activation (kernel.Epilogue.Act), on
	// each run of output rows as it is stored.
	act2 func(vmath.Vec, []float32, []float32)
	// m is the call's machine without its pool: each unit's expansion
	// GEMM runs on the unit's worker.
	m machine
}

var edwJobs = sync.Pool{New: func() any { return new(edwJob) }}

func (j *edwJob) Run(lo, hi int) {
	g := j.s.g
	H, W, E, Cin := j.H, j.W, j.E, j.Cin
	OH, OW, sh, pt := g.out[0], g.out[1], g.stride[0], g.padB[0]
	// The buffer: cap rows of W floats per channel (channel stride cap*W),
	// about 256 KiB, at least the 3 rows one output row reads plus a
	// step.
	capRows := max(3+sh, min(H, (1<<16)/max(1, E*W)))
	buf := getF32(E*capRows*W + 16)
	zbuf := getF32(2*W + 64)
	clear(*zbuf)
	zr := (*zbuf)[16:]
	mb := matBs.Get().(*matB)
	m := j.s.masks
	for u := lo; u < hi; u++ {
		ni, band := u/j.bands, u%j.bands
		oyA, oyB := band*OH/j.bands, (band+1)*OH/j.bands
		x := j.a.X[ni*Cin*H*W : (ni+1)*Cin*H*W]
		y := j.a.Y[ni*E*OH*OW : (ni+1)*E*OH*OW]
		r0, cnt := 0, 0 // the buffer holds input rows [r0, r0+cnt)
		for oy := oyA; oy < oyB; {
			// The output rows [oy, oyE) whose input rows fit the buffer.
			first := max(0, oy*sh-pt)
			oyE := oy + 1
			for oyE < oyB && min(H, oyE*sh-pt+3)-first <= capRows {
				oyE++
			}
			last := min(H, (oyE-1)*sh-pt+3) // input rows [first, last)
			if first < r0 || last > r0+cnt {
				// Keep the rows still needed, then compute the rest.
				if first >= r0 && first < r0+cnt {
					keep := r0 + cnt - first
					for e := 0; e < E; e++ {
						pl := (*buf)[e*capRows*W:]
						copy(pl[:keep*W], pl[(first-r0)*W:(first-r0+keep)*W])
					}
					r0, cnt = first, keep
				} else {
					r0, cnt = first, 0
				}
				if n := last - (r0 + cnt); n > 0 {
					j.expand(mb, x[(r0+cnt)*W:], n*W, (*buf)[cnt*W:], capRows*W)
					cnt += n
				}
			}
			for e := 0; e < E; e++ {
				pl := (*buf)[e*capRows*W:]
				wc := &j.a.W2[e*9]
				bp := &negZero
				if j.a.B2 != nil {
					bp = &j.a.B2[e]
				}
				yc := y[e*OH*OW:]
				for o := oy; o < oyE; {
					rows := 1
					iy := o*sh - pt
					if iy >= 0 && iy+3 <= H {
						// Every row from here whose taps are all inside.
						for o+rows < oyE && (o+rows)*sh-pt+3 <= H {
							rows++
						}
					}
					var r [3]*float32
					for ky := range r {
						r[ky] = &zr[0]
						if t := iy + ky; t >= 0 && t < H {
							r[ky] = &pl[(t-r0)*W]
						}
					}
					if g.stride[1] == 1 {
						amd64.DwS1P1(r[0], r[1], r[2], sh*W, rows, wc, &yc[o*OW], OW, OW, j.s.mid, &m, bp, j.lo2, j.hi2)
					} else if j.s.z {
						amd64.DwS2P1Z(r[0], r[1], r[2], sh*W, rows, wc, &yc[o*OW], OW, &j.s.mz, bp, j.lo2, j.hi2)
					} else {
						amd64.DwS2P1(r[0], r[1], r[2], sh*W, rows, wc, &yc[o*OW], OW, OW, j.s.mid, &m, bp, j.lo2, j.hi2)
					}
					if j.act2 != nil {
						// The activation over the rows just stored.
						j.act2(j.m.vec, yc[o*OW:(o+rows)*OW], yc[o*OW:(o+rows)*OW])
					}
					o += rows
				}
			}
			oy = oyE
		}
	}
	*mb = matB{}
	matBs.Put(mb)
	putF32(buf)
	putF32(zbuf)
}

// expand computes the expansion of n pixels, the input rows at x (Cin
// planes H*W floats apart), into c (row stride ldc). The whole 6-row
// panels of each whole 16-column panel run in one amd64.Sgemm6x16RBN
// call, the chains and store of the GEMM's Sgemm6x16RB tiles (each output
// FMA(w, x, acc) over the input channels ascending from +0, canon, + B1,
// the clamp), without its per-tile work, which at K = Cin = 16 cost about
// a sixth of the expansion; the activation follows over those rows. The
// last columns (n not a multiple of 16) and rows (E not a multiple of 6)
// go through sgemmFastB, as all of it did before, and so does all of it
// where the machine has AVX-512 (unitZ's tiles).
func (j *edwJob) expand(mb *matB, x []float32, n int, c []float32, ldc int) {
	E, Cin, HW := j.E, j.Cin, j.H*j.W
	np, nf := E/gemmMR, n/gemmNR*gemmNR
	if np == 0 || nf == 0 || j.m.z {
		// (AVX-512 machines keep the GEMM's own wider tiles.)
		*mb = matB{b: x, brs: HW, bcs: 1}
		sgemmFastB(j.m, E, n, Cin, j.a.W1, Cin, 1, mb, j.a.B1, j.ep1, c, ldc)
		return
	}
	_ = x[(Cin-1)*HW+n-1]
	_ = c[(E-1)*ldc+n-1]
	var bias *float32
	if j.a.B1 != nil {
		bias = &j.a.B1[0]
	}
	var lo, hi float32
	clamp := 0
	if j.ep1.on {
		lo, hi, clamp = j.ep1.lo, j.ep1.hi, 1
	}
	for q := 0; q < nf; q += gemmNR {
		amd64.Sgemm6x16RBN(Cin, &j.a.W1[0], Cin, np, &x[q], HW, &c[q], ldc, bias, lo, hi, clamp)
	}
	j.ep1.activate(c, ldc, np*gemmMR, nf)
	if nf < n {
		*mb = matB{b: x[nf:], brs: HW, bcs: 1}
		sgemmFastB(j.m, E, n-nf, Cin, j.a.W1, Cin, 1, mb, j.a.B1, j.ep1, c[nf:], ldc)
	}
	if r := np * gemmMR; r < E {
		var b1 []float32
		if j.a.B1 != nil {
			b1 = j.a.B1[r:]
		}
		*mb = matB{b: x, brs: HW, bcs: 1}
		sgemmFastB(j.m, E-r, nf, Cin, j.a.W1[r*Cin:], Cin, 1, mb, b1, j.ep1, c[r*ldc:], ldc)
	}
}
