package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// The int8 zoo run (`vouch bench --zoo DIR --int8`) builds each of the
// zoo's CNNs twice, at fp32 and with --precision int8, and times the two
// plans alternately on the model's reference input. Calibration uses
// seeded standard-normal inputs of the model's input shape (the zoo's
// reference inputs are drawn the same way, torch.randn); the build's own
// evaluation, on other seeded inputs, puts the top-1 agreement in the
// build report, and the run adds the agreement of the class (or, for a
// segmentation map, per-pixel class) argmax on the reference input and
// the largest |int8 - fp32| over the first output; the int8 plan must give
// the same bits at 2 threads and at the AVX2 level.

// ZooInt8Row is one model's line of the int8 table.
type ZooInt8Row struct {
	Model  string    `json:"model"`
	Status ZooStatus `json:"status"`
	Reason string    `json:"reason,omitempty"`
	// Weighted is the number of weighted layers the precision pass saw,
	// Int8 the number of int8 layers of the int8 plan.
	Weighted int `json:"weighted_layers"`
	Int8     int `json:"int8_layers"`
	// Chains is compile.Int8Chains' summary of the int8 plan: the int8
	// outputs that only int8 layers read with one scale (which could pass
	// as u8), of all int8 outputs, and why the others cannot.
	Chains string `json:"int8_chains,omitempty"`
	// KeptFP32 counts the reasons the int8 build kept layers at fp32.
	KeptFP32 map[string]int `json:"kept_fp32,omitempty"`
	Runs     int            `json:"runs,omitempty"`
	FP32     time.Duration  `json:"fp32_median_ns,omitempty"`
	Q8       time.Duration  `json:"int8_median_ns,omitempty"`
	// Speedup is FP32/Q8.
	Speedup float64 `json:"speedup,omitempty"`
	// ReportAgreement is the build report's top-1 agreement (percent) on
	// the evaluation inputs, ReportSamples their number.
	ReportAgreement float64 `json:"report_top1_agreement"`
	ReportSamples   int     `json:"report_samples"`
	// RefAgreement is the argmax agreement (percent) on the reference
	// input over the class axis (one position for a classifier, every
	// pixel for a segmentation map).
	RefAgreement float64 `json:"ref_top1_agreement"`
	// MaxAbsErr and MaxAbs are max|int8 - fp32| and max|fp32| over the
	// first output on the reference input.
	MaxAbsErr float64 `json:"max_abs_err"`
	MaxAbs    float64 `json:"max_abs"`
	// AVX2Bits: the int8 plan gave the same bits at the AVX2 level (1
	// thread) as at this CPU's best.
	AVX2Bits bool `json:"avx2_bits"`
}

// ZooInt8Command is `vouch bench --zoo DIR --int8 [MODEL...]`.
type ZooInt8Command struct {
	Dir     string
	Only    []string
	Threads int
	Runs    int // most timed runs per plan
	Warmup  int
	// Calib and Eval are the numbers of seeded calibration and evaluation
	// inputs (defaults 8 and 16).
	Calib, Eval int
	// WeightBits is the int8 plans' weight width (compile's
	// QuantOptions.WeightBits: 0 or 8, or 7).
	WeightBits int
	JSON       bool
	Stdout     io.Writer
	Stderr     io.Writer
}

// IsZooCNN reports whether g is one of the zoo's CNNs: at least two 2-D
// convolutions (4-D weights). The 1-D CNNs have no int8 kernel, and a
// transformer's patch embedding is its only convolution.
func IsZooCNN(g *ir.Graph) bool {
	n := 0
	for _, nd := range g.Nodes {
		if nd.OpType != "Conv" || len(nd.Inputs) < 2 {
			continue
		}
		if w, ok := g.Initializers[nd.Inputs[1]]; ok && len(w.Shape) == 4 {
			n++
		}
	}
	return n >= 2
}

// Run builds and times every selected model and prints the table.
func (c ZooInt8Command) Run(ctx context.Context) error {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(c.Threads, 1)))
	if c.Runs < 1 {
		c.Runs = 20
	}
	if c.Calib < 1 {
		c.Calib = 8
	}
	if c.Eval < 1 {
		c.Eval = 16
	}
	names := c.Only
	all := len(names) == 0
	if all {
		var err error
		if names, err = ZooModels(c.Dir); err != nil {
			return err
		}
	}
	start := time.Now()
	var rows []ZooInt8Row
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		row, cnn := c.model(ctx, name, all)
		if !cnn {
			continue
		}
		if c.Stderr != nil {
			fmt.Fprintf(c.Stderr, "zoo int8: %-30s %-8s fp32 %s ms, int8 %s ms, speed-up %s, int8 layers %d/%d %s\n",
				row.Model, row.Status, zooMS(row.FP32), zooMS(row.Q8), ratio(row.Speedup), row.Int8, row.Weighted, cell(row.Reason))
		}
		rows = append(rows, row)
	}
	geo, n := int8Geomean(rows)
	if c.JSON {
		b, err := json.MarshalIndent(map[string]any{"dir": c.Dir, "threads": max(c.Threads, 1), "date": start.UTC().Format(time.RFC3339),
			"calib_samples": c.Calib, "eval_samples": c.Eval, "weight_bits": c.bits(), "rows": rows, "geomean_speedup": geo, "compared": n}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.Stdout, "%s\n", b)
		return err
	}
	fmt.Fprintf(c.Stdout, "zoo %s int8 (%d-bit weights) vs fp32: %d threads, %d calibration and %d evaluation inputs (seeded N(0,1)) (run %s, took %v)\n\n",
		c.Dir, c.bits(), max(c.Threads, 1), c.Calib, c.Eval, start.UTC().Format("2006-01-02 15:04 UTC"), time.Since(start).Round(time.Second))
	return writeInt8Table(c.Stdout, rows, geo, n)
}

// bits is the int8 plans' weight width, 7 or 8.
func (c ZooInt8Command) bits() int {
	if c.WeightBits == 7 {
		return 7
	}
	return 8
}

func int8Geomean(rows []ZooInt8Row) (float64, int) {
	var s float64
	n := 0
	for _, r := range rows {
		if r.Status == ZooOK && r.Speedup > 0 {
			s += math.Log(r.Speedup)
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return math.Exp(s / float64(n)), n
}

func writeInt8Table(w io.Writer, rows []ZooInt8Row, geo float64, n int) error {
	var b strings.Builder
	b.WriteString("| model | int8 layers | fp32 ms | int8 ms | speed-up | top-1 agreement (report, n) | ref argmax agreement | max abs err / max abs | avx2 bits | int8 chains | kept fp32 | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		var kept []string
		for _, k := range sortedKeys(r.KeptFP32) {
			kept = append(kept, fmt.Sprintf("%d: %s", r.KeptFP32[k], k))
		}
		note := ""
		if r.Status != ZooOK {
			note = string(r.Status) + ": " + r.Reason
		}
		avx2 := "same"
		if !r.AVX2Bits {
			avx2 = "—"
		}
		fmt.Fprintf(&b, "| %s | %d/%d | %s | %s | %s | %.0f%% (%d) | %.1f%% | %.2g / %.2g | %s | %s | %s | %s |\n", r.Model, r.Int8, r.Weighted,
			zooMS(r.FP32), zooMS(r.Q8), ratio(r.Speedup), r.ReportAgreement, r.ReportSamples, r.RefAgreement, r.MaxAbsErr, r.MaxAbs,
			avx2, cell(r.Chains), cell(strings.Join(kept, "; ")), cell(note))
	}
	fmt.Fprintf(&b, "\n%d models, %d timed: geometric mean speed-up int8/fp32 %.2f×\n", len(rows), n, geo)
	_, err := io.WriteString(w, b.String())
	return err
}

func sortedKeys(m map[string]int) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	for i := range k {
		for j := i + 1; j < len(k); j++ {
			if k[j] < k[i] {
				k[i], k[j] = k[j], k[i]
			}
		}
	}
	return k
}

// model measures one model; cnn is false when all is set and the model is
// not a CNN (it is then skipped).
func (c ZooInt8Command) model(ctx context.Context, name string, all bool) (row ZooInt8Row, cnn bool) {
	row = ZooInt8Row{Model: name, Status: ZooFailed}
	cnn = true
	defer func() {
		if p := recover(); p != nil {
			row.Status, row.Reason = ZooFailed, fmt.Sprintf("panic: %v", p)
		}
	}()
	dir := filepath.Join(c.Dir, name)
	src, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
	if err != nil {
		row.Reason = err.Error()
		return row, true
	}
	decode := func() (*ir.Model, error) { return onnx.Decode(src, dir) }
	om, err := decode()
	if err != nil {
		row.Reason = "decode: " + err.Error()
		return row, true
	}
	if all && !IsZooCNN(om.Graph) {
		return row, false
	}
	if len(om.Graph.Inputs) != 1 {
		row.Reason = "int8 calibration feeds one input"
		return row, true
	}
	in, _, err := onnx.DecodeTensorFile(filepath.Join(dir, "test_data_set_0", "input_0.pb"))
	if err != nil || in.DType != tensor.Float32 {
		row.Reason = fmt.Sprintf("reference input: %v (want float32)", err)
		return row, true
	}
	rng := rand.New(rand.NewPCG(1, 16))
	normal := func(n int) []*tensor.Tensor {
		out := make([]*tensor.Tensor, n)
		for i := range out {
			v := make([]float32, in.Len())
			for j := range v {
				v[j] = float32(rng.NormFloat64())
			}
			out[i] = tensor.From(v, in.Shape...)
		}
		return out
	}
	fo := compile.DefaultOptions()
	p32, _, err := buildPlan(decode, src, name, fo)
	if err != nil {
		row.Reason = "fp32 build: " + err.Error()
		return row, true
	}
	qo := compile.DefaultOptions()
	qo.Precision = "int8"
	qo.Quant.Calib = normal(c.Calib)
	qo.Quant.EvalData = normal(c.Eval)
	qo.Quant.WeightBits = c.WeightBits
	p8, rep, err := buildPlan(decode, src, name, qo)
	if err != nil {
		row.Reason = "int8 build: " + err.Error()
		return row, true
	}
	for _, n := range p8.Graph.Nodes {
		if n.Domain == fused.Domain && n.OpType == fused.OpQ8 {
			row.Int8++
		}
	}
	row.Chains = compile.Int8Chains(p8.Graph).Summary()
	if pr := rep.Precision; pr != nil {
		row.Weighted = len(pr.Layers)
		for _, l := range pr.Layers {
			if l.Precision == "fp32" && l.Reason != "" {
				if row.KeptFP32 == nil {
					row.KeptFP32 = map[string]int{}
				}
				row.KeptFP32[l.Reason]++
			}
		}
		if pr.Accuracy != nil {
			row.ReportAgreement, row.ReportSamples = pr.Accuracy.Agreement, pr.Accuracy.Samples
		}
	}
	e32, o32, err := bindRun(p32, in)
	if err != nil {
		row.Reason = "fp32 run: " + err.Error()
		return row, true
	}
	e8, o8, err := bindRun(p8, in)
	if err != nil {
		row.Reason = "int8 run: " + err.Error()
		return row, true
	}
	row.RefAgreement, row.MaxAbsErr, row.MaxAbs = compareOutputs(o32, o8)
	row.Status = ZooOK
	if why := threadBits(p8.Graph, [][]int{in.Shape}, []*tensor.Tensor{in}, []*tensor.Tensor{o8}, 2); why != "" {
		row.Status, row.Reason = ZooMismatch, "int8 plan "+why
	}
	// The int8 plan at the AVX2 level (no VNNI: the int16 GEMM instead of
	// the VPDPBUSD tiles) must give the bits of the run above.
	if why := isaBits(p8.Graph, in, o8, kernel.ISAAVX2); why != "" {
		row.Status, row.Reason = ZooMismatch, joinReason(row.Reason, "int8 plan "+why)
	} else {
		row.AVX2Bits = true
	}
	row.Runs = c.Runs
	res, err := Compare(ctx, []Engine{e32, e8}, Options{Runs: c.Runs, Warmup: c.Warmup})
	if err != nil {
		row.Status, row.Reason = ZooFailed, err.Error()
		return row, true
	}
	row.FP32, row.Q8 = res[0].Summary.Median, res[1].Summary.Median
	if row.Q8 > 0 {
		row.Speedup = float64(row.FP32) / float64(row.Q8)
	}
	return row, true
}

func buildPlan(decode func() (*ir.Model, error), src []byte, name string, o compile.Options) (*plan.Plan, buildlog.Report, error) {
	om, err := decode()
	if err != nil {
		return nil, buildlog.Report{}, err
	}
	res, err := compile.Build(om, src, name, "vouch bench --zoo --int8", o, builtin.Registry(), buildlog.New(nil))
	if err != nil {
		return nil, buildlog.Report{}, err
	}
	p, err := plan.Decode(res.Plan)
	return p, res.Report, err
}

// bindRun binds p to in's shape and runs it once; the engine times it.
func bindRun(p *plan.Plan, in *tensor.Tensor) (Engine, *tensor.Tensor, error) {
	ex, err := exec.New(p.Graph, builtin.Registry())
	if err != nil {
		return nil, nil, err
	}
	b, err := ex.Bind([][]int{in.Shape})
	if err != nil {
		return nil, nil, err
	}
	out, err := b.Execute([]*tensor.Tensor{in})
	if err != nil {
		return nil, nil, err
	}
	return &vouchEngine{b: b, inputs: []*tensor.Tensor{in}}, out[0], nil
}

// isaBits runs g at level l on one thread and says how its first output
// differs from want ("" when the bits are the same).
func isaBits(g *ir.Graph, in, want *tensor.Tensor, l kernel.ISA) string {
	ex, err := exec.New(g, builtin.Registry())
	if err == nil {
		err = ex.SetCPU(exec.CPU{ISA: l, Threads: 1})
	}
	var b *exec.Bound
	if err == nil {
		b, err = ex.Bind([][]int{in.Shape})
	}
	var got []*tensor.Tensor
	if err == nil {
		got, err = b.Execute([]*tensor.Tensor{in})
	}
	if err != nil {
		return fmt.Sprintf("at %v: %v", l, err)
	}
	if !sameBits(got[0], want) {
		return fmt.Sprintf("differs at %v", l)
	}
	return ""
}

// compareOutputs returns the argmax agreement over axis 1 (percent of the
// positions), max|b - a| and max|a| of two float32 outputs.
func compareOutputs(a, b *tensor.Tensor) (agree, maxErr, maxAbs float64) {
	ad, ok1 := a.Data.([]float32)
	bd, ok2 := b.Data.([]float32)
	if !ok1 || !ok2 || len(ad) != len(bd) || len(a.Shape) < 2 {
		return 0, math.Inf(1), 0
	}
	for i := range ad {
		maxErr = max(maxErr, math.Abs(float64(bd[i])-float64(ad[i])))
		maxAbs = max(maxAbs, math.Abs(float64(ad[i])))
	}
	n, ch := a.Shape[0], a.Shape[1]
	inner := len(ad) / max(n*ch, 1)
	same, total := 0, 0
	for s := 0; s < n; s++ {
		for p := 0; p < inner; p++ {
			base := s*ch*inner + p
			ia, ib := 0, 0
			for k := 1; k < ch; k++ {
				if ad[base+k*inner] > ad[base+ia*inner] {
					ia = k
				}
				if bd[base+k*inner] > bd[base+ib*inner] {
					ib = k
				}
			}
			total++
			if ia == ib {
				same++
			}
		}
	}
	return 100 * float64(same) / float64(max(total, 1)), maxErr, maxAbs
}
