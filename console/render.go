package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"sort"
	"strings"
	"time"
)

var funcs = template.FuncMap{
	"utc": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05.000000 UTC")
	},
	"ms":  func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) },
	"ago": func(t time.Time) string { return ago(time.Since(t)) },
	"conf": func(p *float64) string {
		if p == nil {
			return ""
		}
		return formatValue(*p, 0)
	},
	"pct": func(p *float64) string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%s %%", formatValue(*p*100, 0))
	},
	"micros": func(us int64) string { return fmt.Sprintf("%d.%03d ms", us/1000, us%1000) },
	"join":   strings.Join,
	"short": func(s string, n int) string {
		if len(s) > n {
			return s[:n] + "…"
		}
		return s
	},
	"value": renderValue,
	"bytes": func(n int64) string {
		switch {
		case n >= 1<<20:
			return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%d bytes (%.1f KiB)", n, float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d bytes", n)
	},
	"sub": func(a, b uint64) uint64 { return a - b },
}

func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%.1f h ago", d.Hours())
	}
	return fmt.Sprintf("%.0f days ago", d.Hours()/24)
}

// renderValue renders a JSON value (decoded with UseNumber, so that numbers
// keep every digit recorded) as HTML: objects as two-column tables, arrays
// of objects as tables with one column per member, scalars as text.
func renderValue(v any) template.HTML {
	var b strings.Builder
	writeValue(&b, v, 0)
	return template.HTML(b.String())
}

func writeValue(b *strings.Builder, v any, depth int) {
	esc := template.HTMLEscapeString
	if depth > 8 {
		raw, _ := json.Marshal(v)
		b.WriteString("<code>" + esc(string(raw)) + "</code>")
		return
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(`<table class="kv">`)
		for _, k := range keys {
			b.WriteString(`<tr><th scope="row">` + esc(k) + `</th><td>`)
			writeValue(b, x[k], depth+1)
			b.WriteString("</td></tr>")
		}
		b.WriteString("</table>")
	case []any:
		cols, ok := objectColumns(x)
		if !ok {
			for i, e := range x {
				if i > 0 {
					b.WriteString(", ")
				}
				writeValue(b, e, depth+1)
			}
			return
		}
		b.WriteString(`<table class="rows"><thead><tr><th scope="col" class="num">#</th>`)
		for _, c := range cols {
			b.WriteString(`<th scope="col">` + esc(c) + "</th>")
		}
		b.WriteString("</tr></thead><tbody>")
		for i, e := range x {
			m := e.(map[string]any)
			fmt.Fprintf(b, `<tr><td class="num">%d</td>`, i)
			for _, c := range cols {
				cls := ""
				if n, isNum := m[c].(json.Number); isNum {
					cls = ` class="num`
					if strings.HasPrefix(string(n), "-") {
						cls += ` neg`
					}
					cls += `"`
				}
				b.WriteString("<td" + cls + ">")
				if val, has := m[c]; has {
					writeValue(b, val, depth+1)
				}
				b.WriteString("</td>")
			}
			b.WriteString("</tr>")
		}
		b.WriteString("</tbody></table>")
	case json.Number:
		b.WriteString(esc(string(x)))
	case string:
		b.WriteString(esc(x))
	case nil:
		b.WriteString("null")
	default:
		b.WriteString(esc(fmt.Sprint(x)))
	}
}

// objectColumns returns the union of the members of an array of objects,
// in first-seen order, or false when some element is not an object.
func objectColumns(a []any) ([]string, bool) {
	if len(a) == 0 {
		return nil, false
	}
	var cols []string
	seen := map[string]bool{}
	for _, e := range a {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !seen[k] {
				seen[k] = true
				cols = append(cols, k)
			}
		}
	}
	return cols, true
}

// pages holds one template set per page, each with the layout.
var pages = func() map[string]*template.Template {
	m := map[string]*template.Template{}
	for _, p := range []string{"error", "signin", "search", "decision", "replay", "log", "models", "export"} {
		m[p] = template.Must(template.New(p).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+p+".html"))
	}
	return m
}()
