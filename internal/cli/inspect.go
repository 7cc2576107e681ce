package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/plan"
)

func runInspect(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("inspect", "inspect NAME.plan [--json | --dot FILE]", `
Prints a plan's header (digest, format, producer, source model, profiles,
arena) and its layer table: name, kind, the ONNX nodes it was fused from,
tactic, precision, output shape and FLOPs; reduced-precision layers show
what they compute (Q8(Conv+Relu): an int8 convolution with its Relu).
When NAME.plan.report.json lies beside the plan, its precision section
follows: calibrator, layer precisions, fallbacks, and the accuracy
against fp32 (accuracy, drop, top-1 agreement, mean KL, per class).

The table fits 120 columns: long layer names, origin lists and shapes are
elided in the middle ("..."); --json prints them whole, with the rest of
the plan header; --dot writes a Graphviz graph of the
fused plan (render it with: dot -Tsvg FILE -o plan.svg).`)
	asJSON := fs.Bool("json", false, "print the plan header as JSON")
	dot := fs.String("dot", "", "write a Graphviz graph of the layers to FILE")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want exactly one PLAN argument", ErrUsage)
	}
	b, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	p, err := plan.Decode(b)
	if err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	h := p.Header
	if *dot != "" {
		if err := writeFileAtomic(*dot, []byte(dotGraph(&h.Graph)), 0o644); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Digest string `json:"plan_sha256"`
			plan.Header
		}{plan.Digest(b), h})
	}
	fmt.Fprintf(m.Stdout, "plan     %s\ndigest   sha256:%s\nformat   %d, produced by %s\nsource   %s (sha256:%s)\n",
		pos[0], plan.Digest(b), h.FormatVersion, h.Producer, h.Source.Name, h.Source.SHA256)
	if h.Arena != nil {
		fmt.Fprintf(m.Stdout, "arena    %s peak, %d values\n", humanBytes(h.Arena.PeakBytes), len(h.Arena.Slots))
	}
	for i, pr := range h.Profiles {
		var parts []string
		for name, r := range pr.Inputs {
			parts = append(parts, fmt.Sprintf("%s %v..%v (opt %v)", name, r.Min, r.Max, r.Opt))
		}
		fmt.Fprintf(m.Stdout, "profile  %d: %s\n", i, strings.Join(parts, "; "))
	}
	fmt.Fprintf(m.Stdout, "label    %s (from the layers)\nrequires %s\n", p.Precision(), strings.Join(h.RequiredFeatures, ","))
	if g := h.GPU; g != nil {
		fmt.Fprintf(m.Stdout, "gpu      %s %s %s: %d of %d layers on the GPU%s\n", g.Device, g.Arch, g.Mode, g.GPULayers(), len(g.Layers), fastCounts(g))
		if g.Contract != "" {
			fmt.Fprintf(m.Stdout, "contract %s\n", g.Contract)
		}
	}
	fmt.Fprintln(m.Stdout)
	total := printLayers(m, h.Graph.Layers)
	fmt.Fprintf(m.Stdout, "\n%d layers, %.3g FLOPs at the first profile's opt shapes\n", len(h.Graph.Layers), float64(total))
	rp := pos[0] + ".report.json"
	switch rb, err := os.ReadFile(rp); {
	case err == nil:
		var rep buildlog.Report
		if err := json.Unmarshal(rb, &rep); err != nil {
			return fmt.Errorf("%s: %w", rp, err)
		}
		if rep.PlanSHA256 != "" && rep.PlanSHA256 != plan.Digest(b) {
			fmt.Fprintf(m.Stdout, "\n%s describes another plan (sha256:%s); precision section skipped\n", rp, rep.PlanSHA256)
			return nil
		}
		printPrecision(m, rep.Precision)
	case !os.IsNotExist(err):
		return err
	}
	return nil
}

// Column widths of the layer table: with two spaces between columns it
// fits 120 columns (resnet18's names and origin lists made it 2,254).
const (
	colName   = 26
	colKind   = 17
	colOrigin = 16
	colTactic = 16
	colShape  = 20
)

// printLayers prints the layer table and returns the total FLOPs.
func printLayers(m *Main, layers []plan.Layer) int64 {
	tw := tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LAYER\tKIND\tFUSED FROM\tTACTIC\tPREC\tOUTPUT\tFLOPS")
	var total int64
	for _, l := range layers {
		from := ""
		if full := strings.Join(l.Origin, " + "); len(l.Origin) > 1 && len(full) <= colOrigin {
			from = full
		} else if len(l.Origin) > 1 {
			more := fmt.Sprintf(" +%d", len(l.Origin)-1)
			from = elide(l.Origin[0], colOrigin-len(more)) + more
		}
		flops := "-"
		if l.FLOPs > 0 {
			flops = fmt.Sprintf("%.3g", float64(l.FLOPs))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", elide(l.Name, colName), elide(layerKind(l), colKind), from,
			elide(l.Tactic, colTactic), l.Precision, elide(strings.Join(l.OutputShapes, " "), colShape), flops)
		total += l.FLOPs
	}
	tw.Flush()
	return total
}

// elide shortens s to at most n characters by cutting its middle, which
// keeps a layer path's start and its distinguishing end.
func elide(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 5 {
		return s
	}
	head := (n - 3) / 2
	return string(r[:head]) + "..." + string(r[len(r)-(n-3-head):])
}

// layerKind names a layer's kind, with the ops a fused or reduced-
// precision layer computes: Fused(Conv+Add+Relu), Q8(Conv+Relu),
// F16(Gemm).
func layerKind(l plan.Layer) string {
	attr := map[string]plan.AttrHeader{}
	for _, a := range l.Attrs {
		attr[a.Name] = a
	}
	base, ok := attr[fused.AttrBase]
	if !ok {
		if in, ok := attr[fused.AttrInnerOp]; ok && strings.HasSuffix(l.Kind, fused.OpF16) {
			return "F16(" + in.S + ")"
		}
		return l.Kind
	}
	h := fused.Layer{Base: base.S, Activation: attr[fused.AttrActivation].S}
	if lay := attr[fused.AttrLayout]; len(lay.Ints) == 3 {
		h.Adds = int(lay.Ints[1])
	}
	parts := h.Base + h.Suffix()
	switch {
	case strings.HasSuffix(l.Kind, fused.OpQ8):
		return "Q8(" + parts + ")"
	case strings.HasSuffix(l.Kind, fused.OpF16):
		return "F16(" + parts + ")"
	}
	return "Fused(" + parts + ")"
}

// printPrecision prints the report's reduced-precision section: what was
// quantized, how, and what it cost against fp32.
func printPrecision(m *Main, p *buildlog.PrecisionReport) {
	if p == nil {
		return
	}
	fmt.Fprintf(m.Stdout, "\nprecision  %s", p.Precision)
	if p.Calibrator != "" {
		fmt.Fprintf(m.Stdout, ", calibrator %s", p.Calibrator)
	}
	if p.CalibrationSamples > 0 {
		fmt.Fprintf(m.Stdout, ", %d calibration samples", p.CalibrationSamples)
	}
	fmt.Fprintln(m.Stdout)
	counts := map[string]int{}
	for _, l := range p.Layers {
		counts[l.Precision]++
	}
	var cs []string
	for _, k := range []string{"int8", "fp16", "fp32"} {
		if counts[k] > 0 {
			cs = append(cs, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	if len(cs) > 0 {
		fmt.Fprintf(m.Stdout, "layers     %s\n", strings.Join(cs, ", "))
	}
	for _, f := range p.Fallbacks {
		fmt.Fprintf(m.Stdout, "fallback   %s to fp32: %s\n", f.Layer, f.Reason)
	}
	a := p.Accuracy
	if a == nil {
		fmt.Fprintln(m.Stdout, "accuracy   not evaluated (no evaluation or calibration data)")
		return
	}
	fmt.Fprintf(m.Stdout, "accuracy   on %d samples of %s\n", a.Samples, p.EvalData)
	tw := tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
	if !strings.Contains(p.EvalData, "no labels") {
		fmt.Fprintf(tw, "  fp32\t%.2f%%\n  %s\t%.2f%%\n  drop\t%.2f pp\n", a.FP32, p.Precision, a.Reduced, a.Drop)
	}
	fmt.Fprintf(tw, "  top-1 agreement\t%.2f%%\n  mean KL\t%.3g\n", a.Agreement, a.MeanKL)
	tw.Flush()
	if len(a.PerClass) > 0 {
		tw = tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  CLASS\tCOUNT\tFP32\t"+strings.ToUpper(p.Precision)+"\tDELTA")
		for _, c := range a.PerClass {
			fmt.Fprintf(tw, "  %d\t%d\t%.2f%%\t%.2f%%\t%+.2f pp\n", c.Class, c.Count, c.FP32, c.Reduced, c.Delta)
		}
		tw.Flush()
	}
}

// dotGraph renders the layer graph in Graphviz's dot language.
func dotGraph(g *plan.GraphHeader) string {
	var b strings.Builder
	b.WriteString("digraph plan {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\"];\n")
	producer := map[string]int{}
	for i, l := range g.Layers {
		for _, o := range l.Outputs {
			producer[o] = i
		}
		label := l.Name + "\\n" + l.Kind
		if len(l.Origin) > 1 {
			label += fmt.Sprintf("\\n(%d nodes fused)", len(l.Origin))
		}
		fmt.Fprintf(&b, "  l%d [label=%q];\n", i, label)
	}
	for _, v := range g.Inputs {
		fmt.Fprintf(&b, "  %q [shape=ellipse];\n", v.Name)
	}
	for i, l := range g.Layers {
		for _, in := range l.Inputs {
			if j, ok := producer[in]; ok {
				fmt.Fprintf(&b, "  l%d -> l%d;\n", j, i)
			}
			for _, v := range g.Inputs {
				if v.Name == in {
					fmt.Fprintf(&b, "  %q -> l%d;\n", in, i)
				}
			}
		}
	}
	b.WriteString("}\n")
	return strings.ReplaceAll(b.String(), `\\n`, `\n`)
}
