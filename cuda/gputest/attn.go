package gputest

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/vouchml/vouch/bench"
	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/attn"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/cuda/mma"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// AttnConfig is the fused attention's device check (issue 19, BERT): the
// kernel on attn.Cases against attn.Reference (bits), a row alone against
// the same row in a batch of 64, runs; then Models built as fast plans
// twice, with their Attention layers exact and fused, each checked and
// timed as the fast suite does (row 0 alone vs in Batches, Runs runs,
// lanes, the CPU emulation at batch 1, the accuracy against the exact
// plan, BenchBatches timed), and the exact plan timed.
type AttnConfig struct {
	Driver, NVRTC string
	Device        int
	Models        []string
	Batches       []int
	BenchBatches  []int
	Runs          int
	Record        string // where the kernel cases' output digests are written ("": not)
	// Wait is how long a model file that does not exist yet is waited
	// for (one being exported beside the check).
	Wait time.Duration
	// SkipExact leaves out the exact plan's timing.
	SkipExact bool
}

// RunAttn runs the check on cfg.Device.
func RunAttn(cfg AttnConfig, w io.Writer) (*FastReport, error) {
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
	fmt.Fprintf(w, "attn: NVRTC %s compiled %s for %s in %.1f s\n", img.NVRTC, img.Source, img.Arch, time.Since(t0).Seconds())
	e, err := exact.Load(c, img)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	for _, k := range kernels.FastAttnKernels {
		f, err := e.Mod.Function(k)
		if err != nil {
			return nil, err
		}
		if a, err := f.Attrs(); err == nil {
			fmt.Fprintf(w, "kernel %-18s %3d registers, %5d B shared, %d B local\n", k, a.Registers, a.SharedBytes, a.LocalBytes)
		}
	}
	s := &fastSuite{cfg: FastConfig{Device: cfg.Device, Batches: cfg.Batches, BenchBatches: cfg.BenchBatches, Runs: cfg.Runs},
		w: w, drv: d, c: c, e: e, img: img, r: rand.New(rand.NewSource(23)), rep: &FastReport{},
		env: engine.Env{Device: c.Info, Release: d.Release(), NVRTC: img.NVRTC}}
	if err := s.attnKernels(cfg.Record); err != nil {
		return s.rep, err
	}
	for _, m := range cfg.Models {
		for end := time.Now().Add(cfg.Wait); time.Now().Before(end); time.Sleep(time.Second) {
			if _, err := os.Stat(m); err == nil {
				break
			}
		}
		if err := s.attnModel(m, !cfg.SkipExact); err != nil {
			return s.rep, err
		}
	}
	return s.rep, nil
}

// launchAttn runs case c's kernel on the device operands.
func (s *fastSuite) launchAttn(st *cuda.Stream, c attn.Case, q, kt, v, m, y uint64) error {
	f, err := s.e.Mod.Function(c.Kernel())
	if err != nil {
		return err
	}
	g := c.G
	args := (&cuda.Args{}).Ptr(q).Ptr(kt).Ptr(v).Ptr(m).Ptr(y).I32(int32(g.S)).I32(int32(g.H)).I32(int32(c.Op)).F32(c.Scale).
		I64(int64(g.MB)).I64(int64(g.MH)).I64(int64(g.MI)).I64(int64(g.MJ)).Struct(attn.Contiguous(g).Words()...)
	return f.Launch(st, cuda.D3(uint32((g.S+kernels.FastAttnBQ-1)/kernels.FastAttnBQ), uint32(g.H), uint32(g.B)), cuda.D3(kernels.FastAttnThreads, 1, 1), 0, args)
}

// runAttnCase uploads c, launches it and returns y.
func (s *fastSuite) runAttnCase(c attn.Case) ([]float32, error) {
	var bufs []*cuda.Buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	up := func(v []float32) (uint64, error) {
		if v == nil {
			return 0, nil
		}
		b, err := s.upload(v)
		if err != nil {
			return 0, err
		}
		bufs = append(bufs, b)
		return b.Ptr, nil
	}
	var p [4]uint64
	for i, v := range [][]float32{c.Q, c.Kt, c.V, c.M} {
		var err error
		if p[i], err = up(v); err != nil {
			return nil, err
		}
	}
	y, err := s.c.Alloc(uint64(len(c.Q)) * 4)
	if err != nil {
		return nil, err
	}
	bufs = append(bufs, y)
	if err := s.launchAttn(nil, c, p[0], p[1], p[2], p[3], y.Ptr); err != nil {
		return nil, err
	}
	out := make([]float32, len(c.Q))
	if err := s.c.Synchronize(); err != nil {
		return nil, err
	}
	return out, s.c.Download(out, y)
}

// attnKernels checks the kernel on attn.Cases(19) against Reference, a
// BERT-base row alone against the same row in a batch of 64, and repeated
// runs; it times BERT-base's shape at batch 1 and 64 and writes the cases'
// digests to record.
func (s *fastSuite) attnKernels(record string) error {
	var rec strings.Builder
	fmt.Fprintf(&rec, "# fast_attn.cu sha256 %s on %s (%s); attn.Cases(19): case kernel sha256-of-output\n", kernels.FastAttnDigest(), s.c.Info.Name, s.c.Info.Arch())
	for i, c := range attn.Cases(19) {
		f := mma.FP16
		if c.BF {
			f = mma.BF16
		}
		m, ok := mma.ModelFor(s.c.Info.Arch(), f)
		got, err := s.runAttnCase(c)
		if err != nil {
			return fmt.Errorf("attention case %v: %w", c, err)
		}
		fmt.Fprintf(&rec, "%d %s %s\n", i, c.Kernel(), attn.Digest(got))
		if !ok {
			fmt.Fprintf(s.w, "attention case %v: no tensor-core model for %s\n", c, s.c.Info.Arch())
			continue
		}
		want, err := attn.Reference(m, f, c.G, c.Q, c.Kt, c.V, c.M, c.Op, c.Scale)
		if err != nil {
			return err
		}
		s.same(fmt.Sprintf("attention kernel %v == attn.Reference", c), got, want)
	}
	// BERT-base: batch 64 of 12 heads; row 0 alone (batch 1) must be the
	// batch's first 12 heads, bit for bit; 20 runs the same.
	r := rand.New(rand.NewSource(64))
	big := attn.Random(r, false, 64, 12, 128, 64, attn.DivScale, 8, []int{64, 1, 1, 128}, false)
	one := big
	n1 := 12 * 128 * 64
	one.Q, one.Kt, one.V, one.M = big.Q[:n1], big.Kt[:n1], big.V[:n1], big.M[:128]
	one.G.B = 1
	yb, err := s.runAttnCase(big)
	if err != nil {
		return err
	}
	y1, err := s.runAttnCase(one)
	if err != nil {
		return err
	}
	s.same("attention kernel: BERT-base row 0 alone == in a batch of 64", y1, yb[:n1])
	for i := 0; i < 20; i++ {
		again, err := s.runAttnCase(big)
		if err != nil {
			return err
		}
		if i == 0 || i == 19 {
			s.same(fmt.Sprintf("attention kernel: BERT-base batch 64, run %d == run 0", i+1), again, yb)
		} else {
			for j := range again {
				if math.Float32bits(again[j]) != math.Float32bits(yb[j]) {
					s.fail("attention kernel: batch 64 run %d differs at %d", i+1, j)
					break
				}
			}
		}
	}
	if err := s.timeAttn(big, one); err != nil {
		return err
	}
	if record != "" {
		if err := os.WriteFile(record, []byte(rec.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// timeAttn times the kernel on cases (medians of 20 after 3).
func (s *fastSuite) timeAttn(cases ...attn.Case) error {
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
	for _, c := range cases {
		var bufs []*cuda.Buffer
		var p [5]uint64
		for i, v := range [][]float32{c.Q, c.Kt, c.V, c.M, c.Q} {
			if v == nil {
				continue // no mask: a null pointer
			}
			b, err := s.upload(v)
			if err != nil {
				return err
			}
			bufs = append(bufs, b)
			p[i] = b.Ptr
		}
		var ms []float64
		for i := 0; i < 23; i++ {
			if err := e0.Record(st); err != nil {
				return err
			}
			if err := s.launchAttn(st, c, p[0], p[1], p[2], p[3], p[4]); err != nil {
				return err
			}
			if err := e1.Record(st); err != nil {
				return err
			}
			v, err := e0.Elapsed(e1)
			if err != nil {
				return err
			}
			if i >= 3 {
				ms = append(ms, v)
			}
		}
		for _, b := range bufs {
			b.Free()
		}
		fmt.Fprintf(s.w, "time attention %v: %.4f ms (one layer's 12 heads x batch)\n", c, median(ms))
	}
	return nil
}

// attnModel builds path's fast fp16 plan (fused attention, staged
// LayerNorm, the MatMuls' bias and residual in their epilogue) and checks
// and times it as the fast suite does; builds it again with those Adds as
// the seventh session's exact passes after the product (the same
// arithmetic: its outputs must be the plan's, bit for bit, at every timed
// batch), times that; profiles both (profileModel); times the exact plan
// when exactTime.
func (s *fastSuite) attnModel(path string, exactTime bool) error {
	name, _, res, err := s.compileModel(path)
	if err != nil {
		return err
	}
	mk := func(sec plan.GPU) (*plan.Plan, error) {
		b, err := plan.AddGPU(res.Plan, sec, s.img.Encode())
		if err != nil {
			return nil, err
		}
		return plan.Decode(b)
	}
	dev := exec.Options{Device: fmt.Sprintf("cuda:%d", s.cfg.Device)}
	ep, err := mk(engine.Section(res.Graph, res.Graph.Types, s.img, s.env))
	if err != nil {
		return err
	}
	exactE, err := exec.NewPlanEngine(ep, builtin.Registry(), dev)
	if err != nil {
		return fmt.Errorf("%s exact: %w", name, err)
	}
	defer exactE.Close()
	ctx := context.Background()
	s.cfg.BenchModels = []string{name}
	sec, notes := engine.FastSection(res.Graph, res.Graph.Types, s.img, s.env, engine.FastOptions{Precision: plan.FP16})
	old := sec
	old.Layers = slices.Clone(sec.Layers)
	nepi := 0
	for i := range old.Layers {
		if old.Layers[i].Kernel == engine.FoldKernel {
			old.Layers[i].Kernel = kernels.Copy // the folded moves copy again
			nepi++
		} else if k := exactPasses(old.Layers[i].Kernel); k != old.Layers[i].Kernel {
			old.Layers[i].Kernel = k
			nepi++
		}
	}
	// The timed batches' outputs of the plan, for the other variants and
	// the profiles.
	outs := map[int]map[string]*tensor.Tensor{}
	type variant struct {
		label string
		sec   plan.GPU
		full  bool
	}
	vs := []variant{
		{"fp16 (fused attention, staged LayerNorm, MatMul epilogue with GELU, moves folded)", sec, true},
		{"fp16 seventh session (MatMul bias, residual, GELU as exact passes; Split, Transposes copy)", old, false},
	}
	// Every fast MatMul on one other tile: the same chains (the bits must
	// not change), each layer's time per tile for a shape-only tile rule.
	for _, tl := range []string{"64x64", "64x32"} {
		v := variant{label: "fp16 every MatMul on tile " + tl, sec: sec}
		v.sec.Layers = slices.Clone(sec.Layers)
		for i, l := range v.sec.Layers {
			if rest, ok := strings.CutPrefix(l.Kernel, "fast.fp16.matmul("); ok {
				if _, after, ok := strings.Cut(rest, ")"); ok {
					v.sec.Layers[i].Kernel = "fast.fp16.matmul(" + tl + ")" + after
				}
			}
		}
		vs = append(vs, v)
	}
	for _, v := range vs {
		nfast, nattn, nln := 0, 0, 0
		for _, l := range v.sec.Layers {
			if l.Kernel == kernels.FastLayerNorm {
				nln++
			}
			if strings.HasPrefix(l.Kernel, "fast.") {
				nfast++
			}
			if strings.Contains(l.Kernel, ".attention(") {
				nattn++
			}
		}
		fmt.Fprintf(s.w, "model %s %s: %d of %d layers fast (%d fused attention), %d on %s, mode %s; %d notes; %d MatMul epilogues and folded moves\n", name, v.label, nfast, len(v.sec.Layers), nattn, nln, kernels.FastLayerNorm, v.sec.Mode, len(notes), nepi)
		p, err := mk(v.sec)
		if err != nil {
			return err
		}
		fmt.Fprintf(s.w, "model %s %s: plan precision %s\n", name, v.label, p.Precision())
		fe, err := exec.NewPlanEngine(p, builtin.Registry(), dev)
		if err != nil {
			return fmt.Errorf("%s %s: %w", name, v.label, err)
		}
		if v.full {
			if err := s.modelChecks(ctx, name, v.label, p, fe, exactE); err != nil {
				fe.Close()
				return err
			}
		}
		for _, b := range s.cfg.BenchBatches {
			in, err := bench.Inputs(p.Graph, bench.Shape{Batch: b}, 1)
			if err != nil {
				continue
			}
			o, err := fe.Run(ctx, in)
			if err != nil {
				s.fail("model %s %s batch %d: %v", name, v.label, b, err)
				continue
			}
			if outs[b] == nil {
				outs[b] = o
				continue
			}
			for k, t := range outs[b] {
				if f, ok := t.Data.([]float32); ok {
					s.same(fmt.Sprintf("model %s %s batch %d: output %s == the MatMul-epilogue plan's", name, v.label, b, k), o[k].Data.([]float32), f)
				}
			}
		}
		s.timeModel(ctx, name+" "+v.label, p, fe)
		fe.Close()
		s.profileModel(ctx, name+" "+v.label, p, outs)
	}
	if exactTime {
		s.timeModel(ctx, name+" exact", ep, exactE)
	}
	return nil
}

// exactPasses names a fast MatMul kernel's epilogue Adds and GELU
// ("+epilogue(bias,res)", "+epilogue(bias,gelu)") as the exact passes that
// compute the same (vx_channel_affine by ones, vx_add, vx_unary(Gelu none)):
// the plan before the epilogue.
func exactPasses(k string) string {
	i := strings.Index(k, "+epilogue(")
	if i < 0 {
		return k
	}
	j := strings.Index(k[i:], ")")
	if j < 0 {
		return k
	}
	ps := ""
	for _, e := range strings.Split(k[i+len("+epilogue("):i+j], ",") {
		ps += "+" + map[string]string{"bias": kernels.Affine, "res": kernels.Add, "gelu": kernels.Unary + "(Gelu none)"}[e]
	}
	return k[:i] + ps + k[i+j+1:]
}
