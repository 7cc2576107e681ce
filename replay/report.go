package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
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
	// LogKeys are the verifier keys the proof was checked against.
	LogKeys []string `json:"trusted_log_keys,omitempty"`

	InputSource  string        `json:"input_source"`
	Engine       EngineInfo    `json:"engine"`
	OutputDigest string        `json:"replayed_output_digest"`
	Outputs      []OutputCheck `json:"outputs"`
	// Decisions re-derives the record's decisions and reasons; nil for a
	// record that has none.
	Decisions *DecisionCheck `json:"decisions,omitempty"`
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
	// RanOn is where the replay ran: the device, and the instruction set
	// of the CPU kernels.
	RanOn string `json:"ran_on,omitempty"`
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
	if rec.Device != "" || rec.Backend != "" {
		fmt.Fprintf(w, "  served on  %s\n", servedOn(rec.Backend, rec.Device))
	}
	if r.Engine.RanOn != "" {
		fmt.Fprintf(w, "  ran on     %s\n", r.Engine.RanOn)
	}
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
	d := r.Decisions
	if d == nil {
		return
	}
	state := "recomputed, the same bit for bit"
	if !d.Equal {
		state = "recomputed: DIFFERENT"
	}
	rows := fmt.Sprintf("%d rows", d.Rows)
	if d.Rows == 1 {
		rows = "1 row"
	}
	fmt.Fprintf(w, "  decisions  %s, %s", rows, state)
	if d.Method != "" {
		fmt.Fprintf(w, " (reasons by %s", d.Method)
		if d.Estimate {
			fmt.Fprint(w, ", an estimate")
		}
		fmt.Fprintf(w, "; contributions %s…)", short(d.ReplayedExplanation, 23))
	}
	fmt.Fprintln(w)
	if d.Unchecked != "" {
		fmt.Fprintf(w, "  unchecked  %s\n", d.Unchecked)
	}
	for _, x := range d.Differences {
		fmt.Fprintf(w, "  DIFFERS    %s\n", x)
	}
	if len(rec.Decisions) > 0 && len(rec.Decisions[0].Reasons) > 0 {
		fmt.Fprintln(w, "  reasons    (row 0, as recorded)")
		for k, re := range rec.Decisions[0].Reasons {
			fmt.Fprintf(w, "    %d. %s\n", k+1, ReasonText(re))
		}
	}
}

// ReasonText is one reason in words: "late_payments = 6 increases the
// score by 1.2345".
func ReasonText(re audit.Reason) string {
	v := "missing"
	if !math.IsNaN(re.Value) && !math.IsInf(re.Value, 0) {
		v = full(re.Value)
	}
	if re.Contribution == 0 {
		return fmt.Sprintf("%s = %s does not change the score", re.Feature, v)
	}
	return fmt.Sprintf("%s = %s %s the score by %s", re.Feature, v, re.Direction(), full(math.Abs(re.Contribution)))
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// HTML writes a self-contained page a compliance officer can read: the
// verdict, the record, the engine's provenance, the proof and the digests;
// stats, when given, are the cross-plan error statistics. It has the audit
// console's look and print styles; every number is printed with all the
// digits it has (0.9999969 is never shown as 1.0000).
func (r *Report) HTML(w io.Writer, stats *Comparison) error {
	j, err := r.JSON()
	if err != nil {
		return err
	}
	var rec bytes.Buffer
	if err := json.Indent(&rec, []byte(r.RecordJSON), "", "  "); err != nil {
		rec.Reset()
		rec.WriteString(r.RecordJSON)
	}
	return page.Execute(w, map[string]any{"R": r, "JSON": string(j), "Stats": stats, "CP": string(r.Checkpoint.Note),
		"Record": rec.String(), "CSS": template.CSS(CSS), "Reasons": reasonRows(r)})
}

type reasonRow struct {
	Row      int
	Label    string
	Reasons  []audit.Reason
	Replayed []audit.Reason // nil when not recomputed
}

// reasonRows lists the record's decisions that have reasons, with the
// replay's recomputation of each.
func reasonRows(r *Report) []reasonRow {
	var out []reasonRow
	for i, d := range r.Record.Decisions {
		if len(d.Reasons) == 0 {
			continue
		}
		row := reasonRow{Row: i, Label: d.Label, Reasons: d.Reasons}
		if r.Decisions != nil && i < len(r.Decisions.Replayed) {
			row.Replayed = r.Decisions.Replayed[i].Reasons
		}
		out = append(out, row)
	}
	return out
}

// full prints a number with the fewest digits that read back to it.
func full(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"time": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000000 UTC") },
	"join": strings.Join,
	"conf": func(p *float64) string {
		if p == nil {
			return ""
		}
		return full(*p)
	},
	"full": full,
	"inc":  func(i int) int { return i + 1 },
	"value": func(v float64) string {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "missing"
		}
		return full(v)
	},
	"same": func(rs []audit.Reason, k int, x audit.Reason) bool {
		return k < len(rs) && rs[k].Feature == x.Feature && sameValue(rs[k].Value, x.Value) && sameBits(rs[k].Contribution, x.Contribution)
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>vouch replay {{.R.Verdict}} — {{.R.TraceID}}</title>
<style>{{.CSS}}</style></head><body><main>
<h1>Replay of trace <code>{{.R.TraceID}}</code>: <span class="verdict {{.R.Verdict}}">{{.R.Verdict}}</span></h1>
<p class="lead">{{if eq .R.Verdict "VERIFIED"}}The recorded request was re-run on the exact signed engine that served it. Its output is <b>bit-for-bit identical</b> to the output that was served: the output digests match.{{else}}The re-run output <b>differs</b> from the output that was served (the digests below do not match).{{end}}
The record's inclusion proof was checked against checkpoint {{.R.Checkpoint.Size}} of log {{.R.Checkpoint.Origin}}, signed by a trusted log key.
Replayed at {{time .R.ReplayedAt}}{{if .R.Replayer}} by {{.R.Replayer}}{{end}}.</p>
<h2>The decision</h2>
<table class="kv">
<tr><th scope="row">Model</th><td>{{.R.Record.Model}}@{{.R.Record.ModelVersion}}</td></tr>
<tr><th scope="row">Time</th><td>{{time .R.Record.Time}}</td></tr>
<tr><th scope="row">Principal</th><td>{{.R.Record.Principal}} from {{.R.Record.SourceAddr}}</td></tr>
<tr><th scope="row">Request id</th><td>{{.R.Record.RequestID}}</td></tr>
{{if .R.Record.OutputLabel}}<tr><th scope="row">Outcome</th><td><b>{{.R.Record.OutputLabel}}</b>{{if .R.Record.Confidence}} (confidence {{conf .R.Record.Confidence}}){{end}}</td></tr>{{end}}
<tr><th scope="row">Input digest</th><td><code>{{.R.Record.InputDigest}}</code><br>{{.R.InputSource}}</td></tr>
</table>
{{with .Reasons}}<h2>Principal reasons for this decision</h2>
<p>{{with $.R.Decisions}}{{if .Method}}Computed by {{.Method}}{{if .Estimate}} (an estimate){{end}}. {{end}}{{if .Equal}}The replay recomputed every row's decision and reasons with the same code and got the <b>same bits</b> (contributions digest <code>{{.ReplayedExplanation}}</code>).{{else}}The replay recomputed the decisions and reasons and got <b class="bad">different</b> results:{{end}}{{end}}</p>
{{with $.R.Decisions}}{{if .Differences}}<ul>{{range .Differences}}<li>{{.}}</li>{{end}}</ul>{{end}}{{if .Unchecked}}<p class="muted">Not checked: {{.Unchecked}}.</p>{{end}}{{end}}
{{range .}}<h3>Row {{.Row}}{{if .Label}}: {{.Label}}{{end}}</h3>
<table><thead><tr><th scope="col">#</th><th scope="col">Feature</th><th scope="col" class="num">Value</th><th scope="col">Effect</th><th scope="col" class="num">Contribution</th><th scope="col">Recomputed</th></tr></thead><tbody>
{{$rep := .Replayed}}{{range $k, $x := .Reasons}}<tr><td>{{inc $k}}</td><td>{{$x.Feature}}</td><td class="num">{{value $x.Value}}</td><td>{{$x.Direction}} the score</td><td class="num">{{full $x.Contribution}}</td><td>{{if same $rep $k $x}}<span class="ok">same</span>{{else}}<span class="bad">differs</span>{{end}}</td></tr>{{end}}
</tbody></table>{{end}}{{end}}
<h2>Outputs</h2>
<table><thead><tr><th scope="col">Output</th><th scope="col">Recorded digest</th><th scope="col">Replayed digest</th><th scope="col">Same</th></tr></thead><tbody>
{{range .R.Outputs}}<tr><td>{{.Name}} {{.DType}}{{.Shape}}</td><td><code>{{.Recorded}}</code></td><td><code>{{.Replayed}}</code></td><td>{{if .Equal}}<span class="ok">yes</span>{{else}}<span class="bad">no</span>{{end}}</td></tr>{{end}}
</tbody></table>
{{with .Stats}}<h2>Error statistics against another engine</h2>
<table><thead><tr><th scope="col">Output</th><th scope="col" class="num">max abs</th><th scope="col" class="num">mean abs</th><th scope="col" class="num">p99 abs</th><th scope="col" class="num">max rel</th><th scope="col" class="num">KL</th><th scope="col" class="num">top-1</th><th scope="col">pass</th></tr></thead><tbody>
{{range .Outputs}}<tr><td>{{.Name}}</td><td class="num">{{full .AbsMax}}</td><td class="num">{{full .AbsMean}}</td><td class="num">{{full .AbsP99}}</td><td class="num">{{full .RelMax}}</td><td class="num">{{full .KL}}</td><td class="num">{{full .Top1}}</td><td>{{.Pass}}</td></tr>{{end}}
</tbody></table>{{end}}
<h2>The engine</h2>
<table class="kv">
<tr><th scope="row">Served by</th><td>{{.R.Engine.Source}}</td></tr>
<tr><th scope="row">Plan digest</th><td><code>{{.R.Engine.PlanDigest}}</code></td></tr>
{{if .R.Engine.RanOn}}<tr><th scope="row">Replayed on</th><td>{{.R.Engine.RanOn}}</td></tr>{{end}}
{{if .R.Engine.BundleDigest}}<tr><th scope="row">Bundle digest</th><td><code>{{.R.Engine.BundleDigest}}</code></td></tr>{{end}}
{{if .R.Engine.Model}}<tr><th scope="row">Model build</th><td>{{.R.Engine.Model}} from source <code>{{.R.Engine.SourceDigest}}</code></td></tr>
<tr><th scope="row">Built by</th><td>{{.R.Engine.Builder}} on {{.R.Engine.BuiltOn}} at {{time .R.Engine.BuiltAt}}</td></tr>
<tr><th scope="row">Signed by</th><td>{{join .R.Engine.SignedBy ", "}}</td></tr>{{end}}
</table>
<h2>Proof that the record is in the log</h2>
<table class="kv">
<tr><th scope="row">Log index</th><td>{{.R.LogIndex}}</td></tr>
<tr><th scope="row">Leaf hash</th><td><code>{{.R.LeafHash}}</code></td></tr>
<tr><th scope="row">Trusted log key</th><td>{{range .R.LogKeys}}<code>{{.}}</code><br>{{else}}<span class="muted">not given</span>{{end}}</td></tr>
<tr><th scope="row">Signed checkpoint</th><td><pre>{{.CP}}</pre></td></tr>
<tr><th scope="row">Inclusion proof</th><td>{{range .R.Proof}}<code>{{.}}</code><br>{{end}}</td></tr>
</table>
<h2>The record</h2>
<pre>{{.Record}}</pre>
<p class="muted">As logged, byte for byte (its SHA-256 with a 0x00 prefix is the leaf hash):</p>
<pre>{{.R.RecordJSON}}</pre>
<h2>Machine-readable report</h2>
<pre>{{.JSON}}</pre>
</main></body></html>
`))

// servedOn is the record's backend and device in one phrase, as the
// serving engine recorded them ("cuda-exact on cuda:0 NVIDIA H200 …").
func servedOn(backend, device string) string {
	switch {
	case backend == "":
		return device
	case device == "":
		return backend
	}
	return backend + " on " + device
}
