// Package gputest is vouch's GPU suite: it compiles the exact kernels with
// NVRTC for the device it finds, runs every kernel against its CPU twin
// (the kernel registry's operators and kernel/vmath) on random shapes with
// odd edges and NaN, ±Inf, ±0 and subnormal inputs, and requires the bits
// to be equal; it checks CUDA graph replay, stream and batch invariance,
// and measures the exact SGEMM against cuBLAS FP32 (TF32 off).
//
// It is an ordinary package so that both `go test -tags cuda ./cuda/...`
// and `vouch gputest` run the same checks.
package gputest

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"sort"
	"time"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
)

// Config says where the libraries are and what to run. The zero Config
// runs the twin checks on device 0 with the libraries from the usual
// places.
type Config struct {
	Driver, NVRTC, CUBLAS string // library paths; "" searches
	Device                int
	Seed                  int64
	Cases                 int    // random cases per kernel (default 12)
	Bench                 bool   // run the SGEMM benchmark
	BenchSize             int    // its M = N = K (default 4096)
	BenchReps             int    // timed repetitions (default 20)
	PTXOut                string // when set, the compute_XX PTX is written there
	// Models are ONNX files run node by node on the GPU (CPU fallback for
	// uncovered nodes) and compared with the CPU executor.
	Models []string
	// ConvBench times every Conv kernel on resnet18's and ResNet-50's
	// convolutions (also part of Bench).
	ConvBench bool
	// Plans are GPU plan files timed through the serving engine at each
	// of Batches (default 1).
	Plans   []string
	Batches []int
	// SkipPlanCPU leaves out the check of each timed batch's outputs
	// against the CPU engine (planCPU: a CPU run of the plan per batch).
	SkipPlanCPU bool
	// SkipTwins skips the twin checks (benchmarks only).
	SkipTwins bool
}

// Result is one twin check.
type Result struct {
	Name  string
	Elems int // outputs compared
	Diffs int // outputs whose bits differ
}

// Report is what Run found and measured.
type Report struct {
	Device       cuda.DeviceInfo
	DriverPath   string
	NVRTCPath    string
	NVRTCVersion string
	Image        *cuda.Image
	Attrs        map[string]cuda.FuncAttrs
	Results      []Result
	Bench        []BenchResult
}

// BenchResult is one timed GEMM: median milliseconds of the repetitions.
type BenchResult struct {
	Name     string
	N        int
	MedianMs float64
	TFLOPS   float64
}

// Failed reports the number of twin checks with differing bits.
func (r *Report) Failed() int {
	n := 0
	for _, x := range r.Results {
		if x.Diffs != 0 {
			n++
		}
	}
	return n
}

// Totals returns the outputs compared and the differing ones.
func (r *Report) Totals() (elems, diffs int) {
	for _, x := range r.Results {
		elems += x.Elems
		diffs += x.Diffs
	}
	return
}

// suite is one run's state.
type suite struct {
	cfg Config
	w   io.Writer
	c   *cuda.Context
	e   *exact.Engine
	r   *rand.Rand
	rep *Report
}

// Run runs the suite, writing one line per check to w.
func Run(cfg Config, w io.Writer) (*Report, error) {
	if cfg.Cases <= 0 {
		cfg.Cases = 12
	}
	if cfg.BenchSize <= 0 {
		cfg.BenchSize = 4096
	}
	if cfg.BenchReps <= 0 {
		cfg.BenchReps = 20
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
	rep := &Report{Device: c.Info, DriverPath: d.Path, Attrs: map[string]cuda.FuncAttrs{}}
	fmt.Fprintf(w, "device %d: %s, %s, %d SMs, %.1f GiB, driver CUDA %d.%d (%s)\n", c.Info.Ordinal, c.Info.Name, c.Info.Arch(),
		c.Info.Multiproc, float64(c.Info.MemoryBytes)/(1<<30), c.Info.DriverVersion/1000, c.Info.DriverVersion%1000/10, d.Path)
	nv, err := cuda.OpenNVRTC(cfg.NVRTC)
	if err != nil {
		return rep, err
	}
	rep.NVRTCPath = nv.Path
	rep.NVRTCVersion, _ = nv.Version()
	t0 := time.Now()
	img, err := cuda.Build(nv, kernels.Source(), kernels.Name, c.Info.Arch(), kernels.Options)
	if err != nil {
		return rep, err
	}
	rep.Image = img
	fmt.Fprintf(w, "nvrtc %s (%s): %s sha256 %s -> ptx %d bytes, cubin %d bytes for %s in %v\n", rep.NVRTCVersion, nv.Path,
		kernels.Name, img.SourceDigest[:16], len(img.PTX), len(img.Cubin), img.Arch, time.Since(t0).Round(time.Millisecond))
	if cfg.PTXOut != "" {
		if err := os.WriteFile(cfg.PTXOut, img.PTX, 0o644); err != nil {
			return rep, err
		}
	}
	// The plan's GPU section round-trips and loads without NVRTC.
	img2, err := cuda.DecodeImage(img.Encode())
	if err != nil {
		return rep, err
	}
	e, err := exact.Load(c, img2)
	if err != nil {
		return rep, err
	}
	defer e.Close()
	for _, n := range kernels.All {
		a, err := e.Function(n).Attrs()
		if err != nil {
			return rep, err
		}
		rep.Attrs[n] = a
		fmt.Fprintf(w, "kernel %-16s %3d registers, %5d B shared, %d B local\n", n, a.Registers, a.SharedBytes, a.LocalBytes)
	}
	s := &suite{cfg: cfg, w: w, c: c, e: e, r: rand.New(rand.NewSource(cfg.Seed + 1)), rep: rep}
	steps := []func() error{s.unary, s.add, s.moves, s.bcasts, s.resizes, s.gemm, s.conv, s.pools, s.softmax, s.layerNorm, s.invariance, s.graph}
	for _, t := range extraTwins {
		steps = append(steps, func() error { return t(s) })
	}
	if cfg.SkipTwins {
		steps = nil
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return rep, err
		}
	}
	for _, m := range cfg.Models {
		if err := s.model(m); err != nil {
			return rep, err
		}
	}
	if cfg.Bench {
		if err := s.bench(); err != nil {
			return rep, err
		}
	}
	if cfg.Bench || cfg.ConvBench {
		if err := s.convBench(); err != nil {
			return rep, err
		}
	}
	if len(cfg.Batches) == 0 {
		s.cfg.Batches = []int{1}
	}
	if err := s.planBench(); err != nil {
		return rep, err
	}
	el, df := rep.Totals()
	fmt.Fprintf(w, "twin checks: %d, failed %d; outputs compared %d, bits different %d\n", len(rep.Results), rep.Failed(), el, df)
	return rep, nil
}

// extraTwins are twin steps that op-family files add in an init; they run
// after the built-in ones.
var extraTwins []func(*suite) error

// ErrDiffer is returned by callers that treat differing bits as failure.
var ErrDiffer = errors.New("gputest: GPU bits differ from the CPU twin")

// record compares GPU and CPU outputs. exactNaN: a NaN must have the same
// bits (the dot products and LayerNorm write the canonical NaN); otherwise
// a NaN must meet a NaN, its payload being unspecified on either side
// (docs/determinism.md).
func (s *suite) record(name string, gpu, cpu []float32, exactNaN bool) {
	d := 0
	first := -1
	if len(gpu) != len(cpu) {
		d = max(len(gpu), len(cpu))
	} else {
		for i := range gpu {
			g, c := gpu[i], cpu[i]
			same := math.Float32bits(g) == math.Float32bits(c)
			if !same && !exactNaN && g != g && c != c {
				same = true
			}
			if !same {
				if first < 0 {
					first = i
				}
				d++
			}
		}
	}
	s.rep.Results = append(s.rep.Results, Result{Name: name, Elems: len(cpu), Diffs: d})
	msg := "ok"
	if d > 0 {
		msg = "DIFFER"
		if first >= 0 {
			msg += fmt.Sprintf(" (first at %d: gpu %#08x cpu %#08x)", first, math.Float32bits(gpu[first]), math.Float32bits(cpu[first]))
		}
	}
	fmt.Fprintf(s.w, "twin %-44s %9d outputs, %d differ  %s\n", name, len(cpu), d, msg)
}

// specials are the values every input set contains.
var specials = []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
	math.Float32frombits(1), math.Float32frombits(0x80000001), math.Float32frombits(0x007fffff), 1e-39, -2.5e-40,
	math.MaxFloat32, -math.MaxFloat32, 1.1754944e-38, 88.7, -87.4, 89, -104, 0.625, -0.5, 4, 9.01}

// data returns n random floats, a fraction special of them from specials.
func (s *suite) data(n int, scale float32, special float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		if s.r.Float64() < special {
			v[i] = specials[s.r.Intn(len(specials))]
		} else {
			v[i] = float32(s.r.NormFloat64()) * scale
		}
	}
	return v
}

// dev uploads v into a new device buffer.
func (s *suite) dev(v []float32) (*cuda.Buffer, error) {
	b, err := s.c.Alloc(uint64(max(len(v), 1)) * 4)
	if err != nil {
		return nil, err
	}
	if err := s.c.Upload(b, v); err != nil {
		b.Free()
		return nil, err
	}
	return b, nil
}

// out allocates n floats poisoned with a NaN pattern no kernel writes, so
// an unwritten output shows as a difference.
func (s *suite) out(n int) (*cuda.Buffer, error) {
	b, err := s.c.Alloc(uint64(max(n, 1)) * 4)
	if err != nil {
		return nil, err
	}
	if err := s.c.Fill32(nil, b.Ptr, 0x7fbadbad, uint64(max(n, 1))); err != nil {
		b.Free()
		return nil, err
	}
	return b, nil
}

// fetch waits for the device and downloads n floats.
func (s *suite) fetch(b *cuda.Buffer, n int) ([]float32, error) {
	if err := s.c.Synchronize(); err != nil {
		return nil, err
	}
	v := make([]float32, n)
	return v, s.c.Download(v, b)
}

// run uploads the inputs, runs f with their device addresses and an output
// of n floats, and returns the output.
func (s *suite) run(n int, ins [][]float32, f func(in []uint64, out uint64) error) ([]float32, error) {
	var bufs []*cuda.Buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	ptrs := make([]uint64, len(ins))
	for i, v := range ins {
		if v == nil {
			continue
		}
		b, err := s.dev(v)
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, b)
		ptrs[i] = b.Ptr
	}
	o, err := s.out(n)
	if err != nil {
		return nil, err
	}
	bufs = append(bufs, o)
	if err := f(ptrs, o.Ptr); err != nil {
		return nil, err
	}
	return s.fetch(o, n)
}

// timer times launches on its own stream with a pair of events.
type timer struct {
	st     *cuda.Stream
	e0, e1 *cuda.Event
}

func (s *suite) newTimer() (*timer, error) {
	t := &timer{}
	var err error
	if t.st, err = s.c.NewStream(); err != nil {
		return nil, err
	}
	if t.e0, err = s.c.NewEvent(); err == nil {
		t.e1, err = s.c.NewEvent()
	}
	if err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// time returns the milliseconds that f's launches on t.st take.
func (t *timer) time(f func() error) (float64, error) {
	if err := t.e0.Record(t.st); err != nil {
		return 0, err
	}
	if err := f(); err != nil {
		return 0, err
	}
	if err := t.e1.Record(t.st); err != nil {
		return 0, err
	}
	return t.e0.Elapsed(t.e1)
}

func (t *timer) close() {
	t.e0.Destroy()
	t.e1.Destroy()
	t.st.Destroy()
}

func median(v []float64) float64 {
	w := append([]float64{}, v...)
	sort.Float64s(w)
	return w[len(w)/2]
}
