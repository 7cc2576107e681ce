package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/vouchml/vouch/server"
)

// serveJournal opens the in-flight journal beside the audit log (see
// server.Journal), appends a record for every request a previous process
// left unfinished (it died during the run), and hands the journal to the
// server. Without an audit hook there is nothing to journal.
//
// The journal is written without fsync: it must survive the process's
// death (SIGKILL, a fatal runtime error), which the page cache does; a
// power loss during a run loses the entry, as it loses the run's answer.
func (m *Main) serveJournal(ctx context.Context, o ServeOptions, so *server.Options) (func(), error) {
	var path string
	switch {
	case so.Appender == nil:
		return func() {}, nil
	case o.AuditLog != "":
		path = o.AuditLog + ".inflight"
	case o.DataDir != "":
		path = filepath.Join(o.DataDir, "inflight.journal")
	default:
		return func() {}, nil
	}
	j, err := server.OpenJournal(path, false)
	if err != nil {
		return nil, err
	}
	rec, err := j.Recover(ctx, so.Appender, time.Now())
	if err != nil {
		j.Close()
		return nil, err
	}
	for _, r := range rec {
		fmt.Fprintf(m.Stderr, "audit   request %s (model %s) was interrupted when the last process ended during its run: recorded as such\n", r.TraceID, r.Model)
		if so.Logger != nil {
			so.Logger.Error("interrupted request recorded from the in-flight journal", "trace_id", r.TraceID, "model", r.Model, "accepted", r.Time)
		}
	}
	so.Journal = j
	return func() { j.Close() }, nil
}
