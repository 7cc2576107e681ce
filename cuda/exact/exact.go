// Package exact runs vouch's exact-mode CUDA kernels (package
// cuda/kernels) on device buffers. Each operation performs its CPU twin's
// float32 operations in the CPU's order, so the bits equal kernel/nn's,
// kernel/reduce's and kernel/vmath's; package cuda/gputest checks that on
// a GPU.
package exact

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/kernels"
)

// Engine holds the loaded kernels of one context.
type Engine struct {
	C   *cuda.Context
	Mod *cuda.Module
	fn  map[string]*cuda.Function
	// SMs is the device's multiprocessor count (grid sizing).
	SMs int
	// ConvKernel forces Conv2D's kernel (one of ConvKernels(g)); ""
	// chooses. All give the same bits.
	ConvKernel string
	tapsMu     sync.Mutex // concurrent runs of a program share the tables
	taps       map[tapKey]*cuda.Buffer
}

// tapKey identifies a convolution's reduction-index decoding table.
type tapKey struct{ Cg, H, W, KH, KW, DH, DW int }

// Load checks img against the context's device and loads its cubin.
func Load(c *cuda.Context, img *cuda.Image) (*Engine, error) {
	if err := img.Check(c.Info); err != nil {
		return nil, err
	}
	m, err := c.LoadModule(img.Cubin)
	if err != nil {
		return nil, err
	}
	e := &Engine{C: c, Mod: m, fn: map[string]*cuda.Function{}, SMs: max(c.Info.Multiproc, 1), taps: map[tapKey]*cuda.Buffer{}}
	for _, n := range kernels.All {
		f, err := m.Function(n)
		if err != nil {
			m.Unload()
			return nil, err
		}
		e.fn[n] = f
	}
	return e, nil
}

// Function returns a loaded kernel by name.
func (e *Engine) Function(name string) *cuda.Function { return e.fn[name] }

// Close frees the engine's tables and unloads the kernels.
func (e *Engine) Close() error {
	e.tapsMu.Lock()
	defer e.tapsMu.Unlock()
	for k, b := range e.taps {
		b.Free()
		delete(e.taps, k)
	}
	return e.Mod.Unload()
}

// Unary operations (exact.cu's OP_ codes).
type Unary int32

// The unary operations: elementwise's Relu and vmath's functions.
const (
	Relu Unary = iota
	Exp
	Log
	Tanh
	Sigmoid
	Erf
	GeluErf
	GeluTanh
)

var unaryNames = [...]string{"Relu", "Exp", "Log", "Tanh", "Sigmoid", "Erf", "GeluErf", "GeluTanh"}

func (u Unary) String() string {
	if u >= 0 && int(u) < len(unaryNames) {
		return unaryNames[u]
	}
	return fmt.Sprintf("Unary(%d)", int32(u))
}

func (e *Engine) grid(n int64, per int64) uint32 {
	g := (n + per - 1) / per
	return uint32(min(max(g, 1), int64(e.SMs)*32))
}

// Unary sets y[i] = op(x[i]) for n floats.
func (e *Engine) Unary(s *cuda.Stream, op Unary, x, y uint64, n int64) error {
	if op < 0 || int(op) >= len(unaryNames) {
		return fmt.Errorf("exact: unknown unary operation %d", int32(op))
	}
	a := new(cuda.Args).I32(int32(op)).Ptr(x).Ptr(y).I64(n)
	return e.fn[kernels.Unary].Launch(s, cuda.D3(e.grid(n, 256), 1, 1), cuda.D3(256, 1, 1), 0, a)
}

// Clip sets y[i] to elementwise's Clip of x[i] for n floats: below lo
// (when hasLo) lo, then above hi (when hasHi) hi.
func (e *Engine) Clip(s *cuda.Stream, x, y uint64, n int64, lo, hi float32, hasLo, hasHi bool) error {
	b := func(v bool) int32 {
		if v {
			return 1
		}
		return 0
	}
	a := new(cuda.Args).Ptr(x).Ptr(y).I64(n).F32(lo).F32(hi).I32(b(hasLo)).I32(b(hasHi))
	return e.fn[kernels.Clip].Launch(s, cuda.D3(e.grid(n, 256), 1, 1), cuda.D3(256, 1, 1), 0, a)
}

// Add sets y[i] = a[i] + b[i] for n floats.
func (e *Engine) Add(s *cuda.Stream, a, b, y uint64, n int64) error {
	args := new(cuda.Args).Ptr(a).Ptr(b).Ptr(y).I64(n)
	return e.fn[kernels.Add].Launch(s, cuda.D3(e.grid(n, 256), 1, 1), cuda.D3(256, 1, 1), 0, args)
}

// Mat is a float32 matrix operand in device memory: element (r, c) is at
// Ptr + 4*(r*RS + c*CS).
type Mat struct {
	Ptr    uint64
	RS, CS int64
}

// SGEMM sets C[i*ldc+j] (i < m, j < n) to kernel/nn's chain over k of
// A(i,k)·B(k,j), from +0. Row-major operands whose shapes fit the 128x128
// kernel take it; the others the general 64x64 one (the same chains).
func (e *Engine) SGEMM(s *cuda.Stream, m, n, k int, a, b Mat, c uint64, ldc int64) error {
	if m <= 0 || n <= 0 || k <= 0 {
		return fmt.Errorf("exact: SGEMM %dx%dx%d: sizes must be positive", m, n, k)
	}
	if m%128 == 0 && n%128 == 0 && k%8 == 0 && a.CS == 1 && b.CS == 1 && a.RS%4 == 0 && b.RS%4 == 0 && ldc%4 == 0 &&
		a.Ptr%16 == 0 && b.Ptr%16 == 0 && c%16 == 0 {
		return e.SGEMM128(s, kernels.SGEMM128K8, m, n, k, a.Ptr, a.RS, b.Ptr, b.RS, c, ldc)
	}
	return e.SGEMMGeneral(s, m, n, k, a, b, c, ldc, 1, 0, 0, 0)
}

// SGEMMGeneral is the 64x64 kernel for any strides, over batch products
// whose operands advance by sa, sb and sc floats.
func (e *Engine) SGEMMGeneral(s *cuda.Stream, m, n, k int, a, b Mat, c uint64, ldc int64, batch int, sa, sb, sc int64) error {
	args := new(cuda.Args).I32(int32(m)).I32(int32(n)).I32(int32(k)).
		Ptr(a.Ptr).I64(a.RS).I64(a.CS).I64(sa).
		Ptr(b.Ptr).I64(b.RS).I64(b.CS).I64(sb).
		Ptr(c).I64(ldc).I64(sc)
	grid := cuda.D3(uint32((n+63)/64), uint32((m+63)/64), uint32(batch))
	return e.fn[kernels.SGEMM].Launch(s, grid, cuda.D3(256, 1, 1), 0, args)
}

// SGEMM128 runs one of the 128x128 kernels (kernels.SGEMM128 or
// SGEMM128K8) on row-major operands; the caller has checked the shapes.
func (e *Engine) SGEMM128(s *cuda.Stream, kernel string, m, n, k int, a uint64, lda int64, b uint64, ldb int64, c uint64, ldc int64) error {
	args := new(cuda.Args).I32(int32(m)).I32(int32(n)).I32(int32(k)).Ptr(a).I32(int32(lda)).Ptr(b).I32(int32(ldb)).Ptr(c).I32(int32(ldc))
	return e.fn[kernel].Launch(s, cuda.D3(uint32(n/128), uint32(m/128), 1), cuda.D3(256, 1, 1), 0, args)
}

// ConvGeom is a 2-D convolution (NCHW input, [M, C/G, KH, KW] weights).
type ConvGeom struct {
	N, C, H, W, M, OH, OW, G, KH, KW int
	SH, SW, PH, PW, DH, DW           int
}

// OutLen is the number of output floats.
func (g ConvGeom) OutLen() int { return g.N * g.M * g.OH * g.OW }

// Act is a convolution's fused activation, applied after the bias and
// the residual as kernel/fused runs it: Relu (v < 0 -> 0, NaN passes, -0
// stays), or Clip's bounds (below Lo when HasLo -> Lo, then above Hi when
// HasHi -> Hi). The zero Act is none.
type Act struct {
	Relu         bool
	HasLo, HasHi bool
	Lo, Hi       float32
}

// Code is the activation as the kernels' act argument (bit 0 Relu, 1 a
// lower bound, 2 an upper bound).
func (a Act) Code() int32 { return a.code() }

func (a Act) code() int32 {
	c := int32(0)
	if a.Relu {
		c |= 1
	}
	if a.HasLo {
		c |= 2
	}
	if a.HasHi {
		c |= 4
	}
	return c
}

// Conv2D sets y to kernel/nn's Conv: per output one chain over (input
// channel, kh, kw) from +0 with padding taps as FMA(0, w, acc), then
// y = acc + bias[m] (bias 0: none), + res[i] (res 0: none), clamped
// below at 0 when relu is set.
func (e *Engine) Conv2D(s *cuda.Stream, g ConvGeom, x, w, bias, res uint64, relu bool, y uint64) error {
	return e.Conv2DAct(s, g, x, w, bias, res, Act{Relu: relu}, y)
}

// ConvKernels lists the kernels that can run g (all give the same bits):
// the general per-image 64x64 one, the batch-folded tiles (the 1x1 and
// 16-byte-load variants where they apply) and the one-thread-per-output
// kernel.
func ConvKernels(g ConvGeom) []string {
	ks := []string{kernels.Conv2D}
	for _, t := range kernels.ConvTiles {
		ks = append(ks, t.Name)
		if is1x1(g) {
			ks = append(ks, kernels.ConvTile1x1(t.Name))
		}
		if t.Vec {
			ks = append(ks, vecVariants(t.Name, g)...)
		}
	}
	return append(ks, kernels.ConvDirect)
}

func is1x1(g ConvGeom) bool { return g.KH == 1 && g.KW == 1 && g.PH == 0 && g.PW == 0 }

// vecVariants are the 16-byte-load variants of tile that apply to g, the
// most vectorised last (aligned operands assumed: see Conv2DAct).
func vecVariants(tile string, g ConvGeom) []string {
	if (g.C/g.G*g.KH*g.KW)%4 != 0 {
		return nil
	}
	if !is1x1(g) {
		if g.KH == 3 && g.KW == 3 && g.DH == 1 && g.DW == 1 {
			return []string{tile + kernels.VecA, tile + kernels.VecA3x3}
		}
		return []string{tile + kernels.VecA}
	}
	v := []string{tile + kernels.VecA1x1}
	if g.SH == 1 && g.SW == 1 && (g.OH*g.OW)%4 == 0 {
		v = append(v, tile+kernels.VecAB1x1)
	}
	return v
}

// Tile efficiencies relative to the 128x128 tile at full occupancy, for
// 1x1 kernels and for the others (whose gathered input costs more per FMA
// as the tile narrows), for the tile choice; measured on the H200 with
// ResNet-50's convolutions at batch 256 (docs/gpu/gputest-2026-12-02-speed3.log).
var tileEff = map[string][2]float64{"vx_ct128x128": {1, 1}, "vx_ct64x128": {0.83, 0.7}, "vx_ct64x64": {0.72, 0.64},
	"vx_ct32x32": {0.4, 0.35}, "vx_ct16x16": {0.2, 0.2}}

// vecEff are the 16-byte-load variants' efficiencies on the same scale,
// fitted to every tile's measured time on every convolution of resnet18
// and ResNet-50 at batch 1, 32 and 256 (the per-layer table of
// docs/gpu/gputest-2026-12-02-speed4.log, each shape weighted by how often
// the network has it; TestConvChoiceMeasured replays that table).
var vecEff = map[string]float64{
	"vx_ct128x128_va": 0.5, "vx_ct128x128_1x1_va": 1.6, "vx_ct128x128_1x1_vab": 1.7, "vx_ct128x128_3x3": 1.9,
	"vx_ct64x128_va": 0.5, "vx_ct64x128_1x1_va": 0.4, "vx_ct64x128_1x1_vab": 0.9, "vx_ct64x128_3x3": 1.2,
}

// singleBlock is the efficiency of an SM that runs a single block of a
// launch (less latency hidden), fitted with vecEff.
const singleBlock = 0.75

// chooseConv picks g's kernel: one thread per output for depthwise and
// narrow groups, else the batch-folded tile kernel of least estimated time
// on sms multiprocessors: the blocks an SM runs, each the time of a tile
// at the kernel's efficiency (tileEff; vecEff for the 16-byte-load
// variants, candidates only when vec says the operands are 16-byte
// aligned), an SM with a single block at singleBlock of it. The choice
// never changes the bits.
func chooseConv(g ConvGeom, sms int, vec bool) string {
	Mg := g.M / g.G
	if Mg < 8 {
		return kernels.ConvDirect
	}
	NP := g.N * g.OH * g.OW
	kind := 1
	if is1x1(g) {
		kind = 0
	}
	best, bestT := "", math.Inf(1)
	for _, t := range kernels.ConvTiles {
		blocks := ((NP + t.BN - 1) / t.BN) * ((Mg + t.BM - 1) / t.BM) * g.G
		per := (blocks + sms - 1) / sms
		f := 1.0
		if per == 1 {
			f = singleBlock
		}
		work := float64(per * t.BM * t.BN)
		name := t.Name
		if kind == 0 {
			name = kernels.ConvTile1x1(t.Name)
		}
		if est := work / (tileEff[t.Name][kind] * f); est < bestT {
			best, bestT = name, est
		}
		if !vec || !t.Vec {
			continue
		}
		for _, v := range vecVariants(t.Name, g) {
			if est := work / (vecEff[v] * f); est < bestT {
				best, bestT = v, est
			}
		}
	}
	return best
}

// ConvChoice is the kernel Conv2D runs g with on 16-byte aligned
// operands (ConvKernel unset).
func (e *Engine) ConvChoice(g ConvGeom) string { return chooseConv(g, e.SMs, true) }

// Conv2DAct is Conv2D with a fused activation.
func (e *Engine) Conv2DAct(s *cuda.Stream, g ConvGeom, x, w, bias, res uint64, act Act, y uint64) error {
	if g.G < 1 || g.C%g.G != 0 || g.M%g.G != 0 || g.N < 1 || g.OH < 1 || g.OW < 1 || g.KH < 1 || g.KW < 1 {
		return fmt.Errorf("exact: Conv2D geometry %+v invalid", g)
	}
	if int64(g.N)*int64(g.M)*int64(g.OH)*int64(g.OW) >= 1<<40 || int64(g.N)*int64(g.C)*int64(g.H)*int64(g.W) >= 1<<40 {
		return fmt.Errorf("exact: Conv2D geometry %+v too large", g)
	}
	Cg, Mg, P := g.C/g.G, g.M/g.G, g.OH*g.OW
	if int64(Cg)*int64(g.H)*int64(g.W) >= 1<<31 || int64(Cg)*int64(g.KH)*int64(g.KW) >= 1<<31 {
		return fmt.Errorf("exact: Conv2D geometry %+v: a group's input or reduction passes 2^31", g)
	}
	kn := e.ConvKernel
	aligned := x%16 == 0 && w%16 == 0
	if kn == "" {
		kn = chooseConv(g, e.SMs, aligned)
	}
	geom := []int32{int32(g.C), int32(g.H), int32(g.W), int32(g.M), int32(g.OH), int32(g.OW),
		int32(g.G), int32(g.KH), int32(g.KW), int32(g.SH), int32(g.SW), int32(g.PH), int32(g.PW), int32(g.DH), int32(g.DW)}
	switch {
	case kn == kernels.Conv2D:
		// The per-image kernel applies the activation as separate passes
		// in the same order (its own epilogue has ReLU only).
		r := int32(0)
		if act.Relu {
			r = 1
		}
		args := new(cuda.Args).Struct(geom...).Ptr(x).Ptr(w).Ptr(bias).Ptr(res).I32(r).Ptr(y)
		grid := cuda.D3(uint32((P+63)/64), uint32((Mg+63)/64), uint32(g.N*g.G))
		if err := e.fn[kn].Launch(s, grid, cuda.D3(256, 1, 1), 0, args); err != nil {
			return err
		}
		if act.HasLo || act.HasHi {
			return e.Clip(s, y, y, int64(g.OutLen()), act.Lo, act.Hi, act.HasLo, act.HasHi)
		}
		return nil
	case kn == kernels.ConvDirect:
		args := new(cuda.Args).Struct(geom...).I32(int32(g.N)).Ptr(x).Ptr(w).Ptr(bias).Ptr(res).I32(act.code()).F32(act.Lo).F32(act.Hi).Ptr(y)
		return e.fn[kn].Launch(s, cuda.D3(e.grid(int64(g.OutLen()), 256), 1, 1), cuda.D3(256, 1, 1), 0, args)
	}
	for _, t := range kernels.ConvTiles {
		var taps uint64
		if t.Vec && strings.HasPrefix(kn, t.Name+"_") && slices.Contains(vecVariants(t.Name, g), kn) {
			// A 16-byte-load variant: its shape conditions hold; the
			// operands must be aligned.
			if !aligned {
				return fmt.Errorf("exact: %s needs 16-byte aligned input and weights", kn)
			}
			if !is1x1(g) {
				var err error
				if taps, err = e.tapTable(tapKey{Cg, g.H, g.W, g.KH, g.KW, g.DH, g.DW}); err != nil {
					return err
				}
			}
			return e.launchTile(s, kn, t.BM, t.BN, g, geom, x, w, taps, bias, res, act, y)
		}
		switch kn {
		case t.Name:
			var err error
			if taps, err = e.tapTable(tapKey{Cg, g.H, g.W, g.KH, g.KW, g.DH, g.DW}); err != nil {
				return err
			}
		case kernels.ConvTile1x1(t.Name):
			if !is1x1(g) {
				return fmt.Errorf("exact: %s runs 1x1 kernels without padding, not %dx%d pads %d,%d", kn, g.KH, g.KW, g.PH, g.PW)
			}
		default:
			continue
		}
		return e.launchTile(s, kn, t.BM, t.BN, g, geom, x, w, taps, bias, res, act, y)
	}
	return fmt.Errorf("exact: no Conv kernel %q for %+v", kn, g)
}

// launchTile launches a batch-folded tile kernel of bm x bn tiles.
func (e *Engine) launchTile(s *cuda.Stream, kn string, bm, bn int, g ConvGeom, geom []int32, x, w, taps, bias, res uint64, act Act, y uint64) error {
	NP := int64(g.N) * int64(g.OH*g.OW)
	bx := (NP + int64(bn) - 1) / int64(bn)
	if bx >= 1<<31 {
		return fmt.Errorf("exact: Conv2D of %d columns", NP)
	}
	args := new(cuda.Args).Struct(geom...).I32(int32(g.N)).Ptr(x).Ptr(w).Ptr(taps).Ptr(bias).Ptr(res).I32(act.code()).F32(act.Lo).F32(act.Hi).Ptr(y)
	grid := cuda.D3(uint32(bx), uint32((g.M/g.G+bm-1)/bm), uint32(g.G))
	return e.fn[kn].Launch(s, grid, cuda.D3(256, 1, 1), 0, args)
}

// Taps returns g's reduction-index decoding table for one group (see
// tapTable), uploaded once per geometry and kept by the engine.
func (e *Engine) Taps(g ConvGeom) (uint64, error) {
	if g.G < 1 || g.C%g.G != 0 {
		return 0, fmt.Errorf("exact: Conv2D geometry %+v invalid", g)
	}
	return e.tapTable(tapKey{g.C / g.G, g.H, g.W, g.KH, g.KW, g.DH, g.DW})
}

// tapTable returns (uploading once) the table that decodes a reduction
// index k = (c*KH + kh)*KW + kw into {c*H*W + kh*dh*W + kw*dw, kh*dh, kw*dw}.
func (e *Engine) tapTable(k tapKey) (uint64, error) {
	e.tapsMu.Lock()
	defer e.tapsMu.Unlock()
	if b := e.taps[k]; b != nil {
		return b.Ptr, nil
	}
	n := k.Cg * k.KH * k.KW
	t := make([]int32, 4*n)
	i := 0
	for c := 0; c < k.Cg; c++ {
		for kh := 0; kh < k.KH; kh++ {
			for kw := 0; kw < k.KW; kw++ {
				t[4*i] = int32(c*k.H*k.W + kh*k.DH*k.W + kw*k.DW)
				t[4*i+1], t[4*i+2] = int32(kh*k.DH), int32(kw*k.DW)
				i++
			}
		}
	}
	b, err := e.C.Alloc(uint64(len(t)) * 4)
	if err != nil {
		return 0, err
	}
	if err := e.C.UploadInt32(b, t); err != nil {
		b.Free()
		return 0, err
	}
	e.taps[k] = b
	return b.Ptr, nil
}

// PoolGeom is a 2-D pooling window over planes of H x W.
type PoolGeom struct {
	Planes, H, W, OH, OW, KH, KW int
	SH, SW, PBH, PBW, PEH, PEW   int
	DH, DW                       int
}

func (g PoolGeom) args() *cuda.Args {
	return new(cuda.Args).Struct(int32(g.H), int32(g.W), int32(g.OH), int32(g.OW), int32(g.KH), int32(g.KW),
		int32(g.SH), int32(g.SW), int32(g.PBH), int32(g.PBW), int32(g.PEH), int32(g.PEW), int32(max(g.DH, 1)), int32(max(g.DW, 1)))
}

// MaxPool2D is kernel/nn's MaxPool (first largest tap; -inf for a window
// of padding only).
func (e *Engine) MaxPool2D(s *cuda.Stream, g PoolGeom, x, y uint64) error {
	n := int64(g.Planes * g.OH * g.OW)
	a := g.args().Ptr(x).Ptr(y).I64(int64(g.Planes))
	return e.fn[kernels.MaxPool2D].Launch(s, cuda.D3(e.grid(n, 256), 1, 1), cuda.D3(256, 1, 1), 0, a)
}

// AvgPool2D is kernel/nn's AveragePool (count_include_pad when incl).
func (e *Engine) AvgPool2D(s *cuda.Stream, g PoolGeom, incl bool, x, y uint64) error {
	n := int64(g.Planes * g.OH * g.OW)
	in := int32(0)
	if incl {
		in = 1
	}
	a := g.args().I32(in).Ptr(x).Ptr(y).I64(int64(g.Planes))
	return e.fn[kernels.AvgPool2D].Launch(s, cuda.D3(e.grid(n, 256), 1, 1), cuda.D3(256, 1, 1), 0, a)
}

// GlobalAvg is GlobalAveragePool over planes of S floats.
func (e *Engine) GlobalAvg(s *cuda.Stream, x, y uint64, planes int64, S int) error {
	a := new(cuda.Args).Ptr(x).Ptr(y).I64(planes).I32(int32(S))
	return e.fn[kernels.GlobalAvg].Launch(s, cuda.D3(e.grid(planes, 128), 1, 1), cuda.D3(128, 1, 1), 0, a)
}

// Softmax is kernel/reduce's Softmax over rows of D floats (last axis).
func (e *Engine) Softmax(s *cuda.Stream, x, y uint64, rows int64, D int) error {
	if D < 1 {
		return fmt.Errorf("exact: Softmax over rows of %d", D)
	}
	a := new(cuda.Args).Ptr(x).Ptr(y).I64(rows).I32(int32(D))
	return e.fn[kernels.Softmax].Launch(s, cuda.D3(e.grid(rows, 64), 1, 1), cuda.D3(64, 1, 1), 0, a)
}

// LayerNorm is kernel/nn's LayerNormalization over rows of D floats with
// scale and bias (bias 0: none) of D floats.
func (e *Engine) LayerNorm(s *cuda.Stream, x, scale, bias uint64, eps float32, y uint64, rows int64, D int) error {
	if D < 1 {
		return fmt.Errorf("exact: LayerNorm over rows of %d", D)
	}
	a := new(cuda.Args).Ptr(x).Ptr(scale).Ptr(bias).F32(eps).Ptr(y).I64(rows).I32(int32(D))
	return e.fn[kernels.LayerNorm].Launch(s, cuda.D3(e.grid(rows, 64), 1, 1), cuda.D3(64, 1, 1), 0, a)
}

// ChannelAffine sets y = x*a[c] + b[c] over planes of S floats with
// c = plane % C (inference BatchNormalization, a and b precomputed).
func (e *Engine) ChannelAffine(s *cuda.Stream, x, a, b, y uint64, planes int64, S, C int) error {
	args := new(cuda.Args).Ptr(x).Ptr(a).Ptr(b).Ptr(y).I64(planes).I32(int32(S)).I32(int32(C))
	return e.fn[kernels.Affine].Launch(s, cuda.D3(e.grid(planes*int64(S), 256), 1, 1), cuda.D3(256, 1, 1), 0, args)
}
