package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/explain"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/registry"
)

// features are the names of the model's input columns: given to the
// console, else those its bundle keeps for explanations.
func (m Model) features() []string {
	if len(m.Features) > 0 || m.Bundle == nil {
		return m.Features
	}
	b, ok := m.Bundle.File(bundle.ExplainFile)
	if !ok {
		return nil
	}
	d, err := explain.DecodeData(b)
	if err != nil {
		return nil
	}
	return d.Features
}

// ModelView is one model on the models page.
type ModelView struct {
	Name, Version string
	Source        string
	PlanDigest    string
	BundleDigest  string
	Precision     string
	Features      []string
	Provenance    *bundle.Provenance
	Report        *buildlog.Report
	ReportErr     string
	Fusions       []Fusion
	Layers        []plan.Layer
	Graph         template.HTML
}

// Fusion is one row of the report's fusion counts.
type Fusion struct {
	Pattern string
	Count   int
}

// VersionView is one registry version, with the history of its aliases.
type VersionView struct {
	*registry.Version
}

func (c *Console) models(w http.ResponseWriter, r *http.Request, s *session) {
	if _, ok := c.record(w, r, s, "console-models", r.URL.Query().Get("m")); !ok {
		return
	}
	data := map[string]any{}
	var views []ModelView
	for _, m := range c.opt.Models {
		v := ModelView{Name: m.Name, Version: m.Version, Features: m.features()}
		if e := m.Engine; e != nil {
			v.Source, v.PlanDigest, v.BundleDigest, v.Provenance = e.Source, e.PlanDigest, e.BundleDigest, e.Provenance
			if e.Plan != nil {
				v.Precision = string(e.Plan.Header.Precision)
				v.Layers = e.Plan.Header.Graph.Layers
				v.Graph = graphSVG(e.Plan.Header.Graph)
			}
		}
		if m.Bundle != nil {
			if b, ok := m.Bundle.File(bundle.ReportFile); ok {
				var rep buildlog.Report
				if err := json.Unmarshal(b, &rep); err != nil {
					v.ReportErr = err.Error()
				} else {
					v.Report = &rep
					for k, n := range rep.Fusions {
						v.Fusions = append(v.Fusions, Fusion{k, n})
					}
					sort.Slice(v.Fusions, func(i, j int) bool { return v.Fusions[i].Pattern < v.Fusions[j].Pattern })
				}
			}
		}
		views = append(views, v)
	}
	data["Models"] = views
	if reg := c.opt.Registry; reg != nil {
		vs, err := reg.List(r.Context(), "")
		if err != nil {
			data["RegErr"] = err.Error()
		}
		data["Versions"] = vs
		hist, err := reg.AliasHistory(r.Context(), "", "")
		if err != nil {
			data["RegErr"] = err.Error()
		}
		data["Aliases"] = hist
	}
	c.render(w, r, s, "models", data)
}

const (
	maxGraphLayers = 600
	boxW, boxH     = 168, 34
	gapX, gapY     = 24, 30
)

// graphSVG draws a plan's layer graph: layers in rows by their depth (the
// longest path from an input), edges from producer to consumer. Its own
// layout, so no graphviz is needed; the SVG is inline and self-contained.
func graphSVG(g plan.GraphHeader) template.HTML {
	layers := g.Layers
	if len(layers) == 0 {
		return ""
	}
	if len(layers) > maxGraphLayers {
		return template.HTML(fmt.Sprintf(`<p class="muted">The plan has %d layers; the graph is drawn for at most %d.</p>`, len(layers), maxGraphLayers))
	}
	producer := map[string]int{}
	for i, l := range layers {
		for _, o := range l.Outputs {
			producer[o] = i
		}
	}
	depth := make([]int, len(layers))
	type edge struct{ from, to int }
	var edges []edge
	for i, l := range layers { // layers are in topological order
		for _, in := range l.Inputs {
			if p, ok := producer[in]; ok && p < i {
				edges = append(edges, edge{p, i})
				depth[i] = max(depth[i], depth[p]+1)
			}
		}
	}
	rows := map[int][]int{}
	maxDepth, width := 0, 1
	for i, d := range depth {
		rows[d] = append(rows[d], i)
		maxDepth = max(maxDepth, d)
		width = max(width, len(rows[d]))
	}
	x, y := make([]int, len(layers)), make([]int, len(layers))
	totalW := width*(boxW+gapX) + gapX
	for d := 0; d <= maxDepth; d++ {
		row := rows[d]
		rowW := len(row)*(boxW+gapX) - gapX
		x0 := (totalW - rowW) / 2
		for k, i := range row {
			x[i], y[i] = x0+k*(boxW+gapX), gapY+d*(boxH+gapY)
		}
	}
	totalH := (maxDepth+1)*(boxH+gapY) + gapY
	var b strings.Builder
	esc := template.HTMLEscapeString
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby="gt-%s" width="%d" height="%d" viewBox="0 0 %d %d" font-family="system-ui,sans-serif" font-size="11">`,
		esc(idSafe(g.Name)), totalW, totalH, totalW, totalH)
	fmt.Fprintf(&b, `<title id="gt-%s">Layer graph of %s: %d layers, %d edges</title>`, esc(idSafe(g.Name)), esc(g.Name), len(layers), len(edges))
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#57606a"/></marker></defs>`)
	for _, e := range edges {
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#8c959f" stroke-width="1.2" marker-end="url(#arrow)"/>`,
			x[e.from]+boxW/2, y[e.from]+boxH, x[e.to]+boxW/2, y[e.to])
	}
	for i, l := range layers {
		fill, stroke := "#f6f8fa", "#57606a"
		if l.Domain == "vouch" {
			fill, stroke = "#ddf4ff", "#0550ae" // fused layers
		}
		fmt.Fprintf(&b, `<g><title>%s: %s%s%s</title><rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="%s" stroke="%s"/>`,
			esc(l.Name), esc(l.Kind), esc(optional(" · tactic ", l.Tactic)), esc(optional(" · ", l.Precision)), x[i], y[i], boxW, boxH, fill, stroke)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-weight="600" fill="#1b1f23">%s</text>`, x[i]+boxW/2, y[i]+14, esc(cut(l.Kind, 26)))
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#424a53">%s</text></g>`, x[i]+boxW/2, y[i]+27, esc(cut(l.Name, 28)))
	}
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

func optional(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func cut(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func idSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, s)
}
