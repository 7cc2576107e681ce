package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vouchml/vouch/bench"
	"github.com/vouchml/vouch/compile"
)

// BenchOptions are the settings of `vouch bench`.
type BenchOptions struct {
	Model   string
	Threads int
	Shape   bench.Shape
	Peers   []string
	Runs    int
	Warmup  int
	Seed    uint64
	JSON    bool
	Layers  bool
	ORTLib  string
	GEMM    []int // m, n, k: the GEMM microbenchmark instead of a model
	Device  string
}

func runBench(ctx context.Context, m *Main, args []string) error {
	o := BenchOptions{Threads: 1, Shape: bench.Shape{Batch: 1, Seq: 64}, Runs: 20, Warmup: 3, Seed: 1}
	fs := m.newFlagSet("bench", "bench MODEL.onnx|NAME.plan [--threads N] [--batch B] [--peer ort,gomlx] [--runs R] [--warmup W] [--json] [--layers]\n       vouch bench --gemm 512[xNxK] [--threads N]", `
Measures a model's latency in vouch and, with --peer, in ONNX Runtime 1.30
and onnx-gomlx, on the same seeded inputs: each engine warms up, then the
engines run alternately (rotating which goes first) and the median and p90
latencies are printed with the ratio vouch/peer (below 1: vouch is faster).

An ONNX model is compiled in memory first (as 'vouch build' would). Inputs
are generated from the model's input types: floats uniform in [-1,1),
input ids below min(vocab, 1000), attention masks all ones. --batch sets the
first dimension (a model exported at batch 1 is relaxed to a dynamic batch),
--seq every other dynamic dimension.

--threads sets GOMAXPROCS for vouch and GoMLX, and ORT's intra-op threads.
--layers also prints the plan's per-layer profile: kind, tactic, median time
and share of the total; with --peer ort, also ONNX Runtime's own per-node
profile (from a separate profiled session), to compare layer by layer. --gemm runs the GEMM microbenchmark instead, against
this core's measured FP32 FMA peak.

--zoo DIR runs every model of a zoo made by scripts/make-zoo.py against the
peer and prints the table of docs/benchmarks.md; with --int8 it compares each
CNN's int8 plan with its fp32 plan instead, and with --scaling it profiles
every model layer by layer at 1 and 2 threads and lists the layers that are
slower on 2 threads (issue 16's scaling check).

Peers are compiled in with build tags: -tags ort (cgo; the library comes from
scripts/fetch-ort.sh) and -tags gomlx. A peer that cannot run is reported as
unavailable with the reason.

Example:
  go build -tags ort,gomlx -o vouch ./cmd/vouch
  ./vouch bench ../shared/models/resnet18/model.onnx --peer ort --threads 1 \
      --ort-lib "$(scripts/fetch-ort.sh)"`)
	fs.IntVar(&o.Threads, "threads", o.Threads, "threads per engine (vouch: GOMAXPROCS; ORT: intra-op threads)")
	fs.IntVar(&o.Shape.Batch, "batch", o.Shape.Batch, "batch size (the inputs' first dimension)")
	fs.IntVar(&o.Shape.Seq, "seq", o.Shape.Seq, "size of the other dynamic input dimensions (sequence length)")
	peers := fs.String("peer", "", "comma-separated peers to compare with: "+strings.Join(bench.Peers, ", "))
	fs.IntVar(&o.Runs, "runs", o.Runs, "timed runs per engine")
	fs.IntVar(&o.Warmup, "warmup", o.Warmup, "untimed warm-up runs per engine")
	deviceFlag(fs, &o.Device)
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the generated inputs")
	fs.BoolVar(&o.JSON, "json", false, "print the results as JSON")
	fs.BoolVar(&o.Layers, "layers", false, "also print the plan's per-layer time profile")
	fs.StringVar(&o.ORTLib, "ort-lib", "", "path of libonnxruntime.so.1 (default: $VOUCH_ORT_LIB, then .cache/ort from scripts/fetch-ort.sh)")
	gemm := fs.String("gemm", "", "run the GEMM microbenchmark for M[xNxK] instead of a model")
	zoo := fs.String("zoo", "", "run every model of the zoo DIR (DIR/NAME/model.onnx + test_data_set_0, scripts/make-zoo.py) against the peer, check each against its reference, print the table; MODEL arguments pick models")
	wbits := fs.Int("int8-weight-bits", 8, "with --zoo --int8: the int8 plans' weight width, 8 or 7 (7: u8 x s7 tiles on AVX2 without VNNI)")
	int8 := fs.Bool("int8", false, "with --zoo: build each zoo CNN at fp32 and at --precision int8 (seeded calibration) and time the two plans alternately: speed-up, top-1 agreement, max error")
	scaling := fs.Bool("scaling", false, "with --zoo: profile every model layer by layer at 1 and 2 threads (alternating rounds; --runs per profile) and list the layers slower on 2 threads")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *zoo != "" && *scaling {
		return bench.ZooScalingCommand{Dir: *zoo, Only: pos, Runs: o.Runs, Warmup: o.Warmup, JSON: o.JSON, Stdout: m.Stdout, Stderr: m.Stderr}.Run(ctx)
	}
	if *scaling {
		return fmt.Errorf("%w: --scaling needs --zoo DIR", ErrUsage)
	}
	if *zoo != "" && *int8 {
		return bench.ZooInt8Command{Dir: *zoo, Only: pos, WeightBits: *wbits, Threads: o.Threads, Runs: o.Runs, Warmup: o.Warmup, JSON: o.JSON, Stdout: m.Stdout, Stderr: m.Stderr}.Run(ctx)
	}
	if *zoo != "" {
		return m.benchZoo(ctx, o, *zoo, *peers, pos)
	}
	if *gemm != "" {
		if len(pos) != 0 {
			return fmt.Errorf("%w: --gemm takes no MODEL", ErrUsage)
		}
		if o.GEMM, err = parseGEMM(*gemm); err != nil {
			return err
		}
	} else if len(pos) != 1 {
		return fmt.Errorf("%w: want exactly one MODEL argument, got %d", ErrUsage, len(pos))
	} else {
		o.Model = pos[0]
	}
	if o.Threads < 1 || o.Shape.Batch < 1 || o.Shape.Seq < 1 || o.Runs < 1 || o.Warmup < 0 {
		return fmt.Errorf("%w: --threads, --batch, --seq and --runs must be at least 1, --warmup at least 0", ErrUsage)
	}
	for _, p := range strings.Split(*peers, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		known := false
		for _, k := range bench.Peers {
			known = known || k == p
		}
		if !known {
			return fmt.Errorf("%w: unknown peer %q (known: %s)", ErrUsage, p, strings.Join(bench.Peers, ", "))
		}
		o.Peers = append(o.Peers, p)
	}
	if o.ORTLib == "" {
		o.ORTLib = defaultORTLib()
	}
	return m.bench(ctx, o)
}

func parseGEMM(s string) ([]int, error) {
	parts := strings.Split(s, "x")
	var d []int
	for _, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%w: --gemm %q: want M or MxNxK, positive integers", ErrUsage, s)
		}
		d = append(d, v)
	}
	switch len(d) {
	case 1:
		return []int{d[0], d[0], d[0]}, nil
	case 3:
		return d, nil
	}
	return nil, fmt.Errorf("%w: --gemm %q: want M or MxNxK", ErrUsage, s)
}

// defaultORTLib finds the library that scripts/fetch-ort.sh fetched.
func defaultORTLib() string {
	if p := os.Getenv("VOUCH_ORT_LIB"); p != "" {
		return p
	}
	const rel = ".cache/ort/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1"
	dir, err := os.Getwd()
	for err == nil {
		if _, serr := os.Stat(filepath.Join(dir, rel)); serr == nil {
			return filepath.Join(dir, rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return ""
}

// benchReport is the --json output.
type benchReport struct {
	Model       string             `json:"model,omitempty"`
	PlanDigest  string             `json:"plan_sha256,omitempty"`
	Batch       int                `json:"batch,omitempty"`
	Seq         int                `json:"seq,omitempty"`
	Threads     int                `json:"threads"`
	Runs        int                `json:"runs"`
	Warmup      int                `json:"warmup"`
	Date        string             `json:"date"`
	CPU         string             `json:"cpu,omitempty"`
	Results     []bench.Result     `json:"results,omitempty"`
	Ratios      map[string]float64 `json:"ratio_vouch_over,omitempty"`
	Unavailable map[string]string  `json:"unavailable,omitempty"`
	Layers      []bench.Layer      `json:"layers,omitempty"`
	ORTLayers   []bench.PeerLayer  `json:"ort_layers,omitempty"`
	GEMM        *gemmReport        `json:"gemm,omitempty"`
}

type gemmReport struct {
	M, N, K     int
	Median      time.Duration `json:"median_ns"`
	GFLOPs      float64       `json:"gflops"`
	PeakGFLOPs  float64       `json:"peak_gflops_one_core"`
	ShareOfPeak float64       `json:"share_of_one_core_peak"`
}

func (m *Main) bench(ctx context.Context, o BenchOptions) error {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.Threads))
	rep := benchReport{Threads: o.Threads, Runs: o.Runs, Warmup: o.Warmup, Date: time.Now().UTC().Format(time.RFC3339), CPU: cpuModel()}
	if o.GEMM != nil {
		return m.benchGEMM(o, rep)
	}
	start := time.Now()
	model, err := bench.Load(o.Model, o.Shape, o.Seed, compile.DefaultOptions())
	if err != nil {
		return err
	}
	rep.Model, rep.Batch, rep.Seq = model.Name, o.Shape.Batch, o.Shape.Seq
	if model.Plan != nil {
		rep.PlanDigest = planDigest(o.Model, model)
	}
	loaded := time.Since(start)
	vouch, err := benchEngine(model, o.Device, m.Stdout)
	if err != nil {
		return err
	}
	engines := []bench.Engine{vouch}
	rep.Unavailable = map[string]string{}
	for _, p := range o.Peers {
		e, err := bench.NewPeer(p, model, bench.PeerConfig{Threads: o.Threads, ORTLib: o.ORTLib})
		if errors.Is(err, bench.ErrUnavailable) {
			rep.Unavailable[p] = strings.TrimPrefix(err.Error(), "bench: peer "+p+": ")
			continue
		}
		if err != nil {
			return err
		}
		defer e.Close()
		engines = append(engines, e)
	}
	rep.Results, err = bench.Compare(ctx, engines, bench.Options{Runs: o.Runs, Warmup: o.Warmup})
	if err != nil {
		return err
	}
	rep.Ratios = map[string]float64{}
	for _, r := range rep.Results[1:] {
		rep.Ratios[r.Engine] = bench.Ratio(rep.Results[0].Summary.Median, r.Summary.Median)
	}
	if o.Layers {
		if rep.Layers, err = bench.Profile(ctx, model.Plan, model.Inputs, bench.Options{Runs: o.Runs, Warmup: 1}); err != nil {
			return err
		}
		if _, unavailable := rep.Unavailable["ort"]; slices.Contains(o.Peers, "ort") && !unavailable {
			// ORT's own per-node profile, from a separate profiled
			// session after the timed runs.
			if rep.ORTLayers, err = bench.ProfileORT(model, bench.PeerConfig{Threads: o.Threads, ORTLib: o.ORTLib}, bench.Options{Runs: o.Runs, Warmup: 3}); err != nil {
				return err
			}
		}
	}
	if o.JSON {
		return m.printJSONReport(rep)
	}
	what := "plan"
	if model.Built {
		what = fmt.Sprintf("built in memory in %v", loaded.Round(time.Millisecond))
	}
	fmt.Fprintf(m.Stdout, "model   %s (%s)\ninputs  %s\nthreads %d, %d runs per engine after %d warm-up, alternating\n\n", model.Name, what, describeInputs(model), o.Threads, o.Runs, o.Warmup)
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "engine\tmedian\tp90\tmin\tvouch/engine")
	for i, r := range rep.Results {
		ratio := "—"
		if i > 0 {
			ratio = fmt.Sprintf("%.2f", rep.Ratios[r.Engine])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Engine, bench.FormatDuration(r.Summary.Median), bench.FormatDuration(r.Summary.P90), bench.FormatDuration(r.Summary.Min), ratio)
	}
	for _, p := range o.Peers {
		if why, ok := rep.Unavailable[p]; ok {
			fmt.Fprintf(tw, "%s\t%s\n", p, why)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.Layers {
		m.printLayers(rep.Layers)
		if rep.ORTLayers != nil {
			m.printPeerLayers("ONNX Runtime", rep.ORTLayers)
		}
	}
	return nil
}

// printPeerLayers prints a peer's own per-node profile.
func (m *Main) printPeerLayers(peer string, layers []bench.PeerLayer) {
	var total time.Duration
	for _, l := range layers {
		total += l.Median
	}
	fmt.Fprintf(m.Stdout, "\n%s per-node profile (its optimised graph, its own profiler; median of each node; sum %s)\n", peer, bench.FormatDuration(total))
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tnode\top\tmedian\tshare")
	for i, l := range layers {
		share := 0.0
		if total > 0 {
			share = 100 * float64(l.Median) / float64(total)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.1f%%\n", i, l.Name, l.Kind, bench.FormatDuration(l.Median), share)
	}
	tw.Flush()
}

func describeInputs(model *bench.Model) string {
	var parts []string
	for _, v := range model.Plan.Graph.Inputs {
		parts = append(parts, v.Name+" "+model.Inputs[v.Name].String())
	}
	return strings.Join(parts, ", ")
}

func planDigest(path string, model *bench.Model) string {
	if model.Built {
		return "" // built in memory: the digest of an unsaved plan helps no one
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (m *Main) printLayers(layers []bench.Layer) {
	var total time.Duration
	for _, l := range layers {
		if !l.Part {
			total += l.Median
		}
	}
	fmt.Fprintf(m.Stdout, "\nper-layer profile (median of each layer; sum %s; ↳ a part of the layer above, timed inside it)\n", bench.FormatDuration(total))
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tlayer\tkind\ttactic\tmedian\tshare\tGFLOP/s")
	for i, l := range layers {
		gf := ""
		if g := l.GFLOPs(); g > 0 {
			gf = fmt.Sprintf("%.1f", g)
		}
		name := l.Name
		if l.Part {
			name = "  ↳ " + name
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.1f%%\t%s\n", i, name, l.Kind, l.Tactic, bench.FormatDuration(l.Median), 100*l.Share, gf)
	}
	_ = tw.Flush()
	fmt.Fprintf(m.Stdout, "\nby kind\n")
	tw = tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "kind\tlayers\ttime\tshare")
	for _, k := range bench.ByKind(layers) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f%%\n", k.Kind, k.Layers, bench.FormatDuration(k.Time), 100*k.Share)
	}
	_ = tw.Flush()
}

func (m *Main) benchGEMM(o BenchOptions, rep benchReport) error {
	r, err := bench.GEMM(o.GEMM[0], o.GEMM[1], o.GEMM[2], o.Warmup, o.Runs)
	if err != nil {
		return err
	}
	peak := bench.PeakFMA(200*time.Millisecond, 5)
	g := &gemmReport{M: r.M, N: r.N, K: r.K, Median: r.Summary.Median, GFLOPs: r.GFLOPs, PeakGFLOPs: peak}
	if peak > 0 {
		g.ShareOfPeak = r.GFLOPs / peak
	}
	rep.GEMM = g
	if o.JSON {
		return m.printJSONReport(rep)
	}
	fmt.Fprintf(m.Stdout, "SGEMM %dx%dx%d (MatMul kernel), %d thread(s): median %s, %.1f GFLOP/s\n", r.M, r.N, r.K, o.Threads, bench.FormatDuration(r.Summary.Median), r.GFLOPs)
	if peak > 0 {
		fmt.Fprintf(m.Stdout, "FP32 FMA peak of one core (measured): %.1f GFLOP/s; SGEMM reaches %.0f%% of it", peak, 100*g.ShareOfPeak)
		if o.Threads > 1 {
			fmt.Fprintf(m.Stdout, " (%.0f%% of %d cores)", 100*g.ShareOfPeak/float64(o.Threads), o.Threads)
		}
		fmt.Fprintln(m.Stdout)
	} else {
		fmt.Fprintln(m.Stdout, "FP32 FMA peak: not measured here (needs amd64 with AVX2 and FMA)")
	}
	return nil
}

func (m *Main) printJSONReport(rep benchReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(m.Stdout, "%s\n", b)
	return err
}

// cpuModel returns the CPU model name from /proc/cpuinfo, or "".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// benchZoo is `vouch bench --zoo DIR [NAME...]` (bench.ZooCommand).
func (m *Main) benchZoo(ctx context.Context, o BenchOptions, dir, peers string, names []string) error {
	if strings.Contains(peers, ",") {
		return fmt.Errorf("%w: --zoo compares with one peer at a time", ErrUsage)
	}
	if o.Threads < 1 || o.Shape.Batch < 1 || o.Runs < 1 || o.Warmup < 0 {
		return fmt.Errorf("%w: --threads, --batch and --runs must be at least 1, --warmup at least 0", ErrUsage)
	}
	if o.ORTLib == "" {
		o.ORTLib = defaultORTLib()
	}
	return bench.ZooCommand{Dir: dir, Only: names, Peer: strings.TrimSpace(peers), Threads: o.Threads, Batch: o.Shape.Batch,
		Runs: o.Runs, Warmup: o.Warmup, ORTLib: o.ORTLib, JSON: o.JSON, Stdout: m.Stdout, Stderr: m.Stderr}.Run(ctx)
}
