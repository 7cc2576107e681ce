package console

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/index"
	"github.com/vouchml/vouch/bundle"
)

// LagView is one exporter's distance behind the log.
type LagView struct {
	Name    string
	Entries uint64
}

func (c *Console) logPage(w http.ResponseWriter, r *http.Request, s *session) {
	if _, ok := c.record(w, r, s, "console-log", ""); !ok {
		return
	}
	data := map[string]any{"LogKeys": c.opt.LogKeys, "CanVerify": c.opt.Verify != nil}
	cp, err := c.opt.Log.Checkpoint()
	if err != nil {
		data["Error"] = err.Error()
	} else {
		data["CP"] = cp
		data["CPText"] = string(cp.Note)
		data["Sigs"] = c.signatures(cp.Note)
	}
	if t, ok := c.checkpointAge(); ok {
		data["CPTime"] = t
	}
	if c.opt.ExporterLag != nil {
		var lags []LagView
		for n, l := range c.opt.ExporterLag() {
			lags = append(lags, LagView{n, l})
		}
		sort.Slice(lags, func(i, j int) bool { return lags[i].Name < lags[j].Name })
		data["Lags"] = lags
	}
	c.mu.Lock()
	data["Last"] = c.lastVer
	c.mu.Unlock()
	c.render(w, r, s, "log", data)
}

func (c *Console) verify(w http.ResponseWriter, r *http.Request, s *session) {
	if c.opt.Verify == nil {
		c.fail(w, r, s, http.StatusNotFound, "this console cannot verify the log")
		return
	}
	if _, ok := c.record(w, r, s, "console-verify", "log"); !ok {
		return
	}
	v := &verification{At: c.opt.Now().UTC(), By: s.principal.Name}
	rep, err := c.opt.Verify(r.Context())
	v.Report = rep
	if err != nil {
		v.Err = err.Error()
	}
	c.mu.Lock()
	c.lastVer = v
	c.mu.Unlock()
	http.Redirect(w, r, "/console/log#verification", http.StatusSeeOther)
}

func (c *Console) exportForm(w http.ResponseWriter, r *http.Request, s *session) {
	today := c.opt.Now().UTC().Format("2006-01-02")
	c.render(w, r, s, "export", map[string]any{"Since": today, "Until": c.opt.Now().UTC().AddDate(0, 0, 1).Format("2006-01-02"),
		"Models": c.modelNames(), "Signed": c.opt.SignKey != nil})
}

// maxExportBytes bounds one export held in memory before it is zipped.
const maxExportBytes = 512 << 20

type limitedBuffer struct {
	bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxExportBytes {
		return 0, fmt.Errorf("console: the export passes %d MiB: choose a shorter date range", maxExportBytes>>20)
	}
	return b.Buffer.Write(p)
}

// export answers a zip: export.jsonl (records with inclusion proofs and the
// signed checkpoint, audit.VerifyExport), its DSSE signature, export.csv
// (one row a decision) and the log's verifier key.
func (c *Console) export(w http.ResponseWriter, r *http.Request, s *session) {
	since, err1 := parseTime("from", r.PostFormValue("since"))
	until, err2 := parseTime("to", r.PostFormValue("until"))
	model := strings.TrimSpace(r.PostFormValue("model"))
	f := index.Filter{Kind: audit.KindInference, Model: model, Since: since, Until: until}
	target := fmt.Sprintf("since=%s until=%s model=%s", r.PostFormValue("since"), r.PostFormValue("until"), model)
	if _, ok := c.record(w, r, s, "console-export", target); !ok {
		return
	}
	if err := errors.Join(err1, err2); err != nil {
		c.fail(w, r, s, http.StatusBadRequest, "%v", err)
		return
	}
	var jl limitedBuffer
	n, err := c.opt.Log.Export(r.Context(), &jl, f)
	if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "export: %v", err)
		return
	}
	// Verify what is handed over, and make the CSV from the verified lines.
	var cb bytes.Buffer
	cw := csv.NewWriter(&cb)
	cw.Write([]string{"log_index", "leaf_hash", "time", "trace_id", "request_id", "principal", "model", "model_version",
		"status", "code", "output_label", "confidence", "input_digest", "output_digest", "plan_digest", "bundle_digest"})
	_, _, err = audit.VerifyExport(bytes.NewReader(jl.Bytes()), func(inc *audit.Inclusion, rec *audit.Record) error {
		conf := ""
		if rec.Confidence != nil {
			conf = strconv.FormatFloat(*rec.Confidence, 'g', -1, 64)
		}
		return cw.Write([]string{strconv.FormatUint(inc.Index, 10), inc.LeafHash, rec.Time.UTC().Format(time.RFC3339Nano), rec.TraceID,
			rec.RequestID, rec.Principal, rec.Model, rec.ModelVersion, rec.Status, strconv.Itoa(rec.Code), rec.OutputLabel, conf,
			rec.InputDigest, rec.OutputDigest, rec.PlanDigest, rec.BundleDigest})
	}, c.opt.LogKeys...)
	cw.Flush()
	if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "the export does not verify, so it is not handed over: %v", err)
		return
	}
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	put := func(name string, b []byte) {
		fw, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: c.opt.Now().UTC()})
		if err == nil {
			fw.Write(b)
		}
	}
	put("export.jsonl", jl.Bytes())
	if c.opt.SignKey != nil {
		env, err := signEnvelope(c.opt.SignKey, jl.Bytes())
		if err != nil {
			c.fail(w, r, s, http.StatusInternalServerError, "signing the export: %v", err)
			return
		}
		put("export.jsonl.dsse.json", env)
	}
	put("export.csv", cb.Bytes())
	put("log.pub", []byte(strings.Join(c.opt.LogKeys, "\n")+"\n"))
	put("README.txt", []byte(fmt.Sprintf(exportReadme, n, target, s.principal.Name, c.opt.Now().UTC().Format(time.RFC3339))))
	if err := zw.Close(); err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "export: %v", err)
		return
	}
	name := "vouch-export-" + strings.ReplaceAll(r.PostFormValue("since"), ":", "") + "-" + strings.ReplaceAll(r.PostFormValue("until"), ":", "") + ".zip"
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	w.Write(zb.Bytes())
}

const exportReadme = `vouch regulator export: %d decisions (%s), exported by %s at %s.

export.jsonl            the records as logged, each with its RFC 6962 inclusion proof, and
                        the log's signed checkpoint on the first line
                        (verify: vouch audit verify --export export.jsonl --key log.pub)
export.jsonl.dsse.json  a DSSE envelope over export.jsonl by the exporting console's key
export.csv              one row per decision, from the verified records
log.pub                 the log's verifier key the proofs were checked against
`

// ExportPayloadType is the DSSE payload type of a signed regulator export.
const ExportPayloadType = "application/vnd.vouch.audit-export+jsonl"

func signEnvelope(k *bundle.PrivateKey, b []byte) ([]byte, error) {
	return bundle.SignEnvelope(k, ExportPayloadType, b)
}
