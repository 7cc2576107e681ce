package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/fast"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// openFast reads the placement's fast kernels (parseFast), loads the fast
// entry points of the image, and packs and uploads each fast layer's
// weights once, in its precision (ONNX Runtime's PrePack: the state lives
// with the program, freed by Close).
func (pr *Program) openFast(g *ir.Graph, layers []plan.Placement) error {
	pr.fast = map[*ir.Node]*fastSpec{}
	for i, n := range g.Nodes {
		if layers[i].Backend != plan.BackendCUDA || !strings.HasPrefix(layers[i].Kernel, "fast.") {
			continue
		}
		sp, body, err := parseFast(layers[i].Kernel, n)
		if err != nil {
			return fmt.Errorf("%w: layer %s: %w", ErrPlan, layers[i].Layer, err)
		}
		if body == nil {
			pr.fast[n] = &sp
			if err := pr.pack(g, n, sp); err != nil {
				return fmt.Errorf("engine: layer %s: %w", layers[i].Layer, err)
			}
			continue
		}
		bg := n.Attrs["body"].G
		for b, bs := range body {
			pr.fast[b] = &bs
			if err := pr.pack(bg, b, bs); err != nil {
				return fmt.Errorf("engine: layer %s, body layer %s: %w", layers[i].Layer, b.Name, err)
			}
		}
	}
	if len(pr.fast) == 0 {
		return nil
	}
	fe, err := fast.Load(pr.e)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPlan, err)
	}
	pr.fe = fe
	return nil
}

// packKey is where a layer's packed weights are kept.
func packKey(g *ir.Graph, name string, p plan.Precision) wkey {
	return wkey{g, name + "\x00" + string(p)}
}

// pack uploads n's weights as the fast kernels read them: [M][K] 16-bit
// values, M the output channels (features), K the reduction.
func (pr *Program) pack(g *ir.Graph, n *ir.Node, sp fastSpec) error {
	if sp.prec == plan.Int8 {
		return pr.packInt8(g, n, sp)
	}
	if sp.op == "attention" {
		return nil // activations only (fast_attn.go)
	}
	wn := n.Input(1)
	key := packKey(g, wn, sp.prec)
	if pr.weights[key] != nil {
		return nil
	}
	w := g.Initializers[wn]
	if w == nil || w.DType != tensor.Float32 {
		return fmt.Errorf("fast %s: weights %q are not a float32 constant", sp.op, wn)
	}
	data := w.Data.([]float32)
	var M, K, rs, cs int
	switch {
	case sp.op == "conv" && len(w.Shape) == 4:
		M, K = w.Shape[0], w.Shape[1]*w.Shape[2]*w.Shape[3]
		rs, cs = K, 1
	case sp.op == "gemm" && len(w.Shape) == 2 && n.Int("transB", 0) != 0:
		M, K, rs, cs = w.Shape[0], w.Shape[1], w.Shape[1], 1
	case (sp.op == "gemm" || sp.op == "matmul") && len(w.Shape) == 2:
		M, K, rs, cs = w.Shape[1], w.Shape[0], 1, w.Shape[1]
	default:
		return fmt.Errorf("fast %s: weights of shape %v", sp.op, w.Shape)
	}
	p, err := fast.PackWeights(data, M, K, rs, cs, sp.prec)
	if err != nil {
		return err
	}
	b, err := pr.c.Alloc(uint64(len(p)) * 2)
	if err != nil {
		return err
	}
	if err := pr.c.UploadUint16(b, p); err != nil {
		b.Free()
		return err
	}
	pr.weights[key] = b
	return nil
}

// packed returns a fast layer's packed weights.
func (s *state) packed(wn string) (uint64, error) {
	b := s.pr.weights[packKey(s.g, wn, s.cur.prec)]
	if b == nil {
		return 0, fmt.Errorf("fast %s: no packed weights for %q", s.cur.op, wn)
	}
	return b.Ptr, nil
}

// fastConv runs a Conv layer (its operands checked by conv) on the fast
// kernel its placement names.
func (s *state) fastConv(g exact.ConvGeom, wn string, x, bias, res uint64, act exact.Act, y uint64) error {
	if s.cur.op != "conv" {
		return fmt.Errorf("a %s fast kernel for a Conv", s.cur.op)
	}
	w, err := s.packed(wn)
	if err != nil {
		return err
	}
	if s.cur.prec == plan.Int8 {
		return s.int8Conv(g, w, wn, x, bias, res, act, y)
	}
	return s.pr.fe.Conv(s.l.st, s.cur.prec, s.cur.tile, g, x, w, bias, res, act, y)
}

// fastGemm runs a Gemm of A (M x K on the device) by its constant B, with
// C absent or a row of N as the bias, then act.
func (s *state) fastGemm(a uint64, M, N, K int, bn, cn string, act exact.Act, out string) error {
	if s.cur.op != "gemm" {
		return fmt.Errorf("a %s fast kernel for a Gemm", s.cur.op)
	}
	w, err := s.packed(bn)
	if err != nil {
		return err
	}
	var bias uint64
	if cn != "" {
		c, cs, err := s.dev(cn)
		if err != nil {
			return err
		}
		if tensor.NumElems(cs) != N || len(cs) == 2 && cs[0] != 1 {
			return fmt.Errorf("fast Gemm C of shape %v (the fast kernel adds a row of %d)", cs, N)
		}
		bias = c
	}
	y, err := s.out(out, []int{M, N})
	if err != nil {
		return err
	}
	if s.cur.prec == plan.Int8 {
		return s.int8Gemm(M, N, K, a, w, bn, bias, act, y)
	}
	return s.pr.fe.GEMM(s.l.st, s.cur.prec, s.cur.tile, M, N, K, a, w, bias, act, y)
}

// fastMatMul runs A (rows x K) by a constant 2-D B into y, with the bias
// (a row of N) and residual (rows x N) in the epilogue (0: none), then its
// GELU there when the placement says so; a fused MatMul's other Adds and
// activation follow as matmulFused's exact passes.
func (s *state) fastMatMul(a uint64, rows, N, K int, bn string, bias, res, y uint64) error {
	if s.cur.op != "matmul" {
		return fmt.Errorf("a %s fast kernel for a MatMul", s.cur.op)
	}
	w, err := s.packed(bn)
	if err != nil {
		return err
	}
	if s.cur.gelu {
		return s.pr.fe.GEMMGelu(s.l.st, s.cur.prec, s.cur.tile, rows, N, K, a, w, bias, res, y)
	}
	return s.pr.fe.GEMMRes(s.l.st, s.cur.prec, s.cur.tile, rows, N, K, a, w, bias, res, exact.Act{}, y)
}

// epilogueOperands reads the device operands of a fast MatMul's epilogue
// (s.cur.epi) from n's Adds, checked against the output's shape os: the
// bias a row of os's last dimension, the residual of os's shape.
func (s *state) epilogueOperands(n *ir.Node, h fused.Layer, os []int) (bias, res uint64, err error) {
	for i, e := range s.cur.epi {
		p, ps, err := s.dev(n.Inputs[h.BaseInputs+i])
		if err != nil {
			return 0, 0, err
		}
		switch e {
		case epiBias:
			if N := os[len(os)-1]; len(ps) == 0 || ps[len(ps)-1] != N || tensor.NumElems(ps) != N {
				return 0, 0, fmt.Errorf("fast MatMul epilogue bias of shape %v for an output of %v", ps, os)
			}
			bias = p
		case epiRes:
			if !slices.Equal(ps, os) {
				return 0, 0, fmt.Errorf("fast MatMul epilogue residual of shape %v for an output of %v", ps, os)
			}
			res = p
		}
	}
	return bias, res, nil
}

// FastLayers counts the layers a program runs with fast kernels (a
// ConvChain's body convolutions each).
func (pr *Program) FastLayers() int { return len(pr.fast) }
