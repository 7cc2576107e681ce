package gputest

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vouchml/vouch/bench"
	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/fast"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// FastConfig is the fast-mode suite's (issue 19) work: the kernel checks
// always, then Models (ONNX files) built as fast plans, checked and, at
// BenchBatches, timed.
type FastConfig struct {
	Driver, NVRTC string
	Device        int
	Seed          int64
	Precisions    []plan.Precision // default fp16 and bf16
	Models        []string
	// Batches are the batch sizes a model's row 0 is run in against row 0
	// alone (default 2, 3, 8, 64, 256; a model of fixed batch is checked
	// at its batch only).
	Batches      []int
	BenchBatches []int // default 1 and 256
	BenchModels  []string
	Runs         int // run-to-run repetitions (default 100)
}

// FastReport counts the suite's bit comparisons and its failures.
type FastReport struct {
	Compared, Differ int // invariance checks' outputs, and those whose bits differ
	Failures         []string
}

type fastSuite struct {
	cfg FastConfig
	w   io.Writer
	drv *cuda.Driver // set by RunAttn (profiles open programs of their own)
	c   *cuda.Context
	e   *exact.Engine
	fe  *fast.Engine
	img *cuda.Image
	env engine.Env
	r   *rand.Rand
	rep *FastReport
}

func (s *fastSuite) fail(format string, a ...any) {
	m := fmt.Sprintf(format, a...)
	s.rep.Failures = append(s.rep.Failures, m)
	fmt.Fprintln(s.w, "FAIL "+m)
}

// same counts a bit comparison.
func (s *fastSuite) same(name string, got, want []float32) {
	d, first := 0, -1
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if first < 0 {
				first = i
			}
			d++
		}
	}
	s.rep.Compared += len(want)
	s.rep.Differ += d
	if d != 0 {
		s.fail("%s: %d of %d outputs differ (first at %d: %#08x vs %#08x)", name, d, len(want), first, math.Float32bits(got[first]), math.Float32bits(want[first]))
		return
	}
	fmt.Fprintf(s.w, "invariant %s: 0 of %d differ\n", name, len(want))
}

// RunFast runs the fast suite on cfg.Device.
func RunFast(cfg FastConfig, w io.Writer) (*FastReport, error) {
	if len(cfg.Precisions) == 0 {
		cfg.Precisions = []plan.Precision{plan.FP16, fast.BF16}
	}
	if len(cfg.Batches) == 0 {
		cfg.Batches = []int{2, 3, 8, 64, 256}
	}
	if len(cfg.BenchBatches) == 0 {
		cfg.BenchBatches = []int{1, 256}
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 100
	}
	d, err := cuda.Open(cfg.Driver)
	if err != nil {
		return nil, err
	}
	c, err := d.Context(cfg.Device)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	nv, err := cuda.OpenNVRTC(cfg.NVRTC)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	img, err := engine.FastKernels(nv, c.Info.Arch())
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "fast: NVRTC %s compiled %s for %s in %.1f s (ptx %d bytes, cubin %d)\n", img.NVRTC, img.Source, img.Arch, time.Since(t0).Seconds(), len(img.PTX), len(img.Cubin))
	e, err := exact.Load(c, img)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	fe, err := fast.Load(e)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"vf_f16_m0_128x128", "vf_f16_m1_128x128", "vf_f16_m2_64x32", "vf_bf16_m0_128x64"} {
		if f, err := e.Mod.Function(k); err == nil {
			if a, err := f.Attrs(); err == nil {
				fmt.Fprintf(w, "kernel %-20s %3d registers, %5d B shared, %d B local\n", k, a.Registers, a.SharedBytes, a.LocalBytes)
			}
		}
	}
	s := &fastSuite{cfg: cfg, w: w, c: c, e: e, fe: fe, img: img, r: rand.New(rand.NewSource(cfg.Seed + 19)), rep: &FastReport{},
		env: engine.Env{Device: c.Info, Release: d.Release(), NVRTC: img.NVRTC}}
	if err := s.kernels(); err != nil {
		return s.rep, err
	}
	for _, m := range cfg.Models {
		if err := s.model(m); err != nil {
			return s.rep, err
		}
	}
	return s.rep, nil
}

// fastConvCase is one convolution of the kernel checks.
type fastConvCase struct {
	name string
	g    exact.ConvGeom // N: the largest batch
}

func fastConvOf(name string, C, H, M, K, stride, pad, N int) fastConvCase {
	g := exact.ConvGeom{N: N, C: C, H: H, W: H, M: M, G: 1, KH: K, KW: K, SH: stride, SW: stride, PH: pad, PW: pad, DH: 1, DW: 1}
	g.OH = (H+2*pad-K)/stride + 1
	g.OW = g.OH
	return fastConvCase{name, g}
}

func (s *fastSuite) upload(v []float32) (*cuda.Buffer, error) {
	b, err := s.c.Alloc(uint64(max(len(v), 1)) * 4)
	if err != nil {
		return nil, err
	}
	return b, s.c.Upload(b, v)
}

func (s *fastSuite) randn(n int, sc float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(s.r.NormFloat64() * sc)
	}
	return v
}

// kernels checks the fast kernels against the exact ones (accuracy), a
// row alone against the same row in batches (bits), repeated runs and
// several streams (bits).
func (s *fastSuite) kernels() error {
	cases := []fastConvCase{
		fastConvOf("resnet50 conv1 7x7/2", 3, 224, 64, 7, 2, 3, 8),
		fastConvOf("resnet50 layer1 1x1 64->256", 64, 56, 256, 1, 1, 0, 32),
		fastConvOf("resnet50 layer1 3x3 64", 64, 56, 64, 3, 1, 1, 32),
		fastConvOf("resnet50 layer2 3x3/2 128", 128, 56, 128, 3, 2, 1, 32),
		fastConvOf("resnet50 layer3 1x1 1024->256", 1024, 14, 256, 1, 1, 0, 256),
		fastConvOf("resnet50 layer4 3x3 512", 512, 7, 512, 3, 1, 1, 256),
		fastConvOf("resnet50 layer4 1x1 512->2048", 512, 7, 2048, 1, 1, 0, 256),
		fastConvOf("odd 5->70 3x3 pad 1", 5, 13, 70, 3, 1, 1, 64),
	}
	ctx := s.c
	for _, pr := range s.cfg.Precisions {
		if pr == plan.Int8 {
			continue // fast_int8.cu's kernels have their tests in cuda/fast
		}
		for _, cc := range cases {
			g := cc.g
			K := g.C * g.KH * g.KW
			x, err := s.upload(s.randn(g.N*g.C*g.H*g.W, 1))
			if err != nil {
				return err
			}
			wv := s.randn(g.M*K, 1/math.Sqrt(float64(K)))
			w, err := s.upload(wv)
			if err != nil {
				return err
			}
			pw, err := fast.PackWeights(wv, g.M, K, K, 1, pr)
			if err != nil {
				return err
			}
			wb, err := ctx.Alloc(uint64(len(pw)) * 2)
			if err != nil {
				return err
			}
			if err := ctx.UploadUint16(wb, pw); err != nil {
				return err
			}
			bias, err := s.upload(s.randn(g.M, 0.1))
			if err != nil {
				return err
			}
			res, err := s.upload(s.randn(g.OutLen(), 0.5))
			if err != nil {
				return err
			}
			yf, err := ctx.Alloc(uint64(g.OutLen()) * 4)
			if err != nil {
				return err
			}
			ye, err := ctx.Alloc(uint64(g.OutLen()) * 4)
			if err != nil {
				return err
			}
			act := exact.Act{Relu: true}
			tile := fast.ChooseTile(g.M, g.OH*g.OW)
			name := fmt.Sprintf("%s %s conv %s N=%d tile %s", cc.name, pr, fmt.Sprint(g.KH, "x", g.KW), g.N, tile)
			if err := s.fe.Conv(nil, pr, tile, g, x.Ptr, wb.Ptr, bias.Ptr, res.Ptr, act, yf.Ptr); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := s.e.Conv2DAct(nil, g, x.Ptr, w.Ptr, bias.Ptr, res.Ptr, act, ye.Ptr); err != nil {
				return err
			}
			full := make([]float32, g.OutLen())
			ex := make([]float32, g.OutLen())
			if err := ctx.Download(full, yf); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := ctx.Download(ex, ye); err != nil {
				return err
			}
			maxd, maxe, se, sd := 0.0, 0.0, 0.0, 0.0
			for i := range ex {
				d := math.Abs(float64(full[i]) - float64(ex[i]))
				maxd = max(maxd, d)
				maxe = max(maxe, math.Abs(float64(ex[i])))
				se += float64(ex[i]) * float64(ex[i])
				sd += d * d
			}
			rel := math.Sqrt(sd / max(se, 1e-300))
			lim := 2e-3
			if pr == fast.BF16 {
				lim = 1.6e-2
			}
			fmt.Fprintf(s.w, "accuracy %s: vs exact max abs %.3g (max |exact| %.3g), rel L2 %.3g (limit %.3g)\n", name, maxd, maxe, rel, lim)
			if !(rel <= lim) {
				s.fail("%s: rel L2 error %.3g vs the exact kernel, past %.3g", name, rel, lim)
			}
			// Every other tile gives the same bits (the chain is the k16
			// steps, not the tile's).
			for _, t := range [][2]int{{128, 128}, {64, 32}} {
				if err := s.fe.Conv(nil, pr, fast.Tile{BM: t[0], BN: t[1]}, g, x.Ptr, wb.Ptr, bias.Ptr, res.Ptr, act, ye.Ptr); err != nil {
					return err
				}
				if err := ctx.Download(ex, ye); err != nil {
					return err
				}
				s.same(fmt.Sprintf("%s: tile %dx%d == tile %s", name, t[0], t[1], tile), ex, full)
			}
			// Rows alone: image i of the batch at N=1, and the first n
			// images at each smaller batch.
			img, oimg := g.C*g.H*g.W, g.M*g.OH*g.OW
			part := make([]float32, g.OutLen())
			for _, n := range []int{1, 2, 3, 7, g.N - 1} {
				if n < 1 || n >= g.N {
					continue
				}
				for _, at := range []int{0, g.N - n} {
					gn := g
					gn.N = n
					off := uint64(at)
					if err := s.fe.Conv(nil, pr, tile, gn, x.Ptr+off*uint64(img)*4, wb.Ptr, bias.Ptr, res.Ptr+off*uint64(oimg)*4, act, ye.Ptr); err != nil {
						return err
					}
					if err := ctx.Download(part[:n*oimg], ye); err != nil {
						return err
					}
					s.same(fmt.Sprintf("%s: images %d..%d as a batch of %d == in the batch of %d", name, at, at+n-1, n, g.N), part[:n*oimg], full[at*oimg:(at+n)*oimg])
				}
			}
			if err := s.timeConv(name, pr, g, x, wb, bias, res, act, ye); err != nil {
				return err
			}
			if cc.name == "resnet50 layer3 1x1 1024->256" || cc.name == "odd 5->70 3x3 pad 1" {
				if err := s.repeat(name, pr, tile, g, x, wb, bias, res, act, full); err != nil {
					return err
				}
			}
			for _, b := range []*cuda.Buffer{x, w, wb, bias, res, yf, ye} {
				b.Free()
			}
		}
		if err := s.gemms(pr); err != nil {
			return err
		}
	}
	return nil
}

// timeConv prints each tile's median time of 10 event-timed launches of
// g at its batch and at batch 1.
func (s *fastSuite) timeConv(name string, pr plan.Precision, g exact.ConvGeom, x, wb, bias, res *cuda.Buffer, act exact.Act, y *cuda.Buffer) error {
	st, err := s.c.NewStream()
	if err != nil {
		return err
	}
	defer st.Destroy()
	e0, err := s.c.NewEvent()
	if err != nil {
		return err
	}
	defer e0.Destroy()
	e1, err := s.c.NewEvent()
	if err != nil {
		return err
	}
	defer e1.Destroy()
	for _, n := range []int{g.N, 1} {
		gn := g
		gn.N = n
		line := fmt.Sprintf("time %s N=%d:", name, n)
		for _, t := range kernels.FastModeTiles(fast.Mode(gn, fast.Tile{BM: 128, BN: 128}, x.Ptr)) {
			tile := fast.Tile{BM: t[0], BN: t[1]}
			var ms []float64
			for i := 0; i < 12; i++ {
				if err := e0.Record(st); err != nil {
					return err
				}
				if err := s.fe.Conv(st, pr, tile, gn, x.Ptr, wb.Ptr, bias.Ptr, res.Ptr, act, y.Ptr); err != nil {
					return err
				}
				if err := e1.Record(st); err != nil {
					return err
				}
				if err := st.Synchronize(); err != nil {
					return err
				}
				v, err := e0.Elapsed(e1)
				if err != nil {
					return err
				}
				if i >= 2 {
					ms = append(ms, v)
				}
			}
			m := median(ms)
			fl := 2 * float64(gn.OutLen()) * float64(g.C*g.KH*g.KW)
			line += fmt.Sprintf(" %s %.4f ms (%.1f TFLOP/s)", tile, m, fl/m/1e9)
		}
		fmt.Fprintln(s.w, line)
	}
	return nil
}

// repeat runs a launch cfg.Runs times, and on 1, 2 and 4 streams at once:
// every output must be the first run's bits.
func (s *fastSuite) repeat(name string, pr plan.Precision, tile fast.Tile, g exact.ConvGeom, x, wb, bias, res *cuda.Buffer, act exact.Act, want []float32) error {
	ctx := s.c
	y, err := ctx.Alloc(uint64(g.OutLen()) * 4)
	if err != nil {
		return err
	}
	defer y.Free()
	got := make([]float32, g.OutLen())
	d := 0
	for i := 0; i < s.cfg.Runs; i++ {
		if err := s.fe.Conv(nil, pr, tile, g, x.Ptr, wb.Ptr, bias.Ptr, res.Ptr, act, y.Ptr); err != nil {
			return err
		}
		if err := ctx.Download(got, y); err != nil {
			return err
		}
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				d++
			}
		}
	}
	s.rep.Compared += s.cfg.Runs * len(want)
	s.rep.Differ += d
	if d != 0 {
		s.fail("%s: %d runs: %d outputs differ from the first run", name, s.cfg.Runs, d)
	} else {
		fmt.Fprintf(s.w, "invariant %s: %d runs, 0 of %d differ\n", name, s.cfg.Runs, s.cfg.Runs*len(want))
	}
	for _, ns := range []int{1, 2, 4} {
		var sts []*cuda.Stream
		var ys []*cuda.Buffer
		for range ns {
			st, err := ctx.NewStream()
			if err != nil {
				return err
			}
			b, err := ctx.Alloc(uint64(g.OutLen()) * 4)
			if err != nil {
				return err
			}
			sts, ys = append(sts, st), append(ys, b)
		}
		for round := 0; round < 3; round++ {
			for i := range ns {
				if err := s.fe.Conv(sts[i], pr, tile, g, x.Ptr, wb.Ptr, bias.Ptr, res.Ptr, act, ys[i].Ptr); err != nil {
					return err
				}
			}
		}
		for i := range ns {
			if err := sts[i].Synchronize(); err != nil {
				return err
			}
			if err := ctx.Download(got, ys[i]); err != nil {
				return err
			}
			s.same(fmt.Sprintf("%s: %d streams at once, stream %d", name, ns, i), got, want)
			ys[i].Free()
			sts[i].Destroy()
		}
	}
	return nil
}

// gemms checks the Gemm kernel (both input modes) the same way: against
// float64 on the host within the format's error, rows alone == in the
// batch, every tile the same bits.
func (s *fastSuite) gemms(pr plan.Precision) error {
	ctx := s.c
	for _, c := range [][3]int{{256, 1000, 2048}, {256, 768, 768}, {64, 3072, 768}, {77, 130, 45}} {
		rows, n, k := c[0], c[1], c[2]
		xv := s.randn(rows*k, 1)
		wv := s.randn(n*k, 1/math.Sqrt(float64(k)))
		bv := s.randn(n, 0.1)
		x, err := s.upload(xv)
		if err != nil {
			return err
		}
		pw, err := fast.PackWeights(wv, n, k, k, 1, pr)
		if err != nil {
			return err
		}
		wb, err := ctx.Alloc(uint64(len(pw)) * 2)
		if err != nil {
			return err
		}
		if err := ctx.UploadUint16(wb, pw); err != nil {
			return err
		}
		bias, err := s.upload(bv)
		if err != nil {
			return err
		}
		y, err := ctx.Alloc(uint64(rows*n) * 4)
		if err != nil {
			return err
		}
		tile := fast.ChooseTile(n, 1)
		name := fmt.Sprintf("gemm %dx%dx%d %s tile %s", rows, n, k, pr, tile)
		if err := s.fe.GEMM(nil, pr, tile, rows, n, k, x.Ptr, wb.Ptr, bias.Ptr, exact.Act{}, y.Ptr); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		full := make([]float32, rows*n)
		if err := ctx.Download(full, y); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		worst := 0.0
		for i := 0; i < rows; i += max(1, rows/16) {
			for j := range n {
				sum, sc := float64(bv[j]), math.Abs(float64(bv[j]))
				for q := range k {
					v := float64(xv[i*k+q]) * float64(wv[j*k+q])
					sum += v
					sc += math.Abs(v)
				}
				worst = max(worst, math.Abs(float64(full[i*n+j])-sum)/sc)
			}
		}
		lim := 1.0 / 512
		if pr == fast.BF16 {
			lim = 1.0 / 64
		}
		fmt.Fprintf(s.w, "accuracy %s: vs float64 worst |error| / sum|terms| %.3g (limit %.3g)\n", name, worst, lim)
		if !(worst <= lim) {
			s.fail("%s: error %.3g of the terms' magnitude, past %.3g", name, worst, lim)
		}
		got := make([]float32, rows*n)
		for _, t := range [][2]int{{128, 128}, {64, 64}} {
			if err := s.fe.GEMM(nil, pr, fast.Tile{BM: t[0], BN: t[1]}, rows, n, k, x.Ptr, wb.Ptr, bias.Ptr, exact.Act{}, y.Ptr); err != nil {
				return err
			}
			if err := ctx.Download(got, y); err != nil {
				return err
			}
			s.same(fmt.Sprintf("%s: tile %dx%d == tile %s", name, t[0], t[1], tile), got, full)
		}
		for _, m := range []int{1, 2, 7, rows - 1} {
			if m < 1 || m >= rows {
				continue
			}
			at := rows - m
			if err := s.fe.GEMM(nil, pr, tile, m, n, k, x.Ptr+uint64(at*k)*4, wb.Ptr, bias.Ptr, exact.Act{}, y.Ptr); err != nil {
				return err
			}
			if err := ctx.Download(got[:m*n], y); err != nil {
				return err
			}
			s.same(fmt.Sprintf("%s: rows %d..%d alone == in the batch of %d", name, at, rows-1, rows), got[:m*n], full[at*n:])
		}
		for _, b := range []*cuda.Buffer{x, wb, bias, y} {
			b.Free()
		}
	}
	return nil
}

// model builds path's fast plan (each precision) and its exact plan with
// the same image, then checks row 0 alone == in batches, runs and lanes,
// the accuracy against exact, and times the batches asked for.
func (s *fastSuite) model(path string) error {
	name, src, res, err := s.compileModel(path)
	if err != nil {
		return err
	}
	mk := func(sec plan.GPU) (*plan.Plan, error) {
		p, err := plan.Decode(res.Plan)
		if err != nil {
			return nil, err
		}
		sec.Image = s.img.Encode()
		p.Header.GPU = &sec
		return p, nil
	}
	ep, err := mk(engine.Section(res.Graph, res.Graph.Types, s.img, s.env))
	if err != nil {
		return err
	}
	exactE, err := exec.NewPlanEngine(ep, builtin.Registry(), exec.Options{Device: fmt.Sprintf("cuda:%d", s.cfg.Device)})
	if err != nil {
		return fmt.Errorf("%s exact: %w", name, err)
	}
	defer exactE.Close()
	ctx := context.Background()
	for _, pr := range s.cfg.Precisions {
		fo, err := fastOptions(path, src, name, res.Graph, pr)
		if err != nil {
			return err
		}
		sec, notes := engine.FastSection(res.Graph, res.Graph.Types, s.img, s.env, fo)
		nfast := 0
		for _, l := range sec.Layers {
			if strings.HasPrefix(l.Kernel, "fast.") {
				nfast++
			}
		}
		fmt.Fprintf(s.w, "model %s %s: %d of %d layers fast, mode %s; %d notes\n", name, pr, nfast, len(sec.Layers), sec.Mode, len(notes))
		for _, n := range notes {
			fmt.Fprintf(s.w, "  note %s\n", n)
		}
		p, err := mk(sec)
		if err != nil {
			return err
		}
		fe, err := exec.NewPlanEngine(p, builtin.Registry(), exec.Options{Device: fmt.Sprintf("cuda:%d", s.cfg.Device)})
		if err != nil {
			return fmt.Errorf("%s %s: %w", name, pr, err)
		}
		if err := s.modelChecks(ctx, name, string(pr), p, fe, exactE); err != nil {
			fe.Close()
			return err
		}
		if slices.Contains(s.cfg.BenchModels, name) {
			s.timeModel(ctx, name+" "+string(pr), p, fe)
		}
		fe.Close()
	}
	if slices.Contains(s.cfg.BenchModels, name) {
		s.timeModel(ctx, name+" exact", ep, exactE)
	}
	return nil
}

func (s *fastSuite) modelChecks(ctx context.Context, name, pr string, p *plan.Plan, fe, exactE *exec.Engine) error {
	if fe.Backend() != engine.FastBackend {
		s.fail("%s %s: backend %q, want %q", name, pr, fe.Backend(), engine.FastBackend)
	}
	alone, err := bench.Inputs(p.Graph, bench.Shape{Batch: 1}, 5)
	if err != nil {
		fmt.Fprintf(s.w, "model %s: no inputs: %v\n", name, err)
		return nil
	}
	ref, err := fe.Run(ctx, alone)
	if err != nil {
		return fmt.Errorf("%s %s batch 1: %w", name, pr, err)
	}
	s.emulated(ctx, name+" "+pr+" batch 1", p, alone, ref)
	// Row 0 alone == row 0 of batches whose other rows differ.
	for _, b := range s.cfg.Batches {
		in, err := bench.Inputs(p.Graph, bench.Shape{Batch: b}, 6)
		if err != nil {
			fmt.Fprintf(s.w, "model %s batch %d: not run: %v\n", name, b, err)
			continue
		}
		for k, t := range in {
			// Every input's row 0 (token ids and masks too) is row 0 alone's.
			reflect.Copy(reflect.ValueOf(t.Data), reflect.ValueOf(alone[k].Data))
		}
		out, err := fe.Run(ctx, in)
		if err != nil {
			fmt.Fprintf(s.w, "model %s batch %d: not run: %v\n", name, b, err)
			continue
		}
		for k, t := range ref {
			if f, ok := t.Data.([]float32); ok {
				s.same(fmt.Sprintf("model %s %s: output %s of row 0 alone == in a batch of %d", name, pr, k, b), out[k].Data.([]float32)[:len(f)], f)
			}
		}
	}
	// Run to run, and concurrent lanes.
	d, n := 0, 0
	for i := 0; i < s.cfg.Runs; i++ {
		out, err := fe.Run(ctx, alone)
		if err != nil {
			return err
		}
		for k, t := range ref {
			if f, ok := t.Data.([]float32); ok {
				g := out[k].Data.([]float32)
				for j := range f {
					if math.Float32bits(g[j]) != math.Float32bits(f[j]) {
						d++
					}
				}
				n += len(f)
			}
		}
	}
	s.rep.Compared += n
	s.rep.Differ += d
	if d != 0 {
		s.fail("model %s %s: %d runs: %d of %d outputs differ", name, pr, s.cfg.Runs, d, n)
	} else {
		fmt.Fprintf(s.w, "invariant model %s %s: %d runs, 0 of %d differ\n", name, pr, s.cfg.Runs, n)
	}
	for _, lanes := range []int{2, 4} {
		outs := make([]map[string]*tensor.Tensor, lanes)
		errs := make([]error, lanes)
		var wg sync.WaitGroup
		for i := range lanes {
			wg.Add(1)
			go func() { defer wg.Done(); outs[i], errs[i] = fe.Run(ctx, alone) }()
		}
		wg.Wait()
		for i := range lanes {
			if errs[i] != nil {
				return errs[i]
			}
			for k, t := range ref {
				if f, ok := t.Data.([]float32); ok {
					s.same(fmt.Sprintf("model %s %s: output %s, %d concurrent lanes, run %d", name, pr, k, lanes, i), outs[i][k].Data.([]float32), f)
				}
			}
		}
	}
	// Accuracy against the exact plan on 8 rows.
	in, err := bench.Inputs(p.Graph, bench.Shape{Batch: 8}, 9)
	if err != nil {
		in = alone
	}
	fo, err1 := fe.Run(ctx, in)
	eo, err2 := exactE.Run(ctx, in)
	if err1 != nil || err2 != nil {
		fmt.Fprintf(s.w, "model %s %s: accuracy not measured: %v %v\n", name, pr, err1, err2)
		return nil
	}
	if !slices.Contains(s.cfg.BenchModels, name) {
		s.emulated(ctx, name+" "+pr+" batch 8", p, in, fo)
	}
	for k, t := range eo {
		ev, ok := t.Data.([]float32)
		if !ok {
			continue
		}
		fv := fo[k].Data.([]float32)
		maxd, sumd, maxe := 0.0, 0.0, 0.0
		for i := range ev {
			dd := math.Abs(float64(fv[i]) - float64(ev[i]))
			maxd, sumd, maxe = max(maxd, dd), sumd+dd, max(maxe, math.Abs(float64(ev[i])))
		}
		top, rows := 0, 0
		if len(t.Shape) == 2 && t.Shape[1] > 1 {
			C := t.Shape[1]
			for r := 0; r < t.Shape[0]; r++ {
				rows++
				if argmax(fv[r*C:(r+1)*C]) == argmax(ev[r*C:(r+1)*C]) {
					top++
				}
			}
		}
		fmt.Fprintf(s.w, "accuracy model %s %s output %s vs exact: max abs %.3g, mean abs %.3g, max |exact| %.3g, top-1 agree %d/%d\n",
			name, pr, k, maxd, sumd/float64(max(len(ev), 1)), maxe, top, rows)
	}
	return nil
}

func argmax(v []float32) int {
	b := 0
	for i, x := range v {
		if x > v[b] {
			b = i
		}
	}
	return b
}

// timeModel prints the medians of 20 runs (after 3) at each bench batch:
// the layers on the GPU (graph replay between events) and end to end.
func (s *fastSuite) timeModel(ctx context.Context, label string, p *plan.Plan, e *exec.Engine) {
	for _, b := range s.cfg.BenchBatches {
		in, err := bench.Inputs(p.Graph, bench.Shape{Batch: b}, 1)
		if err != nil {
			fmt.Fprintf(s.w, "bench %s batch %d: not run: %v\n", label, b, err)
			continue
		}
		var wall, dev []float64
		for i := 0; i < 23; i++ {
			t0 := time.Now()
			if _, err = e.Run(ctx, in); err != nil {
				break
			}
			if i >= 3 {
				wall = append(wall, float64(time.Since(t0))/1e6)
				dev = append(dev, float64(e.DeviceTime())/1e6)
			}
		}
		if err != nil {
			fmt.Fprintf(s.w, "bench %s batch %d: failed: %v\n", label, b, err)
			continue
		}
		mw, md := median(wall), median(dev)
		fmt.Fprintf(s.w, "bench %s batch %4d: layers on the GPU %8.3f ms (%9.1f img/s), end to end %8.3f ms (%9.1f img/s); min %.3f ms\n",
			label, b, md, float64(b)/md*1e3, mw, float64(b)/mw*1e3, sorted(dev)[0])
	}
}

// compileModel reads, decodes and builds path's model for the CPU (the base the
// suite's fast and exact GPU sections are added to), logging the time.
func (s *fastSuite) compileModel(path string) (string, []byte, *compile.Result, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return "", nil, nil, err
	}
	name := filepath.Base(filepath.Dir(path))
	m, err := onnx.Decode(src, filepath.Dir(path))
	if err != nil {
		return "", nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	t0 := time.Now()
	res, err := compile.Build(m, src, name, "fast", compile.DefaultOptions(), builtin.Registry(), buildlog.New(nil))
	if err != nil {
		return "", nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	fmt.Fprintf(s.w, "model %s: compiled in %.1f s\n", name, time.Since(t0).Seconds())
	return name, src, res, nil
}
