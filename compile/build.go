package compile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/plan"
)

// Default profile ranges for dynamic dimensions, used when no --profile is
// given: a leading (batch) dimension spans 1..DefaultMaxBatch, any other
// dynamic dimension 1..DefaultMaxDim, both optimized for OptDim.
const (
	DefaultMaxBatch = 512
	DefaultMaxDim   = 512
	DefaultOptBatch = 1
	DefaultOptDim   = 128
)

// Result is a finished build.
type Result struct {
	// Options are the build options as JSON (also in the plan header).
	Options json.RawMessage
	// RequiredFeatures are the CPU features the plan's kernels need.
	RequiredFeatures []string
	Plan             []byte
	Digest           string
	Report           buildlog.Report
	Graph            *ir.Graph // the layer graph, as encoded
	// CalibrationCache is the calibration cache of an int8 build (nil
	// otherwise), to be written beside the plan.
	CalibrationCache []byte
}

// Build compiles m into a plan. source is the model file's bytes (for its
// digest); producer names the vouch version. m.Graph is rewritten in place.
// Every decision is recorded in log; clock timestamps the build (the plan
// bytes never contain it, so rebuilds are identical).
func Build(m *ir.Model, source []byte, name, producer string, opts Options, reg *kernel.Registry, log *buildlog.Log) (*Result, error) {
	start := time.Now()
	if err := opts.valid(); err != nil {
		return nil, err
	}
	opts = opts.canonical()
	g := m.Graph
	sum := sha256.Sum256(source)
	optJSON, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	log.Info("build", "start", map[string]any{"model": name, "source_sha256": hex.EncodeToString(sum[:]), "options": json.RawMessage(optJSON), "nodes": len(g.Nodes)})
	profiles := opts.Profiles
	if len(profiles) == 0 {
		profiles = []plan.Profile{defaultProfile(g)}
		log.Info("profiles", "default", map[string]any{"profile": profiles[0], "rule": fmt.Sprintf("leading dynamic dim 1..%d (opt %d), other dynamic dims 1..%d (opt %d)", DefaultMaxBatch, DefaultOptBatch, DefaultMaxDim, DefaultOptDim)})
	}
	if err := checkProfiles(g, profiles); err != nil {
		return nil, err
	}
	nodesIn := len(g.Nodes)
	st := &state{g: g, reg: reg, log: log, origin: map[string][]string{}, opts: opts}
	for _, p := range pipeline() {
		if slices.Contains(opts.DisabledPasses, p.name) {
			log.Info(p.name, "skipped", nil)
			continue
		}
		before := len(g.Nodes)
		st.pass = p.name
		if err := p.run(st); err != nil {
			return nil, fmt.Errorf("compile: pass %s: %w", p.name, err)
		}
		if err := ir.Verify(g, nil); err != nil {
			return nil, fmt.Errorf("compile: pass %s left an invalid graph: %w", p.name, err)
		}
		log.Info(p.name, "done", map[string]any{"nodes_before": before, "nodes_after": len(g.Nodes)})
	}
	if err := ir.Infer(g, reg, nil); err != nil {
		return nil, fmt.Errorf("compile: shape inference: %w", err)
	}
	optTypes, err := typesAt(g, reg, profiles[0], func(r plan.ShapeRange) []int { return r.Opt })
	if err != nil {
		return nil, err
	}
	maxTypes, err := typesAt(g, reg, profiles[0], func(r plan.ShapeRange) []int { return r.Max })
	if err != nil {
		return nil, err
	}
	tactics, err := chooseTactics(g, reg, optTypes, opts, machineKey(opts), log)
	if err != nil {
		return nil, fmt.Errorf("compile: choosing tactics: %w", err)
	}
	logTrees(g, log)
	info := map[string]plan.LayerInfo{}
	rep := buildlog.Report{Model: name, SourceSHA256: hex.EncodeToString(sum[:]), NodesIn: nodesIn, LayersOut: len(g.Nodes), Fusions: map[string]int{}}
	for _, n := range g.Nodes {
		li := plan.LayerInfo{Origin: st.origin[n.Name], Tactic: tactics[n.Name], Precision: string(plan.LayerPrecision(n.Domain, n.OpType)), FLOPs: layerFLOPs(n, optTypes, reg)}
		info[n.Name] = li
		out := ""
		if t, ok := g.Types[n.Outputs[0]]; ok {
			out = t.String()
		}
		kind := n.OpType
		if l, ok := fused.LayerOf(n); ok && n.OpType == fused.OpFused {
			kind = fused.OpFused + "(" + l.Base + l.Suffix() + ")"
		}
		rep.Layers = append(rep.Layers, buildlog.LayerReport{Name: n.Name, Kind: kind, FusedFrom: li.Origin, Tactic: li.Tactic, Precision: li.Precision, Output: out, FLOPs: li.FLOPs})
		rep.TotalFLOPs += li.FLOPs
	}
	for k, n := range st.did.fusions {
		rep.Fusions[k] = n
	}
	rep.FoldedConsts, rep.Removed = st.did.folded, st.did.removed
	st.finishReport(&rep)
	if err := checkBudget(g, maxTypes, opts.MaxBytes); err != nil {
		return nil, err
	}
	mem := exec.PlanMemory(g, maxTypes, reg)
	arena := mem.Arena
	if budget := budgetOf(opts.MaxBytes); arena.PeakBytes > budget || arena.PeakBytes < 0 {
		return nil, fmt.Errorf("compile: %w: the arena at the profile's max shapes needs %d bytes, more than the plan's budget of %d (max_bytes)", exec.ErrBudget, arena.PeakBytes, budget)
	}
	rep.PeakArenaBytes = arena.PeakBytes
	if c := mem.Concats; c != (exec.ConcatStats{}) {
		r := buildlog.ConcatReport(c)
		rep.Concats = &r
	}
	log.Info("memory", "arena", map[string]any{"peak_bytes": arena.PeakBytes, "values": len(arena.Slots), "at": "profile max shapes",
		"concats_in_place": mem.Concats.InPlace, "concats_partial": mem.Concats.Partial, "concats_copied": mem.Concats.Copied})
	hdr := plan.Header{
		Producer:         producer,
		RequiredFeatures: requiredFeatures(g, opts.TargetFeatures),
		Options:          optJSON,
		Source:           plan.Source{SHA256: rep.SourceSHA256, Name: name, Opsets: m.Opsets, Meta: m.Metadata},
		Profiles:         profiles,
		Arena:            arena,
	}
	b, err := plan.Encode(hdr, g, info)
	if err != nil {
		return nil, err
	}
	rep.PlanSHA256 = plan.Digest(b)
	rep.PlanPrecision = string(plan.Label(planLayers(g)))
	rep.BuildMillis = time.Since(start).Milliseconds()
	log.Info("build", "done", map[string]any{"plan_sha256": rep.PlanSHA256, "layers": len(g.Nodes), "bytes": len(b)})
	return &Result{Options: optJSON, RequiredFeatures: hdr.RequiredFeatures, Plan: b, Digest: rep.PlanSHA256, Report: rep, Graph: g, CalibrationCache: st.calibrationCache()}, nil
}

// machineKey names this machine for the timing cache: a cache measured
// elsewhere is not hit.
func machineKey(o Options) string {
	return runtime.GOOS + "/" + runtime.GOARCH + " " + strings.Join(o.TargetFeatures, ",") + " " + cpuModel()
}

// cpuModel reads the CPU model name (Linux); "" elsewhere.
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

// defaultProfile spans every dynamic dimension with the default ranges.
func defaultProfile(g *ir.Graph) plan.Profile {
	p := plan.Profile{Inputs: map[string]plan.ShapeRange{}}
	for _, v := range g.Inputs {
		if !v.Type.RankKnown {
			continue
		}
		var r plan.ShapeRange
		for i, d := range v.Type.Shape {
			if d.Known() {
				r.Min, r.Opt, r.Max = append(r.Min, int(d.Value)), append(r.Opt, int(d.Value)), append(r.Max, int(d.Value))
				continue
			}
			mx, opt := DefaultMaxDim, DefaultOptDim
			if i == 0 {
				mx, opt = DefaultMaxBatch, DefaultOptBatch
			}
			r.Min, r.Opt, r.Max = append(r.Min, 1), append(r.Opt, opt), append(r.Max, mx)
		}
		p.Inputs[v.Name] = r
	}
	return p
}

func checkProfiles(g *ir.Graph, profiles []plan.Profile) error {
	for pi, p := range profiles {
		for name, r := range p.Inputs {
			var v *ir.Value
			for _, in := range g.Inputs {
				if in.Name == name {
					v = in
				}
			}
			if v == nil {
				return fmt.Errorf("compile: profile %d names %q, which is not a model input", pi, name)
			}
			if v.Type.RankKnown && len(v.Type.Shape) != len(r.Min) {
				return fmt.Errorf("compile: profile %d: input %q has rank %d, profile gives rank %d", pi, name, len(v.Type.Shape), len(r.Min))
			}
			for i, d := range v.Type.Shape {
				if d.Known() && (r.Min[i] != int(d.Value) || r.Max[i] != int(d.Value)) {
					return fmt.Errorf("compile: profile %d: input %q dimension %d is fixed at %d, profile gives %d..%d", pi, name, i, d.Value, r.Min[i], r.Max[i])
				}
			}
		}
	}
	return nil
}

// typesAt infers every value's type with the inputs fixed at one point of
// a profile (opt or max).
func typesAt(g *ir.Graph, reg *kernel.Registry, p plan.Profile, at func(plan.ShapeRange) []int) (map[string]ir.Type, error) {
	saved := make([]ir.Type, len(g.Inputs))
	for i, v := range g.Inputs {
		saved[i] = v.Type
		if r, ok := p.Inputs[v.Name]; ok {
			v.Type = ir.StaticType(v.Type.DType, at(r))
		}
	}
	savedTypes := g.Types
	g.Types = map[string]ir.Type{}
	err := ir.Infer(g, reg, nil)
	types := g.Types
	g.Types = savedTypes
	for i, v := range g.Inputs {
		v.Type = saved[i]
	}
	if err != nil {
		return nil, fmt.Errorf("compile: shape inference at profile shapes: %w", err)
	}
	return types, nil
}
