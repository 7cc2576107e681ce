package nn

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/vouchml/vouch/kernel/amd64"
)

// On AVX2 without AVX-512, maxFlat's small planes run amd64.MaxTaps8: the
// same flat runs of outputs per plane, 8 to a vector, four planes per
// call's record, each tap read in place under the vector's lane masks:
// with one (masked) load where the vector's windows lie at consecutive
// offsets (unit column stride within one output row, or maxFlatUnit's
// whole planes), else gathered. The rule is MaxFlatZ's (-inf, the first
// tap inside the input as it is, then v > best ? v : best in row-major
// order), so the bits are maxPoolInto's. Per-plane row copies and calls
// (maxPool2D) cost GoogLeNet's 832-channel 7x7 pools 8x ONNX Runtime's
// time; see BenchmarkMaxPoolSmall.

// maxTaps8Gathered bounds the planes (in outputs) that MaxTaps8 runs
// unless all their taps are at fixed offsets (maxFlatUnit): 2x2/2 pools
// of 1024 outputs per plane took 275 us for 128 planes against the row
// kernels' 398 us, of 3136 outputs 1.11 ms against 1.01 ms.
const maxTaps8Gathered = 1024

// maxTaps8Rec is the bytes of one MaxTaps8 record for taps taps.
func maxTaps8Rec(taps int) int { return (40 + 2*taps + 1 + 7) &^ 7 }

// maxTaps8OK reports whether MaxTaps8 can run g (maxPool2D's 2-D view):
// planes of 1 to maxFlatMaxOut outputs, windows of at most maxFlatMaxTaps
// taps, offsets that fit in int32.
func maxTaps8OK(g *geom) bool {
	return len(g.in) == 2 && prod(g.out) >= 1 && prod(g.out) <= maxFlatMaxOut && prod(g.k) <= maxFlatMaxTaps &&
		prod(g.in) >= 1 && prod(g.in) < math.MaxInt32/4
}

// newMaxTaps8Tab builds MaxTaps8's tap offsets and records for g.
func newMaxTaps8Tab(g *geom) (offs []int32, tab []byte, nv int) {
	W, OW := g.in[1], g.out[1]
	kh, kw := g.k[0], g.k[1]
	taps, P := kh*kw, prod(g.out)
	for ky := 0; ky < kh; ky++ {
		for kx := 0; kx < kw; kx++ {
			offs = append(offs, int32((ky*g.dil[0]-g.padB[0])*W+kx*g.dil[1]-g.padB[1]))
		}
	}
	nv = (P + 7) / 8
	rec := maxTaps8Rec(taps)
	tab = make([]byte, nv*rec)
	var m [2*maxFlatMaxTaps + 1]uint16
	for v := 0; v < nv; v++ {
		r := tab[v*rec : (v+1)*rec]
		clear(m[:])
		consec := true
		var idx [8]int
		for l := 0; l < 8; l++ {
			o := min(8*v+l, P-1) // lanes past the plane: never read, never stored
			idx[l] = o/OW*g.stride[0]*W + o%OW*g.stride[1]
			binary.LittleEndian.PutUint32(r[4*l:], uint32(int32(idx[l])))
			if 8*v+l < P {
				m[2*taps] |= 1 << l
				maxTapMasks(g, o/OW, o%OW, l, m[:])
				consec = consec && idx[l] == idx[0]+l
			}
		}
		if consec {
			binary.LittleEndian.PutUint32(r[32:], 1)
		}
		for i := 0; i <= 2*taps; i++ {
			r[40+i] = byte(m[i])
		}
	}
	return offs, tab, nv
}

// runTaps8 computes planes [lo, hi) of j with MaxTaps8.
func (j *maxFlatJob) runTaps8(lo, hi int) {
	t := j.t
	p := amd64.MaxTaps{X: addr(&j.x[lo*j.in]), Y: addr(&j.y[lo*j.out]), Planes: hi - lo, XStep: j.in, YStep: j.out,
		NV: t.nv8, Taps: t.taps, Offs: addr32(t.offs8, 0), Tab: uintptr(unsafe.Pointer(unsafe.SliceData(t.tab8))),
		Rec: maxTaps8Rec(t.taps), Lanes: uintptr(unsafe.Pointer(&amd64.LaneMasks8))}
	amd64.MaxTaps8(&p)
}
