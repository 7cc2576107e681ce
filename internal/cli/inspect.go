package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/vouchml/vouch/plan"
)

func runInspect(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("inspect", "inspect NAME.plan [--json | --dot FILE]", `
Prints a plan's header (digest, format, producer, source model, profiles,
arena) and its layer table: name, kind, the ONNX nodes it was fused from,
tactic, precision, output shape and FLOPs.

--json prints the plan header as JSON; --dot writes a Graphviz graph of the
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
	fmt.Fprintln(m.Stdout)
	tw := tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LAYER\tKIND\tFUSED FROM\tTACTIC\tPRECISION\tOUTPUT\tFLOPS")
	var total int64
	for _, l := range h.Graph.Layers {
		kind := l.Kind
		for _, a := range l.Attrs {
			if a.Name == "base" {
				kind = "Fused(" + a.S + ")"
			}
		}
		out := strings.Join(l.OutputShapes, " ")
		from := ""
		if len(l.Origin) > 1 {
			from = strings.Join(l.Origin, " + ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", l.Name, kind, from, l.Tactic, l.Precision, out, l.FLOPs)
		total += l.FLOPs
	}
	tw.Flush()
	fmt.Fprintf(m.Stdout, "\n%d layers, %.3g FLOPs at the first profile's opt shapes\n", len(h.Graph.Layers), float64(total))
	return nil
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
