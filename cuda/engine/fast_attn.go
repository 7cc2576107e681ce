package engine

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/attn"
	"github.com/vouchml/vouch/cuda/fast"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// Fast attention (issue 19): an Attention layer (kernel/fused's chain of
// MatMul, scaling, mask, Softmax, MatMul) placed on fast_attn.cu's fused
// kernel, "fast.<fp16|bf16>.attention(s<SMAX>)": the longest sequence of
// the kernel, from the layer's types at build time, never from the batch. Package attn states the arithmetic and
// computes it on the CPU.

// A fast plan's LayerNormalization layers over rows of at most
// kernels.FastLayerNormMaxD values known at build time run on
// fast_attn.cu's va_layernorm: vx_layernorm's arithmetic in its order (the
// exact bits: the layer stays exact, its placement states no precision),
// a warp per row staged in shared memory instead of a thread per row.

func init() {
	families = append(families, family{place: func(*ir.Node, *ir.Graph, map[string]ir.Type) (string, string, bool) { return "", "", false }, run: runFastAttention},
		family{place: func(*ir.Node, *ir.Graph, map[string]ir.Type) (string, string, bool) { return "", "", false }, run: runFastLayerNorm})
}

// fastLayerNorm is the kernel of a fast plan's LayerNormalization whose
// exact kernel is vx_layernorm: va_layernorm for rows of a known size up
// to FastLayerNormMaxD, else "" (it keeps vx_layernorm).
func fastLayerNorm(n *ir.Node, types map[string]ir.Type, exactKernel string) string {
	t, ok := types[n.Input(0)]
	if exactKernel != kernels.LayerNorm || !ok || !t.RankKnown || len(t.Shape) == 0 {
		return ""
	}
	if d := t.Shape[len(t.Shape)-1]; !d.Known() || d.Value < 1 || d.Value > kernels.FastLayerNormMaxD {
		return ""
	}
	return kernels.FastLayerNorm
}

// runFastLayerNorm runs a LayerNormalization placed on va_layernorm, its
// operands checked as the exact kernel's are.
func runFastLayerNorm(s *state, n *ir.Node) (bool, error) {
	if n.OpType != "LayerNormalization" || s.pr.kernel[n] != kernels.FastLayerNorm {
		return false, nil
	}
	x, shape, err := s.dev(n.Inputs[0])
	if err != nil {
		return true, err
	}
	if len(shape) == 0 {
		return true, fmt.Errorf("LayerNormalization of a scalar")
	}
	D := shape[len(shape)-1]
	if D < 1 || D > kernels.FastLayerNormMaxD {
		return true, fmt.Errorf("LayerNormalization over rows of %d on %s (at most %d)", D, kernels.FastLayerNorm, kernels.FastLayerNormMaxD)
	}
	scale, ss, err := s.dev(n.Inputs[1])
	if err != nil {
		return true, err
	}
	if tensor.NumElems(ss) != D {
		return true, fmt.Errorf("LayerNormalization scale of shape %v over rows of %d", ss, D)
	}
	var bias uint64
	if n.Input(2) != "" {
		var bs []int
		if bias, bs, err = s.dev(n.Inputs[2]); err != nil {
			return true, err
		}
		if tensor.NumElems(bs) != D {
			return true, fmt.Errorf("LayerNormalization bias of shape %v over rows of %d", bs, D)
		}
	}
	y, err := s.out(n.Outputs[0], shape)
	if err != nil {
		return true, err
	}
	rows := int64(tensor.NumElems(shape) / D)
	if rows == 0 {
		return true, nil
	}
	f, err := s.pr.attnFunc(kernels.FastLayerNorm)
	if err != nil {
		return true, err
	}
	args := (&cuda.Args{}).Ptr(x).Ptr(scale).Ptr(bias).F32(n.Float("epsilon", 1e-5)).Ptr(y).I64(rows).I32(int32(D))
	grid := cuda.D3(uint32((rows+kernels.FastLayerNormRows-1)/kernels.FastLayerNormRows), 1, 1)
	return true, f.Launch(s.l.st, grid, cuda.D3(32*kernels.FastLayerNormRows, 1, 1), 0, args)
}

// fastAttention names n's fused attention kernel in precision p, or says
// why it has none.
func fastAttention(n *ir.Node, g *ir.Graph, types map[string]ir.Type, p plan.Precision) (kernel, reason string) {
	if !fast.Supported(p) {
		return "", fmt.Sprintf("precision %q has no fused attention: exact", p)
	}
	sp, err := attn.Parse(n)
	if err != nil {
		return "", err.Error() + ": exact"
	}
	if sp.ScaleInput >= 0 {
		if _, err := attn.ScaleOf(g.Initializers[n.Input(sp.ScaleInput)]); err != nil {
			return "", err.Error() + ": exact"
		}
	}
	// The sequence from q's type or the mask's last dimension; unknown at
	// build time, the longest kernel (a longer one at run time fails the
	// run, naming the layer). The head size is read at run time: it picks
	// the entry point (the model's, never the batch's).
	S := 0
	last := func(v string, back int) int {
		t, ok := types[v]
		if !ok || !t.RankKnown || len(t.Shape) < back || !t.Shape[len(t.Shape)-back].Known() {
			return 0
		}
		return int(t.Shape[len(t.Shape)-back].Value)
	}
	if S = last(n.Input(sp.Q), 2); S == 0 && sp.Mask >= 0 {
		if S = last(n.Input(sp.Mask), 1); S == 1 {
			S = 0
		}
	}
	if D := last(n.Input(sp.Q), 1); D != 0 {
		if why := attn.Fits(max(S, 1), D); why != "" {
			return "", why + ": exact"
		}
	}
	if S > attn.MaxS {
		return "", attn.Fits(S, 64) + ": exact"
	}
	return fastName(p, "attention", fmt.Sprintf("s%d", attn.SMax(S))), ""
}

// parseAttnTile reads "s<SMAX>" into a Tile {0, SMAX}.
func parseAttnTile(s string) (fast.Tile, error) {
	sm, err := strconv.Atoi(strings.TrimPrefix(s, "s"))
	if err != nil || !strings.HasPrefix(s, "s") {
		return fast.Tile{}, fmt.Errorf("attention tile %q: want s<SMAX>", s)
	}
	for _, k := range kernels.FastAttnShapes {
		if k[1] == sm {
			return fast.Tile{BN: sm}, nil
		}
	}
	return fast.Tile{}, fmt.Errorf("attention tile %q: no such kernel (head sizes and sequences %v)", s, kernels.FastAttnShapes)
}

// attnFuncs caches the attention entry points per loaded module.
var attnFuncs sync.Map // attnFunc -> *cuda.Function

type attnFunc struct {
	m    *cuda.Module
	name string
}

// attnFunc returns the loaded entry point name of the program's image.
func (pr *Program) attnFunc(name string) (*cuda.Function, error) {
	key := attnFunc{pr.e.Mod, name}
	if f, ok := attnFuncs.Load(key); ok {
		return f.(*cuda.Function), nil
	}
	fn, err := pr.e.Mod.Function(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlan, err)
	}
	f, _ := attnFuncs.LoadOrStore(key, fn)
	return f.(*cuda.Function), nil
}

// runFastAttention runs an Attention layer placed on the fused kernel.
func runFastAttention(s *state, n *ir.Node) (bool, error) {
	if s.cur == nil || s.cur.op != "attention" {
		return false, nil
	}
	sp, err := attn.Parse(n)
	if err != nil {
		return true, err
	}
	q, kt, v, qs, kts, vs, lay, err := s.attnOperands(n, sp)
	if err != nil {
		return true, err
	}
	var mask uint64
	var ms []int
	if sp.Mask >= 0 {
		if sp.Mask >= len(n.Inputs) {
			return true, fmt.Errorf("attention input %d of %d", sp.Mask, len(n.Inputs))
		}
		if mask, ms, err = s.dev(n.Input(sp.Mask)); err != nil {
			return true, err
		}
	}
	var scale float32
	if sp.ScaleInput >= 0 {
		if scale, err = attn.ScaleOf(s.g.Initializers[n.Input(sp.ScaleInput)]); err != nil {
			return true, err
		}
	}
	g, err := attn.Geometry(qs, kts, vs, ms, sp.Mask >= 0)
	if err != nil {
		return true, err
	}
	if g.S > s.cur.tile.BN {
		return true, fmt.Errorf("attention of a sequence of %d on the s%d kernel (the plan was built for at most %d)", g.S, s.cur.tile.BN, s.cur.tile.BN)
	}
	y, ys, err := s.attnOut(n, qs)
	if err != nil {
		return true, err
	}
	lay.Y = ys
	if g.B*g.H == 0 {
		return true, nil
	}
	if g.B > 65535 || g.H > 65535 {
		return true, fmt.Errorf("attention of %d batches of %d heads (the grid takes at most 65535 of each)", g.B, g.H)
	}
	prec := kernels.FastF16
	if s.cur.prec == fast.BF16 {
		prec = kernels.FastBF16
	}
	f, err := s.pr.attnFunc(kernels.FastAttnKernel(prec, g.D, s.cur.tile.BN))
	if err != nil {
		return true, err
	}
	args := (&cuda.Args{}).Ptr(q).Ptr(kt).Ptr(v).Ptr(mask).Ptr(y).I32(int32(g.S)).I32(int32(g.H)).I32(int32(sp.Op)).F32(scale).
		I64(int64(g.MB)).I64(int64(g.MH)).I64(int64(g.MI)).I64(int64(g.MJ)).Struct(lay.Words()...)
	grid := cuda.D3(uint32((g.S+kernels.FastAttnBQ-1)/kernels.FastAttnBQ), uint32(g.H), uint32(g.B))
	return true, f.Launch(s.l.st, grid, cuda.D3(kernels.FastAttnThreads, 1, 1), 0, args)
}
