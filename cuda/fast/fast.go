// Package fast runs vouch's fast-mode tensor-core kernels (cuda/kernels'
// fast.cu): 2-D convolution as an implicit GEMM and Gemm/MatMul by a
// constant matrix, with FP16 or BF16 operands and FP32 accumulation
// (mma.sync m16n8k16), NCHW float32 activations in and out.
//
// Fast mode gives up the CPU's bits, not determinism: every output is one
// fixed chain of k16 tensor-core steps over the layer's padded reduction,
// whatever the batch, tile, grid or stream (fast.cu's header says how), so
// a row alone and the same row in a batch have the same bits, and so do
// two runs on one GPU architecture. The tile is chosen per layer from its
// shape (ChooseTile), never from the batch. Weights are converted once,
// with round to nearest even (PackWeights); the input is converted as it
// is staged.
package fast

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/cuda/mma"
	"github.com/vouchml/vouch/plan"
)

// BF16 is the bfloat16 precision (plan.Precision's name for it).
const BF16 = plan.Precision("bf16")

// BK is the k block of the kernels: a layer's reduction is padded to a
// multiple of it.
const BK = 32

// MPad is what the packed weights' rows are padded to (the largest BM).
const MPad = 128

// Kernel precision of a plan precision (fast.cu's names), ok false for a
// precision the tensor-core kernels do not take.
func kernelPrec(p plan.Precision) (string, bool) {
	switch p {
	case plan.FP16:
		return kernels.FastF16, true
	case BF16:
		return kernels.FastBF16, true
	}
	return "", false
}

// Supported reports whether the fast kernels take precision p.
func Supported(p plan.Precision) bool { _, ok := kernelPrec(p); return ok }

// Tile is a kernel's block of output channels (BM) by columns (BN).
type Tile struct{ BM, BN int }

func (t Tile) String() string { return fmt.Sprintf("%dx%d", t.BM, t.BN) }

// ParseTile parses Tile.String's form, refusing a tile fast.cu lacks.
func ParseTile(s string) (Tile, error) {
	a, b, ok := strings.Cut(s, "x")
	m, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return Tile{}, fmt.Errorf("fast: tile %q, want BMxBN", s)
	}
	for _, t := range kernels.FastTiles {
		if t[0] == m && t[1] == n {
			return Tile{m, n}, nil
		}
	}
	return Tile{}, fmt.Errorf("fast: no %dx%d tile (fast.cu has %v)", m, n, kernels.FastTiles)
}

// ChooseTile picks a layer's tile from its shape alone: M output channels
// (or features) and P output pixels per image (1 for a Gemm; 0 when
// unknown at build time). It never sees the batch: a plan's tile is the
// same for every batch it runs, and the bits do not depend on it anyway
// (fast.cu's chains are the tile's). Measured on the H200 (every tile on
// ResNet-50's convolutions at batch 8-256, docs/gpu/fast-2026-12-02-r2.log)
// the 64-column tiles beat 128 columns on every shape (1.1-1.4x), 64
// channels where M is 64; a Gemm's rows are the batch, so it takes the
// smallest block. 64x64 for every image of 784 pixels or more was faster
// per layer at batch 1 and 32 (docs/gpu/fast-2026-12-03-s8b.log) but made
// ResNet-50 at batch 256 slower (32.31 ms against 31.06 ms), so it is not
// the rule. The INT8 kernels take the same tiles.
func ChooseTile(M, P int) Tile {
	if P == 1 {
		return Tile{64, 32}
	}
	if M <= 64 {
		return Tile{64, 64}
	}
	return Tile{128, 64}
}

// PackedLen is the number of 16-bit values of an M x K matrix packed for
// the kernels: rows padded to MPad, their length to BK.
func PackedLen(M, K int) (Mp, Kp int) {
	return (M + MPad - 1) / MPad * MPad, (K + BK - 1) / BK * BK
}

// PackWeights converts an M x K float32 matrix (row m at w[m*rs:], element
// k of a row at stride cs) to p's 16-bit values, rounding to nearest even,
// into [Mp][Kp] with zeros in the padding.
func PackWeights(w []float32, M, K int, rs, cs int, p plan.Precision) ([]uint16, error) {
	conv := HalfBits
	switch p {
	case plan.FP16:
	case BF16:
		conv = BF16Bits
	default:
		return nil, fmt.Errorf("fast: weights in precision %q", p)
	}
	if M < 1 || K < 1 || int64(M)*int64(K) > 1<<31 {
		return nil, fmt.Errorf("fast: weights of %d x %d", M, K)
	}
	if last := (M-1)*rs + (K-1)*cs; last >= len(w) || last < 0 {
		return nil, fmt.Errorf("fast: weights of %d floats for %d x %d at strides %d, %d", len(w), M, K, rs, cs)
	}
	Mp, Kp := PackedLen(M, K)
	out := make([]uint16, Mp*Kp)
	for m := range M {
		for k := range K {
			out[m*Kp+k] = conv(w[m*rs+k*cs])
		}
	}
	return out, nil
}

// HalfBits is f as an IEEE binary16, rounded to nearest even (overflow to
// infinity, subnormals kept, NaN quiet with its sign): cuda/mma's
// conversion, which the emulation of the fast kernels uses too.
func HalfBits(f float32) uint16 { return mma.FromFloat32(mma.FP16, f) }

// HalfFloat is the float32 value of binary16 bits h (exact).
func HalfFloat(h uint16) float32 { return float32(mma.Value(mma.FP16, h)) }

// BF16Bits is f as a bfloat16 (the top half of a float32), rounded to
// nearest even; NaN stays NaN (quiet).
func BF16Bits(f float32) uint16 { return mma.FromFloat32(mma.BF16, f) }

// BF16Float is the float32 value of bfloat16 bits.
func BF16Float(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Round returns f rounded to precision p's 16-bit value and back (what a
// kernel multiplies).
func Round(f float32, p plan.Precision) float32 {
	if p == BF16 {
		return BF16Float(BF16Bits(f))
	}
	return HalfFloat(HalfBits(f))
}

// Mode is how a kernel of tile t reads g's input at x (fast.cu's MODE).
// Every mode stages the same values: the choice never changes the bits.
func Mode(g exact.ConvGeom, t Tile, x uint64) int {
	if g.KH == 1 && g.KW == 1 && g.PH == 0 && g.PW == 0 {
		if g.SH == 1 && g.SW == 1 && (g.H*g.W)%4 == 0 && x%16 == 0 && t.BN >= 64 {
			return kernels.FastWide
		}
		return kernels.Fast1x1
	}
	return kernels.FastGather
}

// gemmMode reads a Gemm's rows as k-contiguous float4s when it can (K a
// multiple of 4, x 16-byte aligned), else as 1x1 images. The two modes
// stage the same values: the choice never changes the bits.
func gemmMode(k int, x uint64) int {
	if k%4 == 0 && x%16 == 0 {
		return kernels.FastRows
	}
	return kernels.Fast1x1
}

// Engine launches the fast kernels of a loaded module.
type Engine struct {
	fn map[string]*cuda.Function
	ex *exact.Engine // its tap tables
}

// ErrArgs wraps a launch's refusal of its operands.
var ErrArgs = errors.New("fast: bad operands")

// Load finds fast.cu's entry points in ex's module (a fast plan's image:
// the exact kernels and fast.cu's), whose tap tables mode 0 shares.
func Load(ex *exact.Engine) (*Engine, error) {
	e := &Engine{fn: map[string]*cuda.Function{}, ex: ex}
	for _, n := range kernels.FastKernels {
		f, err := ex.Mod.Function(n)
		if err != nil {
			return nil, fmt.Errorf("fast: the image lacks %s (not a fast plan's image?): %w", n, err)
		}
		e.fn[n] = f
	}
	for _, n := range kernels.FastGeluKernels { // fast_gelu.cu's: images without it launch no GELU tile
		if f, err := ex.Mod.Function(n); err == nil {
			e.fn[n] = f
		}
	}
	return e, nil
}

// Geom checks a convolution for the fast kernels: one group, sizes within
// the kernels' 32-bit indexing.
func Geom(g exact.ConvGeom) error {
	switch {
	case g.G != 1:
		return fmt.Errorf("%w: Conv in %d groups (the tensor-core kernels take one)", ErrArgs, g.G)
	case g.N < 1 || g.C < 1 || g.M < 1 || g.OH < 1 || g.OW < 1 || g.KH < 1 || g.KW < 1 || g.SH < 1 || g.SW < 1 || g.DH < 1 || g.DW < 1:
		return fmt.Errorf("%w: Conv geometry %+v", ErrArgs, g)
	case int64(g.C)*int64(g.KH)*int64(g.KW) >= 1<<30 || int64(g.C)*int64(g.H)*int64(g.W) >= 1<<31:
		return fmt.Errorf("%w: Conv geometry %+v: an image or the reduction passes 2^31", ErrArgs, g)
	case int64(g.N)*int64(g.M)*int64(g.OH)*int64(g.OW) >= 1<<40:
		return fmt.Errorf("%w: Conv geometry %+v too large", ErrArgs, g)
	}
	return nil
}

// Conv runs g (one group) with w the weights packed by PackWeights as
// [M][C*KH*KW], bias (0: none) and res (0: none, else of the output's
// shape) added in that order after the chain, then act.
func (e *Engine) Conv(s *cuda.Stream, p plan.Precision, t Tile, g exact.ConvGeom, x, w, bias, res uint64, act exact.Act, y uint64) error {
	if err := Geom(g); err != nil {
		return err
	}
	return e.launch(s, p, Mode(g, t, x), t, g, x, w, bias, res, act, false, y)
}

// GEMM sets y[r][j] (rows x n) to the chain over k of x[r][k] (rows x k,
// row-major float32) times w's row j (packed [n][k]), + bias[j] (0: none),
// then act.
func (e *Engine) GEMM(s *cuda.Stream, p plan.Precision, t Tile, rows, n, k int, x, w, bias uint64, act exact.Act, y uint64) error {
	return e.GEMMRes(s, p, t, rows, n, k, x, w, bias, 0, act, y)
}

// GEMMRes is GEMM with a residual: res (rows x n, 0: none) is added after
// the bias and before act, as a convolution's residual is (the epilogue's
// acc, + bias[j], + res[r][j], act).
func (e *Engine) GEMMRes(s *cuda.Stream, p plan.Precision, t Tile, rows, n, k int, x, w, bias, res uint64, act exact.Act, y uint64) error {
	return e.gemm(s, p, t, rows, n, k, x, w, bias, res, act, false, y)
}

// GEMMGelu is GEMMRes without act, then y = GELU(v) (exact's GeluErf, the
// function of the exact pass vx_unary(GELU_ERF)) as the epilogue's last
// step: fast_gelu.cu's GELU tiles.
func (e *Engine) GEMMGelu(s *cuda.Stream, p plan.Precision, t Tile, rows, n, k int, x, w, bias, res, y uint64) error {
	return e.gemm(s, p, t, rows, n, k, x, w, bias, res, exact.Act{}, true, y)
}

func (e *Engine) gemm(s *cuda.Stream, p plan.Precision, t Tile, rows, n, k int, x, w, bias, res uint64, act exact.Act, gelu bool, y uint64) error {
	g := exact.ConvGeom{N: rows, C: k, H: 1, W: 1, M: n, OH: 1, OW: 1, G: 1, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
	if err := Geom(g); err != nil {
		return err
	}
	return e.launch(s, p, gemmMode(k, x), t, g, x, w, bias, res, act, gelu, y)
}

func (e *Engine) launch(s *cuda.Stream, p plan.Precision, mode int, t Tile, g exact.ConvGeom, x, w, bias, res uint64, act exact.Act, gelu bool, y uint64) error {
	if w%16 != 0 {
		return fmt.Errorf("%w: packed weights not 16-byte aligned", ErrArgs)
	}
	l, err := planLaunch(p, mode, t, g)
	if err != nil {
		return err
	}
	var taps uint64
	if mode == kernels.FastGather {
		if taps, err = e.ex.Taps(g); err != nil {
			return err
		}
	}
	if gelu {
		l.kernel += "_gelu"
	}
	f := e.fn[l.kernel]
	if f == nil {
		return fmt.Errorf("%w: no kernel %s", ErrArgs, l.kernel)
	}
	args := new(cuda.Args).Struct(l.geom[:]...).Ptr(x).Ptr(w).Ptr(taps).Ptr(bias).Ptr(res).I32(act.Code()).F32(act.Lo).F32(act.Hi).Ptr(y)
	return f.Launch(s, cuda.D3(l.grid[0], l.grid[1], 1), cuda.D3(256, 1, 1), 0, args)
}

// launchPlan is one kernel launch: the entry point, fast.cu's vf_geom and
// the grid (column blocks, channel blocks) of 256-thread blocks.
type launchPlan struct {
	kernel string
	geom   [16]int32
	grid   [2]uint32
}

func planLaunch(p plan.Precision, mode int, t Tile, g exact.ConvGeom) (launchPlan, error) {
	kp, ok := kernelPrec(p)
	if !ok {
		return launchPlan{}, fmt.Errorf("%w: precision %q", ErrArgs, p)
	}
	if !slices.Contains(kernels.FastModeTiles(mode), [2]int{t.BM, t.BN}) {
		return launchPlan{}, fmt.Errorf("%w: no mode %d kernel of tile %s", ErrArgs, mode, t)
	}
	_, Kp := PackedLen(g.M, g.C*g.KH*g.KW)
	NP := int64(g.N) * int64(g.OH*g.OW)
	bx := (NP + int64(t.BN) - 1) / int64(t.BN)
	by := (g.M + t.BM - 1) / t.BM
	if bx >= 1<<31 || by >= 1<<16 {
		return launchPlan{}, fmt.Errorf("%w: a grid of %d x %d blocks", ErrArgs, bx, by)
	}
	return launchPlan{kernel: kernels.FastKernel(kp, mode, t.BM, t.BN),
		geom: [16]int32{int32(g.C), int32(g.H), int32(g.W), int32(g.M), int32(g.OH), int32(g.OW), int32(g.KH), int32(g.KW),
			int32(g.SH), int32(g.SW), int32(g.PH), int32(g.PW), int32(g.DH), int32(g.DW), int32(g.N), int32(Kp)},
		grid: [2]uint32{uint32(bx), uint32(by)}}, nil
}
