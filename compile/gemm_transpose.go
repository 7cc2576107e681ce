package compile

import (
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// transposeGemmWeights stores the constant B of a float32 Gemm with
// transB=1 (B held as N x K) transposed, as K x N, and clears transB. The
// GEMM then reads each step's B values as one contiguous row (with transB
// the matrix-vector kernel gathers them, one cache line per column). It
// is a pure data move: every output is the same FMA chain over k in the
// same order, so the bits are unchanged. A B that is also read elsewhere,
// or that a graph input may override, is left alone; so are Gemms the
// precision pass turned into other layers (this pass runs after it).
func transposeGemmWeights(s *state) error {
	g := s.g
	u := uses(g)
	inputs := map[string]bool{}
	for _, v := range g.Inputs {
		inputs[v.Name] = true
	}
	for _, n := range g.Nodes {
		base := n.OpType
		if n.Domain == fusedDomain && n.OpType == fused.OpFused {
			base = fused.BaseOf(n)
		} else if n.Domain != "" {
			continue
		}
		if base != "Gemm" || n.Int("transB", 0) != 1 || len(n.Inputs) < 2 {
			continue
		}
		name := n.Inputs[1]
		w, ok := g.Initializers[name]
		if !ok || inputs[name] || u[name] != 1 || w.DType != tensor.Float32 || len(w.Shape) != 2 {
			continue
		}
		N, K := w.Shape[0], w.Shape[1]
		src := w.Data.([]float32)
		dst := make([]float32, len(src))
		for j := 0; j < N; j++ {
			row := src[j*K : (j+1)*K]
			for k, v := range row {
				dst[k*N+j] = v
			}
		}
		nn := n.Name + "/weight_kn"
		for g.Initializers[nn] != nil {
			nn += "_"
		}
		g.Initializers[nn] = tensor.From(dst, K, N)
		n.Inputs[1] = nn
		delete(n.Attrs, "transB")
		s.log.Info(s.pass, "transposed", map[string]any{"layer": n.Name, "weight": name, "as": nn, "k": K, "n": N})
	}
	return nil
}
