package console

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/replay"
)

// replayRun is one replay done in a session, with its reports.
type replayRun struct {
	ID       string
	Trace    string
	At       time.Time
	Report   *replay.Report
	Err      string
	JSON     []byte
	DSSE     []byte // nil without a signing key
	HTML     []byte
	SignedBy string
}

// plans finds the engine a record names: the served model with its plan
// digest, or the registry's bundle with its bundle digest.
type plans struct {
	c         *Console
	principal string
}

func (p plans) Plan(ctx context.Context, rec *audit.Record) (*replay.Engine, error) {
	for _, m := range p.c.opt.Models {
		if m.Engine != nil && m.Engine.PlanDigest == rec.PlanDigest && (rec.BundleDigest == "" || m.Engine.BundleDigest == rec.BundleDigest) {
			return m.Engine, nil
		}
	}
	if p.c.opt.Registry != nil && rec.BundleDigest != "" {
		rp := &replay.RegistryPlans{Registry: p.c.opt.Registry, Principal: p.principal, Check: p.c.opt.Check}
		return rp.Plan(ctx, rec)
	}
	return nil, fmt.Errorf("console: no served model has plan %s (model %s@%s), and no registry holds its bundle", rec.PlanDigest, rec.Model, rec.ModelVersion)
}

func (c *Console) replay(w http.ResponseWriter, r *http.Request, s *session) {
	trace := r.PathValue("trace")
	if _, ok := c.record(w, r, s, "console-replay", trace); !ok {
		return
	}
	run := &replayRun{ID: randomID()[:16], Trace: trace, At: c.opt.Now().UTC()}
	o := replay.Options{Records: c.opt.Log, LogKeys: c.opt.LogKeys, Plans: plans{c, s.principal.Name}, Inputs: c.opt.Inputs, Now: c.opt.Now}
	rep, err := replay.Replay(r.Context(), trace, o)
	if err != nil {
		run.Err = err.Error()
	} else {
		rep.Replayer = s.principal.Name + " (vouch audit console)"
		run.Report = rep
		if run.JSON, err = rep.JSON(); err == nil && c.opt.SignKey != nil {
			run.DSSE, err = rep.Sign(c.opt.SignKey)
			run.SignedBy = c.opt.SignKey.ID()
		}
		if err == nil {
			var b bytes.Buffer
			err = rep.HTML(&b, nil)
			run.HTML = b.Bytes()
		}
		if err != nil {
			run.Err = "the report could not be written: " + err.Error()
		}
	}
	c.mu.Lock()
	if len(s.replays) >= maxReplays {
		var oldest *replayRun
		for _, x := range s.replays {
			if oldest == nil || x.At.Before(oldest.At) {
				oldest = x
			}
		}
		delete(s.replays, oldest.ID)
	}
	s.replays[run.ID] = run
	c.mu.Unlock()
	http.Redirect(w, r, "/console/replay/"+run.ID+"/view", http.StatusSeeOther)
}

func (c *Console) replayFile(w http.ResponseWriter, r *http.Request, s *session) {
	c.mu.Lock()
	run := s.replays[r.PathValue("id")]
	c.mu.Unlock()
	file := r.PathValue("file")
	if run == nil {
		c.fail(w, r, s, http.StatusNotFound, "no replay %q in this session (replays are kept for the session only): replay the decision again", r.PathValue("id"))
		return
	}
	var body []byte
	var ctype string
	switch file {
	case "view":
		if _, ok := c.record(w, r, s, "console-replay-view", run.Trace); !ok {
			return
		}
		c.render(w, r, s, "replay", map[string]any{"Run": run})
		return
	case "report.json":
		body, ctype = run.JSON, "application/json"
	case "report.dsse.json":
		body, ctype = run.DSSE, "application/vnd.dsse.envelope.v1+json"
	case "report.html":
		body, ctype = run.HTML, "text/html; charset=utf-8"
	}
	if body == nil {
		c.fail(w, r, s, http.StatusNotFound, "replay %s has no file %q", run.ID, file)
		return
	}
	if _, ok := c.record(w, r, s, "console-download", run.Trace+" "+file); !ok {
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=\"vouch-replay-%s-%s\"", run.Trace, file))
	w.Write(body)
}
