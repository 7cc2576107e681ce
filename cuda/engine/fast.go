package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/fast"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// FastBackend is the audit record's backend of a plan with fast layers.
const FastBackend = "cuda-fast"

// FastOptions choose a fast plan's precisions (issue 19).
type FastOptions struct {
	// Precision is the default for the layers a fast kernel runs
	// (plan.FP16, "bf16", plan.Int8); "" or plan.FP32 keeps every layer
	// exact unless Layers says otherwise.
	Precision plan.Precision
	// Layers overrides Precision per layer (by plan layer name);
	// plan.FP32 keeps that layer's exact kernel.
	Layers map[string]plan.Precision
	// Scales are int8 activation scales per value name (from compile's
	// calibration), needed only for int8.
	Scales map[string]float32
}

// FastNote says why a layer asked for a fast precision stays exact.
type FastNote struct {
	Layer, Reason string
}

func (n FastNote) String() string { return n.Layer + ": " + n.Reason }

// check refuses a precision no fast mode knows.
func (o FastOptions) check() error {
	ok := func(p plan.Precision) bool {
		return p == "" || p == plan.FP32 || p == plan.FP16 || p == fast.BF16 || p == plan.Int8
	}
	if !ok(o.Precision) {
		return fmt.Errorf("engine: fast precision %q (want fp16, bf16, int8 or fp32)", o.Precision)
	}
	for l, p := range o.Layers {
		if !ok(p) || p == "" {
			return fmt.Errorf("engine: layer %s: fast precision %q (want fp16, bf16, int8 or fp32)", l, p)
		}
	}
	return nil
}

func (o FastOptions) precision(layer string) (plan.Precision, bool) {
	if p, ok := o.Layers[layer]; ok {
		return p, true
	}
	return o.Precision, false
}

// heavy ops: the layers a precision is about (matrix products), which get
// a note when they stay exact.
var heavy = []string{"Conv", "Gemm", "MatMul", "ConvChain", fused.ExpandDepthwise, "Attention", "ConvTranspose", "LSTM", "GRU", "RNN"}

// PlaceFast returns the exact placement (Place) with the layers a fast
// kernel supports switched to it, and a note for each layer asked for a
// fast precision that stays exact. Kernel names are
// "fast.<precision>.<op>(<tiles>)": conv (a Conv layer, fused or not, or a
// ConvChain, whose body convolutions are listed in order, "exact" for a
// body layer that keeps its exact kernel), gemm, matmul (a MatMul by a
// constant matrix, its fused Adds and activation after it as exact
// passes, named after a "+"). The tile comes from the layer's weights and
// per-image output size, never from the batch.
func PlaceFast(g *ir.Graph, types map[string]ir.Type, o FastOptions) ([]plan.Placement, []FastNote) {
	out := Place(g, types)
	var notes []FastNote
	for i, n := range g.Nodes {
		name := out[i].Layer
		p, explicit := o.precision(name)
		if p == "" || p == plan.FP32 {
			continue
		}
		base := fused.BaseOf(n)
		note := func(why string) {
			if explicit || slices.Contains(heavy, base) || slices.Contains(heavy, n.OpType) {
				notes = append(notes, FastNote{name, why})
			}
		}
		switch {
		case p == plan.Int8:
			if k, why := fastInt8For(n, g, types, out[i], o.Scales); k != "" {
				out[i].Kernel = k
			} else if why != "" {
				note(why)
			}
			continue
		case !fast.Supported(p):
			note(fmt.Sprintf("precision %q has no fast kernel: exact", p))
			continue
		case out[i].Backend != plan.BackendCUDA:
			note("on the CPU (" + out[i].Reason + "): no fast kernel")
			continue
		}
		k, why := fastKernelFor(n, g, types, p, out[i].Kernel)
		if k == "" {
			if why == "" {
				why = fmt.Sprintf("%s has no fast kernel: exact", n.OpType)
			}
			note(why)
			continue
		}
		out[i].Kernel = k
	}
	foldAttention(g, types, out)
	// Each fast layer's placement states its kernel's precision (plan
	// refuses one that does not).
	for i := range out {
		if p, _, ok := plan.ParseFastKernel(out[i].Kernel); ok && out[i].Backend == plan.BackendCUDA {
			out[i].Precision = p
		}
	}
	return out, notes
}

// fastName is a fast kernel's name: fast.<precision>.<op>(<tiles>).
func fastName(p plan.Precision, op string, tiles string) string {
	return "fast." + string(p) + "." + op + "(" + tiles + ")"
}

// fastKernelFor names n's fast kernel in precision p, or says why it has
// none (reason "" with no kernel: an op a fast kernel is not about).
func fastKernelFor(n *ir.Node, g *ir.Graph, types map[string]ir.Type, p plan.Precision, exactKernel string) (kernel, reason string) {
	switch fused.BaseOf(n) {
	case "Conv":
		t, why := fastConv(n, g, types)
		if why != "" {
			return "", why
		}
		return fastName(p, "conv", t.String()), ""
	case "Gemm":
		t, why := fastGemm(n, g, types)
		if why != "" {
			return "", why
		}
		return fastName(p, "gemm", t.String()), ""
	case "MatMul":
		t, why := fastMatMul(n, g, types)
		if why != "" {
			return "", why
		}
		k := fastName(p, "matmul", t.String())
		if _, rest, ok := strings.Cut(exactKernel, "+"); ok {
			k += matmulEpilogue(strings.Split(rest, "+"))
		}
		return k, ""
	}
	switch n.OpType {
	case "ConvChain":
		body := n.Attrs["body"]
		if body == nil || body.G == nil {
			return "", "ConvChain without a body"
		}
		var tiles []string
		nfast := 0
		var whys []string
		bt := chainTypes(n, types)
		for _, b := range body.G.Nodes {
			if fused.BaseOf(b) != "Conv" {
				tiles = append(tiles, "exact")
				continue
			}
			t, why := fastConv(b, body.G, bt)
			if why != "" {
				tiles = append(tiles, "exact")
				whys = append(whys, b.Name+": "+why)
				continue
			}
			tiles = append(tiles, t.String())
			nfast++
		}
		if nfast == 0 {
			return "", "no body convolution has a fast kernel (" + strings.Join(whys, "; ") + ")"
		}
		return fastName(p, "conv", "chain "+strings.Join(tiles, ",")), ""
	case fused.ExpandDepthwise:
		return "", "ExpandDepthwise (a depthwise part) has no fast kernel yet: exact"
	case "Attention":
		return fastAttention(n, g, types, p)
	case "LayerNormalization":
		return fastLayerNorm(n, types, exactKernel), ""
	}
	return "", ""
}

// chainTypes gives a ConvChain's body values the output sizes their
// convolutions compute from the chain input's type (the body carries no
// types): what fastConv's tile choice reads. Values of unknown size are
// left out.
func chainTypes(n *ir.Node, types map[string]ir.Type) map[string]ir.Type {
	body := n.Attrs["body"].G
	out := map[string]ir.Type{}
	if t, ok := types[n.Input(0)]; ok && len(body.Inputs) > 0 {
		out[body.Inputs[0].Name] = t
	}
	for _, b := range body.Nodes {
		in, ok := out[b.Input(0)]
		if !ok || !in.RankKnown || len(in.Shape) != 4 || !in.Shape[2].Known() || !in.Shape[3].Known() || len(b.Outputs) == 0 {
			continue
		}
		t := ir.Type{DType: in.DType, RankKnown: true, Shape: slices.Clone(in.Shape)}
		if fused.BaseOf(b) == "Conv" {
			w := body.Initializers[b.Input(1)]
			if w == nil || len(w.Shape) != 4 {
				continue
			}
			p := ints(b, "pads", 0, 0, 0, 0)
			st, d := ints(b, "strides", 1, 1), ints(b, "dilations", 1, 1)
			if len(p) != 4 || len(st) != 2 || len(d) != 2 || st[0] < 1 || st[1] < 1 {
				continue
			}
			for i := range 2 {
				v := (int(in.Shape[2+i].Value)+p[i]+p[i+2]-((w.Shape[2+i]-1)*d[i]+1))/st[i] + 1
				t.Shape[2+i] = ir.Dim{Value: int64(v)}
			}
			t.Shape[1] = ir.Dim{Value: int64(w.Shape[0])}
		}
		out[b.Outputs[0]] = t
	}
	return out
}

// fastConv admits a Conv layer (plain or Fused, its activation one the
// exact conv epilogue runs) of one group with constant 4-D weights, and
// picks its tile.
func fastConv(n *ir.Node, g *ir.Graph, types map[string]ir.Type) (fast.Tile, string) {
	if n.OpType == fused.OpFused {
		h, _ := fused.LayerOf(n)
		if h.Check(len(n.Inputs)) != nil || h.Adds > 1 || h.BaseInputs < 2 || h.BaseInputs > 3 {
			return fast.Tile{}, "fused Conv layout"
		}
		switch h.Activation {
		case "", "Relu", "Clip":
		default:
			return fast.Tile{}, fmt.Sprintf("fused activation %s has no fast epilogue", h.Activation)
		}
	}
	if why := convOK(n); why != "" {
		return fast.Tile{}, why
	}
	if gr := n.Int("group", 1); gr != 1 {
		return fast.Tile{}, fmt.Sprintf("Conv in %d groups (the tensor-core kernels take one)", gr)
	}
	w := g.Initializers[n.Input(1)]
	if w == nil || w.DType != tensor.Float32 || len(w.Shape) != 4 {
		return fast.Tile{}, "Conv whose weights are not a constant 4-D float32 tensor"
	}
	P := 0
	if t, ok := types[n.Outputs[0]]; ok && t.RankKnown && len(t.Shape) == 4 && t.Shape[2].Known() && t.Shape[3].Known() {
		P = int(t.Shape[2].Value * t.Shape[3].Value)
	}
	return fast.ChooseTile(w.Shape[0], P), ""
}

// fastGemm admits a Gemm (plain or fused with Relu or Clip) of a constant
// 2-D B and a C that is absent or one row of N (a bias).
func fastGemm(n *ir.Node, g *ir.Graph, types map[string]ir.Type) (fast.Tile, string) {
	c := n.Input(2)
	if n.OpType == fused.OpFused {
		h, _ := fused.LayerOf(n)
		if h.Check(len(n.Inputs)) != nil || h.Adds != 0 || h.BaseInputs != 3 {
			return fast.Tile{}, "fused Gemm layout"
		}
		switch h.Activation {
		case "", "Relu", "Clip":
		default:
			return fast.Tile{}, fmt.Sprintf("fused activation %s has no fast epilogue", h.Activation)
		}
	}
	if why := gemmOK(n); why != "" {
		return fast.Tile{}, why
	}
	b := g.Initializers[n.Input(1)]
	if b == nil || b.DType != tensor.Float32 || len(b.Shape) != 2 {
		return fast.Tile{}, "Gemm whose B is not a constant 2-D float32 matrix"
	}
	N := b.Shape[1]
	if n.Int("transB", 0) != 0 {
		N = b.Shape[0]
	}
	if c != "" {
		ct := g.Initializers[c]
		if ct == nil || ct.Len() != N || len(ct.Shape) == 2 && ct.Shape[0] != 1 {
			return fast.Tile{}, "Gemm whose C is not a constant row of N (a bias)"
		}
	}
	return fast.ChooseTile(N, 1), ""
}

// fastMatMul admits a MatMul (plain or fused, its epilogue the exact
// passes) of a float32 A by a constant 2-D B.
func fastMatMul(n *ir.Node, g *ir.Graph, types map[string]ir.Type) (fast.Tile, string) {
	b := g.Initializers[n.Input(1)]
	if b == nil || b.DType != tensor.Float32 || len(b.Shape) != 2 {
		return fast.Tile{}, "MatMul whose B is not a constant 2-D float32 matrix (activation products stay exact)"
	}
	if why := matmulOK(n, types); why != "" {
		return fast.Tile{}, why
	}
	// Its rows are the batch times the other dimensions of A (a
	// sequence): the middle column block.
	return fast.ChooseTile(b.Shape[1], 256), ""
}

// A fast MatMul's epilogue: its fused layer's first Adds, when they are
// a bias over the last axis (the exact pass vx_channel_affine by ones:
// y*1 + b, which is y + b) and then an operand of the output's shape
// (vx_add), run in the kernel's FP32 epilogue (acc, NaN canonical,
// + bias, + residual: the same roundings in the same order, one launch
// and one pass over the output instead of three), named
// "+epilogue(bias)", "+epilogue(bias,res)" or "+epilogue(res)"; the other
// passes follow as exact passes, named by their kernels. When the one pass
// left is the exact GELU (vx_unary(Gelu none): every Add ran in the
// epilogue), it runs there too, last, as the same function vx_gelu_erf
// (fast_gelu.cu's GELU tiles): ",gelu" ends the list ("+epilogue(gelu)"
// for a MatMul with no Adds).
const (
	epiPrefix = "+epilogue("
	epiBias   = "bias"
	epiRes    = "res"
	epiGelu   = "gelu"
	geluPass  = kernels.Unary + "(Gelu none)"
)

// matmulEpilogue names a fast MatMul's passes after the product from the
// exact placement's passes: the epilogue's, then the rest.
func matmulEpilogue(passes []string) string {
	var epi []string
	i := 0
	if i < len(passes) && passes[i] == kernels.Affine {
		epi = append(epi, epiBias)
		i++
	}
	if i < len(passes) && passes[i] == kernels.Add {
		epi = append(epi, epiRes)
		i++
	}
	if len(passes) == i+1 && passes[i] == geluPass {
		epi = append(epi, epiGelu)
		i++
	}
	k := ""
	if len(epi) > 0 {
		k = epiPrefix + strings.Join(epi, ",") + ")"
	}
	for _, p := range passes[i:] {
		k += "+" + p
	}
	return k
}

// parseEpilogue reads the "+epilogue(...)" that follows a fast MatMul's
// tiles: its Adds (nil: none, the passes all exact) and whether GELU ends
// it; with GELU nothing may follow.
func parseEpilogue(after string) (adds []string, gelu bool, err error) {
	list, ok := strings.CutPrefix(after, epiPrefix[1:])
	if !ok {
		return nil, false, nil
	}
	list, rest, ok := strings.Cut(list, ")")
	epi := strings.Split(list, ",")
	if n := len(epi); ok && n > 0 && epi[n-1] == epiGelu {
		if rest != "" {
			return nil, false, fmt.Errorf("fast MatMul epilogue %q: passes after its GELU", after)
		}
		epi, gelu = epi[:n-1], true
	}
	if !ok || !(gelu && len(epi) == 0) && !slices.Equal(epi, []string{epiBias}) && !slices.Equal(epi, []string{epiBias, epiRes}) && !slices.Equal(epi, []string{epiRes}) {
		return nil, false, fmt.Errorf("fast MatMul epilogue %q: want epilogue(bias), epilogue(bias,res) or epilogue(res), each optionally with ,gelu last, or epilogue(gelu)", after)
	}
	if len(epi) == 0 {
		epi = nil
	}
	return epi, gelu, nil
}

// fastSpec is a layer's fast kernel as its placement names it.
type fastSpec struct {
	prec  plan.Precision
	op    string // conv, gemm, matmul
	tile  fast.Tile
	scale float32 // int8: the input's activation scale (fast_int8.go)
	// epi: a fast MatMul's Adds run in its epilogue (epiBias, epiRes);
	// gelu: its GELU too, after them (every Add of the layer is in epi).
	epi  []string
	gelu bool
}

// parseFast reads a placement's fast kernel name for node n: its spec and,
// for a ConvChain, one per body node (nil: that body node stays exact).
func parseFast(kernel string, n *ir.Node) (fastSpec, map[*ir.Node]fastSpec, error) {
	rest, _ := strings.CutPrefix(kernel, "fast.")
	prec, rest, ok1 := strings.Cut(rest, ".")
	op, rest, ok2 := strings.Cut(rest, "(")
	tiles, after, ok3 := strings.Cut(rest, ")")
	s := fastSpec{prec: plan.Precision(prec), op: op}
	if !ok1 || !ok2 || !ok3 || !fastPrec(s.prec, op) {
		return s, nil, fmt.Errorf("fast kernel %q: want fast.<fp16|bf16>.<op>(<tiles>) or fast.int8.<conv|gemm>(<tiles>)", kernel)
	}
	if op == "attention" {
		if n.OpType != "Attention" {
			return s, nil, fmt.Errorf("fast kernel %q for a %s layer", kernel, n.OpType)
		}
		t, err := parseAttnTile(tiles)
		s.tile = t
		return s, nil, err
	}
	want := map[string]string{"conv": "Conv", "gemm": "Gemm", "matmul": "MatMul"}[op]
	if n.OpType == "ConvChain" && op == "conv" {
		list, ok := strings.CutPrefix(tiles, "chain ")
		body := n.Attrs["body"]
		if !ok || body == nil || body.G == nil {
			return s, nil, fmt.Errorf("fast kernel %q for a ConvChain: want conv(chain TILE,...)", kernel)
		}
		parts := strings.Split(list, ",")
		if len(parts) != len(body.G.Nodes) {
			return s, nil, fmt.Errorf("fast kernel %q names %d body layers, the chain has %d", kernel, len(parts), len(body.G.Nodes))
		}
		m := map[*ir.Node]fastSpec{}
		for i, b := range body.G.Nodes {
			if parts[i] == "exact" {
				continue
			}
			if fused.BaseOf(b) != "Conv" {
				return s, nil, fmt.Errorf("fast kernel %q: body layer %s (%s) is not a Conv", kernel, b.Name, b.OpType)
			}
			t, sc, err := parseFastTile(s.prec, parts[i])
			if err != nil {
				return s, nil, err
			}
			m[b] = fastSpec{prec: s.prec, op: op, tile: t, scale: sc}
		}
		return s, m, nil
	}
	if want == "" || fused.BaseOf(n) != want {
		return s, nil, fmt.Errorf("fast kernel %q for a %s layer", kernel, n.OpType)
	}
	t, sc, err := parseFastTile(s.prec, tiles)
	if err != nil {
		return s, nil, err
	}
	s.tile, s.scale = t, sc
	if op == "matmul" {
		if after, ok := strings.CutPrefix(after, "+"); ok {
			if s.epi, s.gelu, err = parseEpilogue(after); err != nil {
				return s, nil, err
			}
		}
		h, _ := fused.LayerOf(n)
		if len(s.epi) > 0 && (n.OpType != fused.OpFused || h.Adds < len(s.epi)) {
			return s, nil, fmt.Errorf("fast kernel %q: an epilogue of %d Adds for a layer of fewer", kernel, len(s.epi))
		}
		if s.gelu && (n.OpType != fused.OpFused || h.Adds != len(s.epi) || h.Activation != "Gelu" || h.ActInputs != 0 ||
			n.String(fused.ActPrefix+"approximate", "none") != "none") {
			return s, nil, fmt.Errorf("fast kernel %q: a GELU epilogue for a layer that is not its Adds then an exact GELU", kernel)
		}
	}
	return s, nil, nil
}

// FastSection is Section for a fast plan: the placement of PlaceFast, mode
// "fast" when some layer is fast (else "exact"), with img from FastKernels.
func FastSection(g *ir.Graph, types map[string]ir.Type, img *cuda.Image, env Env, o FastOptions) (plan.GPU, []FastNote) {
	sec := Section(g, types, img, env)
	var notes []FastNote
	sec.Layers, notes = PlaceFast(g, types, o)
	for _, l := range sec.Layers {
		if strings.HasPrefix(l.Kernel, "fast.") {
			sec.Mode = "fast"
			break
		}
	}
	return sec, notes
}

// FastKernels compiles the exact kernels, fast.cu, fast_int8.cu and
// fast_attn.cu, one translation unit, with n for arch: the image of a fast
// plan.
func FastKernels(n *cuda.NVRTC, arch string) (*cuda.Image, error) {
	return cuda.Build(n, kernels.FastAttnImageSource(), kernels.FastAttnImageName, arch, kernels.Options)
}

// BuildFast is Build for fast mode: it compiles the exact and fast kernels
// into one image and turns the encoded CPU plan of g into a GPU plan whose
// placement is PlaceFast's (mode "fast"), returning the notes of the
// layers that stay exact.
func BuildFast(cpuPlan []byte, g *ir.Graph, types map[string]ir.Type, n *cuda.NVRTC, arch string, env Env, o FastOptions) ([]byte, *plan.GPU, []FastNote, error) {
	if err := o.check(); err != nil {
		return nil, nil, nil, err
	}
	img, err := FastKernels(n, arch)
	if err != nil {
		return nil, nil, nil, err
	}
	sec, notes := FastSection(g, types, img, env, o)
	b, err := plan.AddGPU(cpuPlan, sec, img.Encode())
	if err != nil {
		return nil, nil, notes, err
	}
	return b, &sec, notes, nil
}
