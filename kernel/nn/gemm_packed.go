package nn

import (
	"errors"
	"unsafe"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
)

// A constant B (a MatMul's or a Gemm's weight initializer) is packed once,
// at bind time (Op.Prepare, into the node's kernel.State), into 16-column
// panels over all of k, the layout the vector GEMM kernels stream. Read in
// place, a B whose row stride is a large power of two (a 512x8192 LM head:
// 32 KB between rows) maps the k steps of one tile onto a few cache sets,
// so the tile is fetched again from L3 for every row panel (46 GFLOP/s on
// gpt_decoder's head); a transposed B (Gemm's transB, a Linear layer) is
// gathered into panels on every run, which at a few rows costs as much as
// the product. Packed, every tile reads one contiguous stream.
//
// Packing moves values and changes no chain: each output is still
// FMA(A[i,k], B[k,j], acc) over k ascending from +0 (sgemm's contract), so
// the bits are those of B read in place, of the portable twin and of
// every thread count (TestPackedBTwin).

// packedB is B packed into 16-column panels: panel q's step kk holds
// B(kk, 16q .. 16q+15) at p[(q*k+kk)*16:], lanes past n zero.
type packedB struct {
	b        unsafe.Pointer // the B it was packed from
	brs, bcs int
	k, n     int
	p        []float32
}

// gemmPackMin is the fewest rows (of A) for which a constant B is packed:
// with fewer, sgemm runs a GEMV that reads B in place once per row.
const gemmPackMin = gemmMR

// gemmPackMax bounds the floats of one packed B (1 GiB): beyond it B is
// read in place, as without packing.
const gemmPackMax = 1 << 28

// packB16 packs B(kk, j) = b[kk*brs+j*bcs], kk < k, j < n. It reads B in
// its storage order (a row of B, or a column when bcs != 1, at a time), so
// the packing itself streams.
func packB16(b []float32, brs, bcs, k, n int) *packedB {
	np := (n + gemmNR - 1) / gemmNR
	pb := &packedB{b: unsafe.Pointer(&b[0]), brs: brs, bcs: bcs, k: k, n: n, p: make([]float32, np*gemmNR*k)}
	if bcs == 1 {
		for kk := 0; kk < k; kk++ {
			row := b[kk*brs : kk*brs+n]
			for q := 0; q < np; q++ {
				c0 := q * gemmNR
				copy(pb.p[(q*k+kk)*gemmNR:(q*k+kk)*gemmNR+gemmNR], row[c0:min(n, c0+gemmNR)])
			}
		}
		return pb
	}
	for j := 0; j < n; j++ {
		d := pb.p[(j/gemmNR)*k*gemmNR+j%gemmNR:]
		for kk := 0; kk < k; kk++ {
			d[kk*gemmNR] = b[j*bcs+kk*brs]
		}
	}
	return pb
}

// same reports whether pb was packed from b with this geometry.
func (pb *packedB) same(b []float32, brs, bcs, k, n int) bool {
	return len(b) > 0 && pb.b == unsafe.Pointer(&b[0]) && pb.brs == brs && pb.bcs == bcs && pb.k == k && pb.n == n
}

// packB implements bSource: the block's panels copied out of the packed
// ones (the kernels read pb's panels in place; this serves any other
// caller of a bSource).
func (pb *packedB) packB(dst []float32, k0, kb, j0, cols int) {
	for qq := 0; qq*gemmNR < cols; qq++ {
		q := (j0 + qq*gemmNR) / gemmNR
		w := min(gemmNR, j0+cols-q*gemmNR)
		for kk := 0; kk < kb; kk++ {
			d := dst[(qq*kb+kk)*gemmNR : (qq*kb+kk+1)*gemmNR]
			copy(d, pb.p[(q*pb.k+k0+kk)*gemmNR:(q*pb.k+k0+kk)*gemmNR+w])
			clear(d[w:])
		}
	}
}

// panel returns the address of panel q's step kk.
func (pb *packedB) panel(q, kk int) *float32 { return &pb.p[(q*pb.k+kk)*gemmNR] }

// sgemmPacked is sgemmEp with B also given packed (pb, nil when it is
// not): the vector tiles read pb where they run, every other path reads b
// in place. The bits are sgemmEp's.
func sgemmPacked(pool machine, m, n, k int, a []float32, ars, acs int, b []float32, brs, bcs int, pb *packedB, c []float32, ldc int, ep epi) {
	if pb == nil || !pool.fast || m < gemmMR || n == 0 || k == 0 || !pb.same(b, brs, bcs, k, n) {
		sgemmEp(pool, m, n, k, a, ars, acs, b, brs, bcs, c, ldc, ep)
		return
	}
	sgemmFastB(pool, m, n, k, a, ars, acs, pb, nil, ep, c, ldc)
}

// gemmPackKey keys a MatMul or Gemm node's packed B in its kernel.State.
type gemmPackKey struct{ n *ir.Node }

var errNotPacked = errors.New("nn: B not packed at bind time")

// preparePackedB packs n's constant B (Prepare: b is an initializer's
// data) into c's kernel.State, where rows of A will run the vector tiles.
func preparePackedB(c *kernel.Ctx, n *ir.Node, m int, b []float32, brs, bcs, k, nn int) {
	pool := machineOf(c)
	if !pool.fast || c == nil || c.State == nil || m < gemmPackMin || k < 1 || nn < 1 ||
		len(b) == 0 || (nn+gemmNR-1)/gemmNR*gemmNR > gemmPackMax/k {
		return
	}
	kernel.Prepared(c, gemmPackKey{n}, func(p *packedB) bool { return p.same(b, brs, bcs, k, nn) },
		func() (*packedB, error) { return packB16(b, brs, bcs, k, nn), nil })
}

// packedBOf returns n's B as Prepare packed it, or nil where it did not
// (B not constant, too few rows, no State): it never packs.
func packedBOf(c *kernel.Ctx, n *ir.Node, b []float32, brs, bcs, k, nn int) *packedB {
	if c == nil || c.State == nil || len(b) == 0 {
		return nil
	}
	pb, err := kernel.Prepared(c, gemmPackKey{n}, func(p *packedB) bool { return p.same(b, brs, bcs, k, nn) },
		func() (*packedB, error) { return nil, errNotPacked })
	if err != nil {
		return nil
	}
	return pb
}
