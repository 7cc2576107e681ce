package emu

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vouchml/vouch/cuda/attn"
	"github.com/vouchml/vouch/cuda/mma"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// attention is a fast Attention layer of kernel k
// ("fast.<p>.attention(s<SMAX>)"): package attn's Reference, the
// arithmetic of fast_attn.cu, on the layer's inputs; a sequence past the
// kernel's SMAX fails as on the GPU.
func attention(m mma.Model, f mma.Format, n *ir.Node, in []*tensor.Tensor, k string) ([]*tensor.Tensor, error) {
	_, op, _ := plan.ParseFastKernel(k)
	smax, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(op, "attention(s"), ")"))
	if err != nil {
		return nil, fmt.Errorf("emu: attention kernel %q: want attention(s<SMAX>)", k)
	}
	sp, err := attn.Parse(n)
	if err != nil {
		return nil, fmt.Errorf("emu: %w", err)
	}
	get := func(i int, what string) ([]float32, []int, error) {
		if i < 0 || i >= len(in) {
			return nil, nil, fmt.Errorf("emu: attention %s is missing", what)
		}
		v, err := floats(in[i], "the attention "+what)
		if err != nil {
			return nil, nil, err
		}
		return v, in[i].Shape, nil
	}
	q, qs, err := get(sp.Q, "q")
	if err != nil {
		return nil, err
	}
	kt, kts, err := get(sp.Kt, "kt")
	if err != nil {
		return nil, err
	}
	v, vs, err := get(sp.V, "v")
	if err != nil {
		return nil, err
	}
	var mask []float32
	var ms []int
	if sp.Mask >= 0 {
		if mask, ms, err = get(sp.Mask, "mask"); err != nil {
			return nil, err
		}
	}
	var scale float32
	if sp.ScaleInput >= 0 {
		if sp.ScaleInput >= len(in) {
			return nil, fmt.Errorf("emu: attention scale is missing")
		}
		if scale, err = attn.ScaleOf(in[sp.ScaleInput]); err != nil {
			return nil, fmt.Errorf("emu: %w", err)
		}
	}
	g, err := attn.Geometry(qs, kts, vs, ms, sp.Mask >= 0)
	if err != nil {
		return nil, fmt.Errorf("emu: %w", err)
	}
	if g.S > smax {
		return nil, fmt.Errorf("emu: attention of a sequence of %d on the s%d kernel (the plan was built for at most %d)", g.S, smax, smax)
	}
	y, err := attn.Reference(m, f, g, q, kt, v, mask, sp.Op, scale)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{tensor.From(y, qs...)}, nil
}
