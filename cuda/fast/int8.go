package fast

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/kernel/q8"
	"github.com/vouchml/vouch/plan"
)

// INT8 fast mode (cuda/kernels' fast_int8.cu): symmetric per-channel int8
// weights, the input quantized per tensor with its calibrated scale once
// per layer (v8_quant, into a channels-last int8 scratch), int32
// accumulation by mma.sync m16n8k32 and a float32 epilogue. The integer sums are exact, so Int8Conv, the kernels' Go
// twin, computes the same bits on any CPU; fast_int8.cu's header gives
// every float32 operation and its order, and the twin performs them.
// They are kernel/q8's (TestInt8ConvEqualsQ8): a fast int8 layer has the
// bits of the CPU int8 layer with the same scales.

// BK8 is the INT8 kernels' k block: a layer's reduction is padded to a
// multiple of it.
const BK8 = 64

// MaxK8 bounds an INT8 layer's reduction: MaxK8 products of magnitude at
// most 127*127 and their partial sums stay inside int32.
const MaxK8 = 131072

// Int8Weights are a layer's weights quantized per output channel: Q is
// [M][K] in the (c, kh, kw) order of an ONNX Conv's weights (a Gemm's
// [N][K]), Scale[m] the channel's scale (q8.WeightScales: max|w|/127
// as float32, 1 for an all-zero or non-finite channel, whose Q is zero).
type Int8Weights struct {
	M, K  int
	Q     []int8
	Scale []float32
}

// QuantizeWeights quantizes an M x K float32 matrix (row m at w[m*rs:],
// element k of a row at stride cs) per row, rounding to nearest even.
func QuantizeWeights(w []float32, M, K, rs, cs int) (Int8Weights, error) {
	if M < 1 || K < 1 || K > MaxK8 || int64(M)*int64(K) > 1<<31 {
		return Int8Weights{}, fmt.Errorf("fast: int8 weights of %d x %d (the reduction at most %d)", M, K, MaxK8)
	}
	if last := (M-1)*rs + (K-1)*cs; last >= len(w) || last < 0 {
		return Int8Weights{}, fmt.Errorf("fast: weights of %d floats for %d x %d at strides %d, %d", len(w), M, K, rs, cs)
	}
	rows := make([]float32, M*K)
	for m := range M {
		for k := range K {
			rows[m*K+k] = w[m*rs+k*cs]
		}
	}
	q, s := q8.WeightScales(rows, M)
	return Int8Weights{M: M, K: K, Q: q, Scale: s}, nil
}

// CPad is what the kernels pad a layer's input channels (a Gemm's K) to:
// the 16 bytes of one staged chunk.
const CPad = 16

// Narrow8 is the most input channels of a narrow layer (an RGB stem): its
// channels are padded to 4, one 32-bit word a pixel, and its kernels
// (fast_int8.cu's v8_n_*) stage a word a tap, so that a 7x7 kernel on 3
// channels reduces over 49*4 bytes, not 49*16.
const Narrow8 = 4

// Cp8 is what the kernels pad C input channels to: 4 for a narrow layer,
// else C rounded up to CPad.
func Cp8(C int) int {
	if C <= Narrow8 {
		return Narrow8
	}
	return (C + CPad - 1) / CPad * CPad
}

// int8Rows is the packed weights' row length in bytes for taps x C:
// taps * Cp8(C), rounded up to BK8.
func int8Rows(taps, C int) int {
	return (taps*Cp8(C) + BK8 - 1) / BK8 * BK8
}

// PackConv lays w out for the kernels that run g: [Mp][Kp] bytes (Mp = M
// rounded up to MPad, Kp = int8Rows(KH*KW, C)), row m's byte (kh*KW +
// kw)*Cp + c holding weight (m, c, kh, kw), zeros in the padding
// (channels C..Cp of each tap, rows M..Mp, the row's tail).
func (w Int8Weights) PackConv(g exact.ConvGeom) ([]byte, error) {
	if w.M != g.M || w.K != g.C*g.KH*g.KW || len(w.Q) != w.M*w.K {
		return nil, fmt.Errorf("%w: int8 weights of %d x %d for a Conv of %d x %d", ErrArgs, w.M, w.K, g.M, g.C*g.KH*g.KW)
	}
	return w.pack(g.KH * g.KW), nil
}

// PackGemm lays w out for a Gemm (one tap of K channels).
func (w Int8Weights) PackGemm() []byte { return w.pack(1) }

func (w Int8Weights) pack(T int) []byte {
	C := w.K / T
	Cp := Cp8(C)
	Mp := (w.M + MPad - 1) / MPad * MPad
	Kp := int8Rows(T, C)
	out := make([]byte, Mp*Kp)
	for m := range w.M {
		row := w.Q[m*w.K : (m+1)*w.K]
		dst := out[m*Kp:]
		for c := range C {
			for t := range T {
				dst[t*Cp+c] = byte(row[c*T+t])
			}
		}
	}
	return out
}

// Int8Scratch is the bytes of device scratch an INT8 layer of g needs:
// its input quantized channels-last, N*H*W*Cp.
func Int8Scratch(g exact.ConvGeom) uint64 {
	return uint64(g.N) * uint64(g.H) * uint64(g.W) * uint64(Cp8(g.C))
}

// Mult is the epilogue's per-channel factor float32(sx * Scale[m]).
func (w Int8Weights) Mult(sx float32) []float32 {
	m := make([]float32, w.M)
	for i, s := range w.Scale {
		m[i] = float32(sx * s)
	}
	return m
}

// Inv is the quantization's multiplier float32(1 / sx), the kernels'
// inv argument.
func Inv(sx float32) float32 { return float32(1 / sx) }

// CheckScale refuses an activation scale the kernels cannot use.
func CheckScale(sx float32) error {
	if !(sx > 0) || math.IsInf(float64(sx), 0) || math.IsInf(float64(Inv(sx)), 0) {
		return fmt.Errorf("fast: int8 activation scale %v (want positive, finite, with a finite inverse)", sx)
	}
	return nil
}

// Quantize8 is the kernels' quantization of one input value: x * inv
// rounded to float32, then to the nearest integer, ties to even (NaN to
// 0), clamped to [-127, 127] (kernel/q8's quantize1, cvt.rni.s32.f32 and
// min/max on the GPU).
func Quantize8(x, inv float32) int8 {
	v := float32(x * inv)
	switch {
	case v != v:
		return 0
	case v > 127:
		return 127
	case v < -127:
		return -127
	}
	return int8(math.RoundToEven(float64(v)))
}

// epilogue8 is the kernels' float32 epilogue of one output: float32(acc),
// times mult, + bias, + residual (hasRes), the activation; each
// operation rounded on its own (the conversions forbid Go's fusing).
func epilogue8(acc int32, mult float32, bias *float32, res float32, hasRes bool, act exact.Act) float32 {
	v := float32(float32(acc) * mult)
	if bias != nil {
		v = float32(v + *bias)
	}
	if hasRes {
		v = float32(v + res)
	}
	if act.Relu && v < 0 {
		v = 0
	}
	if act.HasLo && v < act.Lo {
		v = act.Lo
	}
	if act.HasHi && v > act.Hi {
		v = act.Hi
	}
	return v
}

// Int8Conv is the INT8 kernels' Go twin: convolution g (one group) of x
// (NCHW float32) by w with activation scale sx, + bias (nil: none), +
// res (nil: none; the output's shape), then act. Its bits are the
// kernels' for every geometry and tile: the same integers (exact sums) and
// the same float32 epilogue.
func Int8Conv(g exact.ConvGeom, x []float32, w Int8Weights, sx float32, bias, res []float32, act exact.Act) ([]float32, error) {
	if err := Geom(g); err != nil {
		return nil, err
	}
	if err := CheckScale(sx); err != nil {
		return nil, err
	}
	K, P := g.C*g.KH*g.KW, g.OH*g.OW
	switch {
	case w.M != g.M || w.K != K || len(w.Q) != w.M*w.K || len(w.Scale) != w.M:
		return nil, fmt.Errorf("%w: int8 weights of %d x %d for a Conv of %d x %d", ErrArgs, w.M, w.K, g.M, K)
	case len(x) != g.N*g.C*g.H*g.W:
		return nil, fmt.Errorf("%w: input of %d floats, want %d", ErrArgs, len(x), g.N*g.C*g.H*g.W)
	case bias != nil && len(bias) != g.M:
		return nil, fmt.Errorf("%w: bias of %d, want %d", ErrArgs, len(bias), g.M)
	case res != nil && len(res) != g.OutLen():
		return nil, fmt.Errorf("%w: residual of %d, want %d", ErrArgs, len(res), g.OutLen())
	}
	inv := Inv(sx)
	mult := w.Mult(sx)
	xq := make([]int8, len(x))
	for i, v := range x {
		xq[i] = Quantize8(v, inv)
	}
	y := make([]float32, g.OutLen())
	col := make([]int32, K) // one output pixel's quantized patch
	for n := range g.N {
		xn := xq[n*g.C*g.H*g.W:]
		for p := range P {
			oh, ow := p/g.OW, p%g.OW
			for k := range K {
				c, r := k/(g.KH*g.KW), k%(g.KH*g.KW)
				ih, iw := oh*g.SH-g.PH+r/g.KW*g.DH, ow*g.SW-g.PW+r%g.KW*g.DW
				col[k] = 0
				if ih >= 0 && ih < g.H && iw >= 0 && iw < g.W {
					col[k] = int32(xn[(c*g.H+ih)*g.W+iw])
				}
			}
			for m := range g.M {
				var acc int32
				for k, q := range w.Q[m*K : (m+1)*K] {
					acc += int32(q) * col[k]
				}
				o := (n*g.M+m)*P + p
				var b *float32
				if bias != nil {
					b = &bias[m]
				}
				var r float32
				if res != nil {
					r = res[o]
				}
				y[o] = epilogue8(acc, mult[m], b, r, res != nil, act)
			}
		}
	}
	return y, nil
}

// Int8GEMM is Int8Conv for a Gemm: y[r][j] (rows x w.M) from x[r][k]
// (rows x w.K, row-major), + bias[j], then act.
func Int8GEMM(rows int, x []float32, w Int8Weights, sx float32, bias []float32, act exact.Act) ([]float32, error) {
	return Int8Conv(gemmGeom(rows, w.M, w.K), x, w, sx, bias, nil, act)
}

func gemmGeom(rows, n, k int) exact.ConvGeom {
	return exact.ConvGeom{N: rows, C: k, H: 1, W: 1, M: n, OH: 1, OW: 1, G: 1, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
}

// Int8Engine launches the INT8 kernels of a loaded module.
type Int8Engine struct {
	fn map[string]*cuda.Function
}

// LoadInt8 finds fast_int8.cu's entry points in m (a fast plan's module).
func LoadInt8(m *cuda.Module) (*Int8Engine, error) {
	e := &Int8Engine{fn: map[string]*cuda.Function{}}
	for _, n := range kernels.FastInt8Kernels {
		f, err := m.Function(n)
		if err != nil {
			return nil, fmt.Errorf("fast: the image lacks %s (not a fast plan's image?): %w", n, err)
		}
		e.fn[n] = f
	}
	return e, nil
}

// Int8Layer is what a launch needs of a layer besides its operands: the
// weights on the device (PackConv's or PackGemm's bytes, 16-byte
// aligned), the per-channel Mult (M floats), the activation scale.
type Int8Layer struct {
	W, Mult uint64
	Scale   float32
}

// UploadInt8 puts a layer's packed weights (PackConv's or PackGemm's
// bytes) and its Mult on the device, returning the Int8Layer that
// launches read and the buffers to free.
func UploadInt8(c *cuda.Context, packed []byte, mult []float32, sx float32) (Int8Layer, []*cuda.Buffer, error) {
	if len(packed) == 0 || len(packed)%4 != 0 || len(mult) == 0 {
		return Int8Layer{}, nil, fmt.Errorf("%w: %d packed int8 bytes, %d multipliers", ErrArgs, len(packed), len(mult))
	}
	if err := CheckScale(sx); err != nil {
		return Int8Layer{}, nil, err
	}
	var bufs []*cuda.Buffer
	up := func(v []float32) (uint64, error) {
		b, err := c.Alloc(uint64(len(v)) * 4)
		if err != nil {
			return 0, err
		}
		bufs = append(bufs, b)
		return b.Ptr, c.Upload(b, v)
	}
	w, err := up(unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(packed))), len(packed)/4))
	if err != nil {
		return Int8Layer{}, bufs, err
	}
	m, err := up(mult)
	return Int8Layer{W: w, Mult: m, Scale: sx}, bufs, err
}

// Conv runs g (one group; l packed by PackConv for g) on x, + bias (0:
// none), + res (0: none, else of the output's shape), then act: first
// v8_quant, x into scratch (Int8Scratch(g) bytes, 16-byte aligned), then
// the GEMM, both on s.
func (e *Int8Engine) Conv(s *cuda.Stream, t Tile, g exact.ConvGeom, l Int8Layer, x, scratch, bias, res uint64, act exact.Act, y uint64) error {
	if err := Geom(g); err != nil {
		return err
	}
	return e.launch(s, t, g, l, x, scratch, bias, res, act, y)
}

// GEMM sets y[r][j] (rows x n) from x[r][k] (rows x k, row-major float32)
// and l (PackGemm's bytes), + bias[j] (0: none), then act; scratch holds
// Int8Scratch of the Gemm's 1x1 geometry (rows * k rounded up to CPad).
func (e *Int8Engine) GEMM(s *cuda.Stream, t Tile, rows, n, k int, l Int8Layer, x, scratch, bias uint64, act exact.Act, y uint64) error {
	g := gemmGeom(rows, n, k)
	if err := Geom(g); err != nil {
		return err
	}
	return e.launch(s, t, g, l, x, scratch, bias, 0, act, y)
}

func (e *Int8Engine) launch(s *cuda.Stream, t Tile, g exact.ConvGeom, l Int8Layer, x, scratch, bias, res uint64, act exact.Act, y uint64) error {
	if l.W%16 != 0 || scratch%16 != 0 || scratch == 0 {
		return fmt.Errorf("%w: packed int8 weights or scratch not 16-byte aligned", ErrArgs)
	}
	if err := CheckScale(l.Scale); err != nil {
		return fmt.Errorf("%w: %w", ErrArgs, err)
	}
	lp, err := planLaunch8(t, g)
	if err != nil {
		return err
	}
	q, f := e.fn[kernels.FastInt8Quant], e.fn[lp.kernel]
	if q == nil || f == nil {
		return fmt.Errorf("%w: no kernel %s", ErrArgs, lp.kernel)
	}
	qa := new(cuda.Args).Ptr(x).Ptr(scratch).I32(int32(g.N)).I32(int32(g.C)).I32(int32(g.H * g.W)).F32(Inv(l.Scale))
	if err := q.Launch(s, cuda.D3(lp.quant, 1, 1), cuda.D3(256, 1, 1), 0, qa); err != nil {
		return err
	}
	args := new(cuda.Args).Struct(lp.geom[:]...).Ptr(scratch).Ptr(l.W).Ptr(l.Mult).Ptr(bias).Ptr(res).I32(act.Code()).F32(act.Lo).F32(act.Hi).Ptr(y)
	return f.Launch(s, cuda.D3(lp.grid[0], lp.grid[1], 1), cuda.D3(256, 1, 1), 0, args)
}

// launch8 is an INT8 layer's two launches: v8_quant's blocks, and the
// GEMM's kernel, v8_geom (the row length Kp in bytes) and grid.
type launch8 struct {
	launchPlan
	quant uint32
}

func planLaunch8(t Tile, g exact.ConvGeom) (launch8, error) {
	K := g.C * g.KH * g.KW
	if K > MaxK8 {
		return launch8{}, fmt.Errorf("%w: int8 reduction of %d (at most %d)", ErrArgs, K, MaxK8)
	}
	// The grid and geometry of the 16-bit kernels, the row length and
	// kernel name of the int8 ones.
	l, err := planLaunch(plan.FP16, kernels.FastGather, t, g)
	if err != nil {
		return launch8{}, err
	}
	l.geom[15] = int32(int8Rows(g.KH*g.KW, g.C))
	l.kernel = kernels.FastInt8Kernel(t.BM, t.BN)
	if g.C <= Narrow8 {
		l.kernel = kernels.FastInt8NarrowKernel(t.BM, t.BN)
	}
	nq := (int64(g.N)*int64((g.C+CPad-1)/CPad)*int64(g.H*g.W) + 255) / 256
	if nq >= 1<<31 {
		return launch8{}, fmt.Errorf("%w: int8 input of %d images of %d x %d x %d", ErrArgs, g.N, g.C, g.H, g.W)
	}
	return launch8{l, uint32(nq)}, nil
}

// ParseInt8Tile reads an INT8 layer's tile and activation scale as a fast
// plan's kernel name writes them (cuda/engine): "BMxBN x=BITS", BITS the
// scale's float32 bits as 8 hex digits (the calibration cache's
// notation), e.g. "128x64 x=3c23d70a". The scale must pass CheckScale.
func ParseInt8Tile(s string) (Tile, float32, error) {
	ts, hex, ok := strings.Cut(s, " x=")
	bits, err := strconv.ParseUint(hex, 16, 32)
	if !ok || err != nil || len(hex) != 8 {
		return Tile{}, 0, fmt.Errorf("fast: int8 tile %q: want TILE x=SCALEBITS (8 hex digits)", s)
	}
	t, err := ParseTile(ts)
	if err != nil {
		return Tile{}, 0, err
	}
	sc := math.Float32frombits(uint32(bits))
	if err := CheckScale(sc); err != nil {
		return Tile{}, 0, err
	}
	return t, sc, nil
}
