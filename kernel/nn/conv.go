package nn

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// convSetup validates X [N, C, spatial...] and W [M, C/group, kernel...]
// and returns the geometry. For ConvTranspose W is [C, M/group, kernel...].
type convSetup struct {
	N, C, M, G, Cg, Mg int
	g                  *geom
	tactic             string  // kernel.TacticAttr, "" for the default
	tabs               [][]int // g.taps(false), when cached
	// direct holds TacticDirect's packed weights, once packed.
	direct atomic.Pointer[directPack]
	row    *convSetup // a 1-D convolution as a 2-D one of height 1 (conv1d.go)
	// taps holds groupTaps' layout, once built (conv_grouped_taps.go).
	taps atomic.Pointer[groupTapsGeom]
	// dwk holds dwSmall's layout, once built (dw_small.go).
	dwk atomic.Pointer[dwkTab]
}

func setupConv(n *ir.Node, x, w []int) (*convSetup, error) {
	op := n.OpType
	if len(x) < 3 || len(w) != len(x) {
		return nil, fmt.Errorf("nn: %s: X %v and W %v must have the same rank >= 3", op, x, w)
	}
	s := &convSetup{N: x[0], C: x[1], M: w[0], G: int(n.Int("group", 1))}
	if s.G < 1 || s.C%s.G != 0 || s.M%s.G != 0 {
		return nil, fmt.Errorf("nn: %s: group %d must divide input channels %d and output channels %d", op, s.G, s.C, s.M)
	}
	s.Cg, s.Mg = s.C/s.G, s.M/s.G
	if w[1] != s.Cg {
		return nil, fmt.Errorf("nn: %s: W %v has %d input channels per group, want %d (X %v, group %d)", op, w, w[1], s.Cg, x, s.G)
	}
	k := append([]int{}, w[2:]...)
	if ks := n.Ints("kernel_shape", nil); ks != nil {
		if len(ks) != len(k) || !equalInts(intsOf(ks), k) {
			return nil, fmt.Errorf("nn: %s: kernel_shape %v does not match W %v", op, ks, w)
		}
	}
	g, err := convGeom(n, x[2:], k, false)
	if err != nil {
		return nil, err
	}
	s.g = g
	s.tactic = kernel.Tactic(n)
	switch s.tactic {
	case "", TacticIm2col:
	case TacticGemm1x1:
		if !s.pointwise() {
			return nil, fmt.Errorf("nn: %s: tactic %q needs a 1x1, stride-1, unpadded convolution", op, s.tactic)
		}
	case TacticDirect:
		if !directGroups(s) || len(s.g.in) > 2 {
			return nil, fmt.Errorf("nn: %s: tactic %q needs one group (or groups of a multiple of 16 output channels) and one or two spatial dimensions", op, s.tactic)
		}
	case TacticDepthwise:
		if s.Cg != 1 || s.Mg != 1 {
			return nil, fmt.Errorf("nn: %s: tactic %q needs group == channels", op, s.tactic)
		}
	default:
		return nil, fmt.Errorf("nn: %s: unknown tactic %q", op, s.tactic)
	}
	s.row = rowView(s)
	return s, nil
}

// Conv tactics. All give identical bits (each output is the same FMA chain
// over the same k order); they differ in memory traffic only.
const (
	// TacticIm2col unrolls the input patches into a matrix and runs GEMM.
	TacticIm2col = "conv.im2col-gemm"
	// TacticGemm1x1 runs a 1x1 convolution as GEMM on the input itself.
	TacticGemm1x1 = "conv.1x1-gemm"
	// TacticDepthwise is the direct per-channel kernel (vectorised 3x3).
	TacticDepthwise = "conv.depthwise"
)

// convTactics lists a Conv's candidate tactics, preferred first.
func convTactics(n *ir.Node, in []ir.Type) []string {
	if n.OpType != "Conv" || len(in) < 2 || in[0].DType != tensor.Float32 {
		return nil
	}
	x, ok1 := in[0].Static()
	w, ok2 := in[1].Static()
	if !ok1 || !ok2 {
		return nil
	}
	s, err := setupConv(&ir.Node{OpType: n.OpType, Attrs: withoutTactic(n.Attrs)}, x, w)
	if err != nil {
		return nil
	}
	switch {
	case s.Cg == 1 && s.Mg == 1:
		return []string{TacticDepthwise, TacticIm2col}
	case s.G == 1 && len(s.g.in) == 2 && s.pointwise() && prod(s.g.out) < 64 && s.C*s.M >= 1<<20 && s.C > s.M:
		// ResNet-50's last stage 2048->512 at 7x7: the weights (4 MiB)
		// stream through conv.direct's panels once per tile, the GEMM's k
		// blocks keep them in cache. Thread CPU time, one worker, AVX2
		// host (BenchmarkConv1x1Deep, GFLOP/s im2col / 1x1 GEMM / direct):
		// 2048->512 66-68 / 58-61 / 47-55; in resnet50's plan (vouch bench
		// --layers) 2.2 vs 2.8 ms. 512->2048 was 61-75 / 56-60 / 56-62
		// alone but 2.4 vs 2.2 ms in the plan, so it stays direct, as does
		// 832->128 (39-56 / 50-61 / 51-65).
		return []string{TacticIm2col, TacticGemm1x1, TacticDirect}
	case s.G == 1 && len(s.g.in) == 2 && s.pointwise() && directPointwise(prod(s.g.out), s.C, s.M):
		return []string{TacticDirect, TacticGemm1x1, TacticIm2col}
	case s.G == 1 && len(s.g.in) == 2 && s.pointwise():
		return []string{TacticGemm1x1, TacticIm2col, TacticDirect}
	case s.pointwise():
		return []string{TacticGemm1x1, TacticIm2col}
	case s.G == 1 && len(s.g.in) == 2 && s.strided1x1() && (prod(s.g.out) >= 64 || s.C*s.M >= 1<<20):
		// ResNet's stride-2 1x1 downsampling over 28x28 and 14x14 output
		// planes: im2col (a quarter-size copy) and the GEMM took 0.6-0.8x
		// conv.direct's time on an AVX2 host (BenchmarkConv1x1S2, one
		// worker: 256->512 at 28x28 3.0-4.2 vs 4.9-6.1 ms, 512->1024 at
		// 14x14 3.0-3.2 vs 4.7-6.4 ms); at 7x7, wall time, they were even,
		// but in thread CPU time (BenchmarkConv1x1Deep) 1024->2048 took
		// im2col 66-70 GFLOP/s vs direct 48-51: the weights (8 MiB) decide.
		return []string{TacticIm2col, TacticDirect}
	case s.G == 1 && len(s.g.in) == 2 && im2colFirst(s, prod(s.g.out)):
		return []string{TacticIm2col, TacticDirect}
	case directGroups(s) && len(s.g.in) <= 2:
		return []string{TacticDirect, TacticIm2col}
	}
	return []string{TacticIm2col}
}

// im2colFirst reports whether a dense 2-D convolution with a kernel of at
// least 3x3 over P output pixels a plane is better run as im2col and the
// packed GEMM than as TacticDirect. Thread CPU time, one worker, AVX2 host,
// GFLOP/s im2col vs direct:
//   - stride 1, C*kh*kw of 4096 or more (512 or more channels at 3x3)
//     over 128 pixels or more: the GEMM's k blocks keep the weights in
//     cache where conv.direct streams all of them per 16-channel panel
//     (BenchmarkConvFCNHead: 2048->512 at 20x20 63.7 vs 37.4, 512->512
//     dilation 4 at 20x20 57.8 vs 30.4, 512->512 at 28x28 63.6 vs 46.0,
//     at 14x14 65.4 vs 44.9, but at 7x7 52.3 vs 58.7; with 256 channels
//     or fewer the two are within noise or direct wins: 256->256 at 14x14
//     74-78 vs 64-87, 128->128 at 28x28 52-76 vs 62-89);
//   - C*kh*kw of 32 or less, any stride (3-channel 3x3 stems): conv.direct
//     spends its time in the tile stores after 27 steps (BenchmarkConvStem3:
//     VGG's 3->64 at 224x224 57 vs 36, 3->32 stride 2 47 vs 34, 3->16
//     stride 2 36-38 vs 33-35; ResNet's 7x7 stem, C*kh*kw = 147, 72 vs 75
//     keeps direct).
func im2colFirst(s *convSetup, P int) bool {
	if len(s.g.k) != 2 || s.g.k[0] < 3 || s.g.k[1] < 3 {
		return false
	}
	K := s.C * s.g.k[0] * s.g.k[1]
	if K <= 32 {
		return true
	}
	return s.g.stride[0] == 1 && s.g.stride[1] == 1 && K >= 4096 && P >= 128
}

// directPointwise reports whether a 1x1 convolution of P output pixels a
// plane, K input and M output channels is better run as TacticDirect
// (output channels in the vector lanes, all of k in registers) than as
// the GEMM, whose 16-lane column panels run over the pixels and whose k
// blocks park the accumulators in memory:
//   - from 17 to 63 pixels with a fifth or more of the GEMM panels' lanes
//     past the plane (7x7, 6x6, 5x5: the last stages of ResNet, DenseNet,
//     GoogLeNet, RegNet and MobileNet): conv.direct took 0.7-0.8x the
//     GEMM's time (regnet_x's 400x400 at 7x7 89 vs 110 us, googlenet's
//     832->128 53 vs 76);
//   - from 64 to 255 pixels in a last partial panel (13x13, 14x14) with
//     K of at least 256 (the tile's transposed store is then a small
//     part) and M in whole 32-channel tile pairs or at least 64: 0.86-0.95x
//     (densenet121's block 3, googlenet's inception 4, mobilenet_v2's 14x14
//     projections, squeezenet's 13x13 squeezes); with K below 256 or M of
//     24 or 48, 1.1-1.3x, and over whole panels (8x8, 12x12) or larger
//     planes the GEMM is as fast or faster.
//
// Measured per layer, thread CPU time, one worker. A plane of at most 16
// pixels (squeeze-excitation's 1x1 planes) keeps the GEMM.
func directPointwise(P, K, M int) bool {
	pan := (P + 15) / 16 * 16
	switch {
	case P > 16 && P < 64:
		return 5*(pan-P) >= pan
	case P >= 64 && P < 256 && P%16 != 0:
		return K >= 256 && (M%32 == 0 || M >= 64)
	}
	return false
}

func withoutTactic(a map[string]*ir.Attr) map[string]*ir.Attr {
	out := make(map[string]*ir.Attr, len(a))
	for k, v := range a {
		if k != kernel.TacticAttr {
			out[k] = v
		}
	}
	return out
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (s *convSetup) outShape() []int { return append([]int{s.N, s.M}, s.g.out...) }

// strided1x1 reports whether the convolution is 1x1, unpadded and
// with a stride above 1 in some dimension (a 1x1 kernel has no dilation).
func (s *convSetup) strided1x1() bool {
	st := false
	for i := range s.g.k {
		if s.g.k[i] != 1 || s.g.padB[i] != 0 || s.g.padE[i] != 0 {
			return false
		}
		st = st || s.g.stride[i] > 1
	}
	return st
}

// pointwise reports whether the convolution is 1x1 with unit stride and
// no padding, so the input itself is the im2col matrix.
func (s *convSetup) pointwise() bool {
	for i := range s.g.k {
		if s.g.k[i] != 1 || s.g.stride[i] != 1 || s.g.padB[i] != 0 || s.g.padE[i] != 0 {
			return false
		}
	}
	return true
}

func runConv(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 2, "Conv"); err != nil {
		return nil, err
	}
	x, w, b := in[0], in[1], kernel.Input(in, 2)
	if err := sameDT("Conv", x, w, b); err != nil {
		return nil, err
	}
	setup := func() (*convSetup, error) { return setupConv(n, x.Shape, w.Shape) }
	var s *convSetup
	var err error
	if kernel.Tactic(n) == TacticDirect {
		// The setup keeps the packed weights: cache it with the node.
		s, err = cached(c, n, in, setup)
	} else {
		s, err = setup()
	}
	if err != nil {
		return nil, err
	}
	if b != nil && (len(b.Shape) != 1 || b.Shape[0] != s.M) {
		return nil, fmt.Errorf("nn: Conv: bias shape %v, want [%d]", b.Shape, s.M)
	}
	out := s.outShape()
	xf, xd, err := floatIn(x, "Conv X")
	if err != nil {
		return nil, err
	}
	wf, wd, _ := floatIn(w, "Conv W")
	if xd != nil {
		y := convGEMM(machineOf(c), s, xd, wd, false, dgemm)
		if b != nil {
			addBias(y, b.Data.([]float64), s.M, prod(s.g.out))
		}
		return []*tensor.Tensor{tensor.From(y, out...)}, nil
	}
	var bf []float32
	if b != nil {
		// The bias is added after the chain: y = acc + B[m].
		bf, _, _ = floatIn(b, "Conv B")
	}
	y := make([]float32, prod(out))
	convF32(machineOf(c), s, xf, wf, bf, y, epi{})
	return []*tensor.Tensor{f32As(x.DType, out, y)}, nil
}

func addBias[F kernel.Float](y, b []F, M, P int) {
	if P == 0 {
		return // an empty output: nothing to add to
	}
	for i := 0; i < len(y)/P; i++ {
		bv := b[i%M]
		row := y[i*P : (i+1)*P]
		for j := range row {
			row[j] += bv
		}
	}
}

// convGEMM runs a convolution (or, with transpose, a transposed
// convolution) as im2col + GEMM per image and group: each output is one
// chain over (input channel, kernel taps) ascending, padding contributing
// FMA(0, w, acc). For ConvTranspose w must already be laid out as
// [M, C/group, kernel...].
func convGEMM[F any](pool machine, s *convSetup, x, w []F, transpose bool, gemm func(pool machine, m, n, k int, a []F, ars, acs int, b []F, brs, bcs int, c []F, ldc int)) []F {
	g := s.g
	P, inSz, kn := prod(g.out), prod(g.in), prod(g.k)
	K := s.Cg * kn
	y := make([]F, s.N*s.M*P)
	direct := !transpose && s.pointwise()
	var col []F
	var tabs [][]int
	if !direct {
		col = make([]F, K*P)
		tabs = g.taps(transpose)
	}
	for ni := 0; ni < s.N; ni++ {
		for gi := 0; gi < s.G; gi++ {
			xg := x[(ni*s.C+gi*s.Cg)*inSz : (ni*s.C+(gi+1)*s.Cg)*inSz]
			b := xg
			if !direct {
				im2col(xg, s.Cg, g, tabs, col)
				b = col
			}
			gemm(pool, s.Mg, P, K, w[gi*s.Mg*K:], K, 1, b, P, 1, y[(ni*s.M+gi*s.Mg)*P:], P)
		}
	}
	return y
}

// depthwiseInto is the direct float32 kernel for group == C == M: per output
// one chain over the kernel taps in row-major order, the same chain that
// im2col + GEMM computes (padding taps included as FMA(0, w, acc)).
// It writes into y and is the portable twin of depthwise3x3.
func depthwiseInto(pool machine, s *convSetup, x, w, y []float32) {
	g := s.g
	P, inSz, kn := prod(g.out), prod(g.in), prod(g.k)
	tabs := g.taps(false)
	nd := len(g.in)
	inStr := tensor.Strides(g.in)
	pool.For(s.N*s.C, s.N*s.C*P*kn, func(lo, hi int) {
		oidx := make([]int, nd)
		kidx := make([]int, nd)
		for nc := lo; nc < hi; nc++ {
			c := nc % s.C
			xc := x[nc*inSz : (nc+1)*inSz]
			wc := w[c*kn : (c+1)*kn]
			yc := y[nc*P : (nc+1)*P]
			for p := range yc {
				r := p
				for d := nd - 1; d >= 0; d-- {
					oidx[d] = r % g.out[d]
					r /= g.out[d]
				}
				var acc float32
				for kp := 0; kp < kn; kp++ {
					r := kp
					off := 0
					for d := nd - 1; d >= 0; d-- {
						kidx[d] = r % g.k[d]
						r /= g.k[d]
						i := tabs[d][kidx[d]*g.out[d]+oidx[d]]
						if i < 0 || off < 0 {
							off = -1
						} else {
							off += i * inStr[d]
						}
					}
					var xv float32
					if off >= 0 {
						xv = xc[off]
					}
					wv := wc[kp]
					sum := float64(xv)*float64(wv) + float64(acc)
					if fmaFast(math.Float64bits(sum)) || sum == 0 {
						acc = float32(sum)
					} else {
						acc = vmath.FMA32(xv, wv, acc)
					}
				}
				yc[p] = canonNaN(acc)
			}
		}
	})
}

func inferConv(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	wi := 1
	dt := in[0].Type.DType
	switch n.OpType {
	case "QLinearConv":
		wi = 3
		if len(in) > 7 && in[7].Present {
			dt = in[7].Type.DType
		}
	case "ConvInteger":
		dt = tensor.Int32
	}
	if err := needT(in, wi+1, n.OpType); err != nil {
		return nil, err
	}
	x, ok1 := dimsOf(in[0].Type)
	w, ok2 := dimsOf(in[wi].Type)
	if !ok1 {
		return []ir.Type{kernel.UnknownRank(dt)}, nil
	}
	if len(x) < 3 {
		return nil, fmt.Errorf("nn: %s: X must have rank >= 3, got %d", n.OpType, len(x))
	}
	out := append([]ir.Dim{x[0]}, unknownDims(len(x)-1)...)
	if !ok2 {
		return []ir.Type{{DType: dt, Shape: out, RankKnown: true}}, nil
	}
	if len(w) != len(x) {
		return nil, fmt.Errorf("nn: %s: X and W ranks differ: %d vs %d", n.OpType, len(x), len(w))
	}
	k := make([]int, len(x)-2)
	known := true
	for i := range k {
		if !w[i+2].Known() {
			known = false
			break
		}
		k[i] = int(w[i+2].Value)
	}
	if ks := n.Ints("kernel_shape", nil); ks != nil && len(ks) == len(k) {
		k, known = intsOf(ks), true
	}
	if n.OpType == "ConvTranspose" {
		return inferConvTranspose(n, x, w, k, known, dt)
	}
	out[1] = w[0]
	if known {
		sp, err := inferSpatial(n, x[2:], k, false)
		if err != nil {
			return nil, err
		}
		copy(out[2:], sp)
	}
	return []ir.Type{{DType: dt, Shape: out, RankKnown: true}}, nil
}
