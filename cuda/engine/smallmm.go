package engine

import (
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/tensor"
)

// Small products by a weight. A BERT-base layer at batch 1 multiplies 128
// token rows by weights of 768 to 3072 columns: SGEMM's 128x128 tiles
// make 6 to 24 blocks of it for 132 SMs, and the FF2 product (k = 3072)
// ran on 6 of them (bert_base at batch 1: 12.6 ms in exact mode, PyTorch
// FP32 2.3 ms, on the H200). Such a product runs instead as the 1x1
// convolution of images A[i] (K channels of one pixel) by filters Bᵀ[j]
// on the batch-folded conv tiles, whose choice (exact.ConvChoice) fills
// the SMs with smaller tiles: per output the same chain over k ascending
// from +0, so the same bits (the route Gemm with B transposed already
// takes). Bᵀ is made once per weight, on the host (values moved with their
// bits), and kept beside the program's weights. A product that fills the
// device keeps SGEMM (faster per tile at large M).

// underfills reports whether SGEMM's grid for an m x n product leaves
// some of sms multiprocessors without a block.
func underfills(m, n, sms int) bool {
	if m%128 == 0 && n%128 == 0 {
		return (m/128)*(n/128) < sms
	}
	return ((m+63)/64)*((n+63)/64) < sms
}

// smallProduct runs y = A·B (A [m, k] row-major at a, B the weight named
// bn, [k, n]) on the conv tiles when SGEMM would underfill the device; ok
// is false when it does not apply (B computed at run time, or a product
// that fills the device).
func (s *state) smallProduct(bn string, m, n, k int, a, y uint64) (ok bool, err error) {
	t, isWeight := s.g.Initializers[bn]
	if !isWeight || t.DType != tensor.Float32 || len(t.Shape) != 2 || t.Shape[0] != k || t.Shape[1] != n || !underfills(m, n, s.pr.e.SMs) {
		return false, nil
	}
	key := wkey{s.g, "T/" + bn}
	w := s.pr.weights[key]
	if w == nil {
		bt := Transposed(t.Data.([]float32), k, n)
		if w, err = s.pr.c.Alloc(uint64(max(len(bt), 1)) * 4); err != nil {
			return true, err
		}
		if err := s.pr.c.Upload(w, bt); err != nil {
			w.Free()
			return true, err
		}
		s.pr.weights[key] = w
	}
	g := exact.ConvGeom{N: m, C: k, H: 1, W: 1, M: n, OH: 1, OW: 1, G: 1, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
	return true, s.pr.e.Conv2DAct(s.l.st, g, a, w.Ptr, 0, 0, exact.Act{}, y)
}

// Transposed returns the [cols, rows] transpose of the row-major
// [rows, cols] matrix b: the filters Bᵀ[j] of a 1x1 convolution.
func Transposed(b []float32, rows, cols int) []float32 {
	bt := make([]float32, len(b))
	for r := range rows {
		for c := range cols {
			bt[c*rows+r] = b[r*cols+c]
		}
	}
	return bt
}
