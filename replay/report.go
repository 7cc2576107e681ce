package replay

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/bundle"
)

// ReportSchema versions the JSON report.
const ReportSchema = "vouch-replay-report/v1"

// PayloadType is the DSSE payload type of a signed report.
const PayloadType = "application/vnd.vouch.replay-report+json"

// Report is the outcome of a replay.
type Report struct {
	Schema     string    `json:"schema"`
	Verdict    string    `json:"verdict"`
	TraceID    string    `json:"trace_id"`
	ReplayedAt time.Time `json:"replayed_at"`
	Replayer   string    `json:"replayer,omitempty"`

	Record     *audit.Record     `json:"-"`
	RecordJSON string            `json:"record"` // canonical, byte for byte as logged
	LogIndex   uint64            `json:"log_index"`
	LeafHash   string            `json:"leaf_hash"`
	Checkpoint *audit.Checkpoint `json:"-"`
	Proof      []string          `json:"inclusion_proof"`

	InputSource  string        `json:"input_source"`
	Engine       EngineInfo    `json:"engine"`
	OutputDigest string        `json:"replayed_output_digest"`
	Outputs      []OutputCheck `json:"outputs"`
}

// EngineInfo says which engine the replay ran.
type EngineInfo struct {
	Source       string    `json:"source"`
	PlanDigest   string    `json:"plan_digest"`
	BundleDigest string    `json:"bundle_digest,omitempty"`
	Model        string    `json:"model,omitempty"`
	SourceDigest string    `json:"model_source_digest,omitempty"`
	Builder      string    `json:"builder,omitempty"`
	BuiltOn      string    `json:"built_on,omitempty"`
	BuiltAt      time.Time `json:"built_at,omitzero"`
	SignedBy     []string  `json:"signed_by,omitempty"`
}

// OutputCheck compares one output's recorded and replayed digests.
type OutputCheck struct {
	Name     string  `json:"name"`
	DType    string  `json:"dtype"`
	Shape    []int64 `json:"shape"`
	Recorded string  `json:"recorded_digest"`
	Replayed string  `json:"replayed_digest"`
	Equal    bool    `json:"equal"`
}

type reportJSON struct {
	*Report
	CheckpointText string `json:"checkpoint"`
	LogOrigin      string `json:"log_origin"`
	TreeSize       uint64 `json:"tree_size"`
}

// JSON encodes the report (with the signed checkpoint's text).
func (r *Report) JSON() ([]byte, error) {
	j := reportJSON{Report: r}
	if r.Checkpoint != nil {
		j.CheckpointText, j.LogOrigin, j.TreeSize = string(r.Checkpoint.Note), r.Checkpoint.Origin, r.Checkpoint.Size
	}
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Sign returns the JSON report in a DSSE envelope signed by the replaying
// party's key (verify with bundle.VerifyEnvelope).
func (r *Report) Sign(key *bundle.PrivateKey) ([]byte, error) {
	b, err := r.JSON()
	if err != nil {
		return nil, err
	}
	return bundle.SignEnvelope(key, PayloadType, b)
}

// Summary writes the short terminal form.
func (r *Report) Summary(w io.Writer) {
	fmt.Fprintf(w, "%s  trace %s\n", r.Verdict, r.TraceID)
	rec := r.Record
	fmt.Fprintf(w, "  record     log index %d, leaf %s…, proven against checkpoint of size %d\n", r.LogIndex, short(r.LeafHash, 16), r.Checkpoint.Size)
	fmt.Fprintf(w, "  request    %s by %s at %s: %s@%s\n", rec.RequestID, rec.Principal, rec.Time.UTC().Format(time.RFC3339), rec.Model, rec.ModelVersion)
	fmt.Fprintf(w, "  engine     %s (plan %s…)", r.Engine.Source, short(r.Engine.PlanDigest, 19))
	if len(r.Engine.SignedBy) > 0 {
		fmt.Fprintf(w, ", signed by %s", strings.Join(r.Engine.SignedBy, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  input      %s (%s)\n", short(rec.InputDigest, 23)+"…", r.InputSource)
	for _, o := range r.Outputs {
		mark := "equal"
		if !o.Equal {
			mark = "DIFFERS"
		}
		fmt.Fprintf(w, "  output     %s %s%v: recorded %s… replayed %s… %s\n", o.Name, o.DType, o.Shape, short(o.Recorded, 19), short(o.Replayed, 19), mark)
	}
	if rec.OutputLabel != "" {
		fmt.Fprintf(w, "  decision   %s", rec.OutputLabel)
		if rec.Confidence != nil {
			fmt.Fprintf(w, " (confidence %.4f)", *rec.Confidence)
		}
		fmt.Fprintln(w)
	}
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// HTML writes a self-contained page a compliance officer can read: the
// verdict, the record, the engine's provenance, the proof and the digests;
// stats, when given, are the cross-plan error statistics.
func (r *Report) HTML(w io.Writer, stats *Comparison) error {
	j, err := r.JSON()
	if err != nil {
		return err
	}
	return page.Execute(w, map[string]any{"R": r, "JSON": string(j), "Stats": stats, "CP": string(r.Checkpoint.Note)})
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"time": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 MST") },
	"join": strings.Join,
	"conf": func(p *float64) string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%.4f", *p)
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>vouch replay {{.R.Verdict}} — {{.R.TraceID}}</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1b1f23}
h1{font-size:1.6rem} .v{padding:.2rem .7rem;border-radius:.3rem;color:#fff}
.VERIFIED{background:#1a7f37} .MISMATCH{background:#cf222e}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1.5rem} td,th{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f8fa;width:14rem} code,pre{font:12px/1.4 ui-monospace,monospace;word-break:break-all;white-space:pre-wrap}
.bad{color:#cf222e;font-weight:600} .ok{color:#1a7f37}
</style></head><body>
<h1>Replay of trace <code>{{.R.TraceID}}</code>: <span class="v {{.R.Verdict}}">{{.R.Verdict}}</span></h1>
<p>{{if eq .R.Verdict "VERIFIED"}}The recorded request was re-run on the exact signed engine that served it. Its output is <b>bit-for-bit identical</b> to the output that was served: the output digests match.{{else}}The re-run output <b>differs</b> from the output that was served (the digests below do not match).{{end}}
Replayed at {{time .R.ReplayedAt}}{{if .R.Replayer}} by {{.R.Replayer}}{{end}}.</p>
<h2>The decision</h2>
<table>
<tr><th>Model</th><td>{{.R.Record.Model}}@{{.R.Record.ModelVersion}}</td></tr>
<tr><th>Time</th><td>{{time .R.Record.Time}}</td></tr>
<tr><th>Principal</th><td>{{.R.Record.Principal}} from {{.R.Record.SourceAddr}}</td></tr>
<tr><th>Request id</th><td>{{.R.Record.RequestID}}</td></tr>
{{if .R.Record.OutputLabel}}<tr><th>Outcome</th><td>{{.R.Record.OutputLabel}}{{if .R.Record.Confidence}} (confidence {{conf .R.Record.Confidence}}){{end}}</td></tr>{{end}}
<tr><th>Input digest</th><td><code>{{.R.Record.InputDigest}}</code><br>{{.R.InputSource}}</td></tr>
</table>
<h2>Outputs</h2>
<table><tr><th style="width:auto">Output</th><th style="width:auto">Recorded digest</th><th style="width:auto">Replayed digest</th><th style="width:auto">Same</th></tr>
{{range .R.Outputs}}<tr><td>{{.Name}} {{.DType}}{{.Shape}}</td><td><code>{{.Recorded}}</code></td><td><code>{{.Replayed}}</code></td><td>{{if .Equal}}<span class="ok">yes</span>{{else}}<span class="bad">no</span>{{end}}</td></tr>{{end}}
</table>
{{with .Stats}}<h2>Error statistics against another engine</h2>
<table><tr><th style="width:auto">Output</th><th style="width:auto">max abs</th><th style="width:auto">mean abs</th><th style="width:auto">p99 abs</th><th style="width:auto">max rel</th><th style="width:auto">KL</th><th style="width:auto">top-1</th><th style="width:auto">pass</th></tr>
{{range .Outputs}}<tr><td>{{.Name}}</td><td>{{printf "%.3g" .AbsMax}}</td><td>{{printf "%.3g" .AbsMean}}</td><td>{{printf "%.3g" .AbsP99}}</td><td>{{printf "%.3g" .RelMax}}</td><td>{{printf "%.3g" .KL}}</td><td>{{printf "%.3f" .Top1}}</td><td>{{.Pass}}</td></tr>{{end}}
</table>{{end}}
<h2>The engine</h2>
<table>
<tr><th>Served by</th><td>{{.R.Engine.Source}}</td></tr>
<tr><th>Plan digest</th><td><code>{{.R.Engine.PlanDigest}}</code></td></tr>
{{if .R.Engine.BundleDigest}}<tr><th>Bundle digest</th><td><code>{{.R.Engine.BundleDigest}}</code></td></tr>{{end}}
{{if .R.Engine.Model}}<tr><th>Model build</th><td>{{.R.Engine.Model}} from source <code>{{.R.Engine.SourceDigest}}</code></td></tr>
<tr><th>Built by</th><td>{{.R.Engine.Builder}} on {{.R.Engine.BuiltOn}} at {{time .R.Engine.BuiltAt}}</td></tr>
<tr><th>Signed by</th><td>{{join .R.Engine.SignedBy ", "}}</td></tr>{{end}}
</table>
<h2>Proof that the record is in the log</h2>
<table>
<tr><th>Log index</th><td>{{.R.LogIndex}}</td></tr>
<tr><th>Leaf hash</th><td><code>{{.R.LeafHash}}</code></td></tr>
<tr><th>Signed checkpoint</th><td><pre>{{.CP}}</pre></td></tr>
<tr><th>Inclusion proof</th><td>{{range .R.Proof}}<code>{{.}}</code><br>{{end}}</td></tr>
</table>
<h2>The record, as logged</h2>
<pre>{{.R.RecordJSON}}</pre>
<h2>Machine-readable report</h2>
<pre>{{.JSON}}</pre>
</body></html>
`))
