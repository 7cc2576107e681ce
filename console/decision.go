package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/vouchml/vouch/audit/witness"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/tensor"
)

// v1Members are the record members the decision page explains itself; any
// other member (a later schema's reasons, decisions, …) is shown as recorded.
var v1Members = map[string]bool{"access": true, "backend": true, "bundle_digest": true, "code": true, "confidence": true,
	"device": true, "error": true, "input_digest": true, "inputs": true, "kind": true, "latency_us": true, "model": true,
	"model_version": true, "output_digest": true, "output_label": true, "outputs": true, "plan_digest": true,
	"precision": true, "principal": true, "profile": true, "request_id": true, "schema_version": true,
	"source_addr": true, "status": true, "time": true, "trace_id": true, "traceparent": true}

// Signature is one signature on a checkpoint.
type Signature struct {
	Name     string
	KeyHash  string // the key hash, 8 hex digits
	Verified bool
	Log      bool // the log's own key (otherwise a witness cosignature)
}

// signatures lists the signatures on a signed note, verifying those it has
// keys for (the log's and the witnesses').
func (c *Console) signatures(msg []byte) []Signature {
	var vs []note.Verifier
	logNames := map[string]bool{}
	for i, k := range append(append([]string{}, c.opt.LogKeys...), c.opt.WitnessKeys...) {
		v, err := note.NewVerifier(k)
		if err != nil && i >= len(c.opt.LogKeys) {
			// A witness's C2SP cosignature/v1 key (what litewitness and
			// the public witnesses use).
			v, err = witness.NewVerifier(k)
		}
		if err != nil {
			continue // a key of another signature type: listed, not checked here
		}
		vs = append(vs, v)
		if i < len(c.opt.LogKeys) {
			logNames[v.Name()+"+"+fmt.Sprintf("%08x", v.KeyHash())] = true
		}
	}
	// Every signature line, then each key on its own: one bad signature
	// must not hide the good ones (note.Open fails as a whole on it).
	_, err := note.Open(msg, note.VerifierList())
	var une *note.UnverifiedNoteError
	if !errors.As(err, &une) {
		return nil
	}
	good := map[string]bool{}
	for _, v := range vs {
		if n, err := note.Open(msg, note.VerifierList(v)); err == nil {
			for _, sg := range n.Sigs {
				good[sg.Name+"+"+fmt.Sprintf("%08x", sg.Hash)] = true
			}
		}
	}
	var out []Signature
	for _, sg := range une.Note.UnverifiedSigs {
		id := sg.Name + "+" + fmt.Sprintf("%08x", sg.Hash)
		out = append(out, Signature{Name: sg.Name, KeyHash: fmt.Sprintf("%08x", sg.Hash), Verified: good[id], Log: logNames[id]})
	}
	return out
}

// Field is one row of the per-field input table.
type Field struct {
	Name   string
	Values []string
}

// InputView is one captured input tensor, for people.
type InputView struct {
	Name    string
	DType   string
	Shape   []int
	Rows    []string // column heads: "row 0", …
	Fields  []Field  // rank ≤ 2: one row per feature
	Flat    string   // other ranks: the first values
	Omitted int      // values not shown
}

const (
	maxRowsShown   = 16
	maxFieldsShown = 512
	maxFlatShown   = 256
)

// formatValue prints a number with the fewest digits that read back to the
// same value in its own precision: nothing is rounded away.
func formatValue(v float64, dt tensor.DType) string {
	if dt == tensor.Float32 || dt == tensor.Float16 || dt == tensor.BFloat16 {
		return strconv.FormatFloat(v, 'g', -1, 32)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func inputView(name string, t *tensor.Tensor, features []string) InputView {
	v := InputView{Name: name, DType: t.DType.String(), Shape: t.Shape}
	vals, err := t.Float64s()
	if err != nil {
		v.Flat = t.String()
		return v
	}
	rows, cols := 1, len(vals)
	switch len(t.Shape) {
	case 2:
		rows, cols = t.Shape[0], t.Shape[1]
	case 1, 0:
	default:
		n := min(len(vals), maxFlatShown)
		parts := make([]string, n)
		for i := range n {
			parts[i] = formatValue(vals[i], t.DType)
		}
		v.Flat, v.Omitted = strings.Join(parts, " "), len(vals)-n
		return v
	}
	shownRows := min(rows, maxRowsShown)
	for r := range shownRows {
		v.Rows = append(v.Rows, fmt.Sprintf("row %d", r))
	}
	for f := range min(cols, maxFieldsShown) {
		fd := Field{Name: fmt.Sprintf("feature %d", f)}
		if f < len(features) && features[f] != "" {
			fd.Name = features[f]
		}
		for r := range shownRows {
			fd.Values = append(fd.Values, formatValue(vals[r*cols+f], t.DType))
		}
		v.Fields = append(v.Fields, fd)
	}
	v.Omitted = len(vals) - shownRows*min(cols, maxFieldsShown)
	return v
}

func (c *Console) features(model, version string) []string {
	for _, m := range c.opt.Models {
		if f := m.features(); m.Name == model && (m.Version == version || version == "") && len(f) > 0 {
			return f
		}
	}
	return nil
}

func (c *Console) decision(w http.ResponseWriter, r *http.Request, s *session) {
	trace := strings.ToLower(r.PathValue("trace"))
	inc, err := c.opt.Log.Show(r.Context(), trace)
	// Recorded before anything of the record is shown, and before its
	// input is decrypted.
	if _, ok := c.record(w, r, s, "console-decision", trace); !ok {
		return
	}
	if errors.Is(err, audit.ErrNotFound) {
		c.fail(w, r, s, http.StatusNotFound, "no record with trace id %q in the log", trace)
		return
	} else if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "reading the record: %v", err)
		return
	}
	data := map[string]any{"Inc": inc, "Trace": trace}
	rec, cp, verr := inc.Verify(c.opt.LogKeys...)
	if rec == nil {
		rec, err = audit.Parse(inc.Record)
		if err != nil {
			c.fail(w, r, s, http.StatusInternalServerError, "the record does not parse: %v", err)
			return
		}
	}
	data["Rec"] = rec
	if verr != nil {
		data["ProofErr"] = verr.Error()
	} else {
		data["CP"] = cp
		if latest, err := c.opt.Log.Checkpoint(); err == nil {
			data["Latest"] = latest
		}
	}
	data["Sigs"] = c.signatures([]byte(inc.Checkpoint))
	data["Extra"] = extraMembers(inc.Record)
	for _, m := range data["Extra"].([]Member) {
		if a, ok := m.Value.([]any); ok && m.Name == "decisions" && len(a) > 1 {
			data["RowCount"] = len(a)
		}
	}
	var pretty bytes.Buffer
	json.Indent(&pretty, inc.Record, "", "  ")
	data["Pretty"] = pretty.String()
	if rec.Kind == audit.KindInference || rec.Kind == "" {
		switch {
		case rec.InputDigest == "":
			data["InputNote"] = "The record names no input digest (the request was refused before its input was read)."
		case c.opt.Inputs == nil:
			data["InputNote"] = "This server keeps no captured inputs (start it with --capture-inputs)."
		default:
			ts, err := c.opt.Inputs.Get(rec.InputDigest)
			if err != nil {
				data["InputNote"] = "The input is not available: " + err.Error()
			} else {
				names := make([]string, 0, len(ts))
				for n := range ts {
					names = append(names, n)
				}
				sort.Strings(names)
				var views []InputView
				for _, n := range names {
					views = append(views, inputView(n, ts[n], c.features(rec.Model, rec.ModelVersion)))
				}
				data["Inputs"] = views
			}
		}
	}
	c.render(w, r, s, "decision", data)
}

// Member is one record member the decision page does not explain itself,
// as recorded (numbers keep their literal digits).
type Member struct {
	Name  string
	Value any
}

func extraMembers(raw []byte) []Member {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if d.Decode(&m) != nil {
		return nil
	}
	var out []Member
	for k, v := range m {
		if !v1Members[k] {
			out = append(out, Member{Name: k, Value: v})
		}
	}
	// Reasons first: they are what a reader looks for.
	sort.Slice(out, func(i, j int) bool {
		ri, rj := strings.Contains(out[i].Name, "reason") || strings.Contains(out[i].Name, "decision"),
			strings.Contains(out[j].Name, "reason") || strings.Contains(out[j].Name, "decision")
		if ri != rj {
			return ri
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// checkpointAge is how long ago the log's checkpoint file was written, when
// the log is a directory on this machine.
func (c *Console) checkpointAge() (time.Time, bool) {
	d, ok := c.opt.Log.(interface{ Dir() string })
	if !ok {
		return time.Time{}, false
	}
	fi, err := os.Stat(filepath.Join(d.Dir(), "checkpoint"))
	if err != nil {
		return time.Time{}, false
	}
	return fi.ModTime(), true
}
