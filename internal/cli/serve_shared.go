package cli

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/capture"
	"github.com/vouchml/vouch/audit/sqlcapture"
	"github.com/vouchml/vouch/audit/sqllog"
	"github.com/vouchml/vouch/console"
	"github.com/vouchml/vouch/server"
)

// serveSharedAudit opens the transparency log that several replicas share
// in MariaDB/MySQL (--audit-db DSN). Every replica must hold the same
// signing key (--log-key FILE, made beforehand: the DATA/keys/audit-log.key
// a single server makes on its first start, or audit.GenerateKey's); a
// missing key is an error, never a new key, so two
// replicas cannot start one log with two keys. The public log (/log/) is
// served from the database; the per-record audit API (/v1/audit) and the
// console read the shared index in the same database (package
// audit/sqlindex), which every replica keeps, with proofs from the shared
// log; --capture-inputs keeps inputs in the database too (package
// audit/sqlcapture), so that any replica replays what another served.
func (m *Main) serveSharedAudit(ctx context.Context, o ServeOptions, so *server.Options) (func(), error) {
	if o.AuditLog != "" {
		return nil, fmt.Errorf("%w: --audit-db excludes --audit-log", ErrUsage)
	}
	retain, err := capture.ParseRetain(o.Retain)
	if err != nil {
		return nil, fmt.Errorf("%w: --retain: %v", ErrUsage, err)
	}
	if o.LogKey == "" {
		return nil, fmt.Errorf("%w: --audit-db needs --log-key FILE: the signing key every replica of the shared log holds", ErrUsage)
	}
	switch o.AuditFailure {
	case "", "closed":
	case "open":
		so.AuditFailOpen = true
	default:
		return nil, fmt.Errorf("%w: --audit-failure %q: want closed or open", ErrUsage, o.AuditFailure)
	}
	if o.DataDir != "" {
		// The log is in the database; a replica's own state stays in its
		// data directory (exporters' cursors, the in-flight journal, the
		// console's key).
		if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("--data: %w", err)
		}
	}
	skey, err := audit.LoadKeyFile(o.LogKey, "", "")
	if err != nil {
		return nil, err
	}
	signer, err := audit.NewSigner(skey)
	if err != nil {
		return nil, err
	}
	l, err := sqllog.Open(ctx, sqllog.Options{DSN: o.AuditDB, Signer: signer, Logger: so.Logger})
	if err != nil {
		return nil, err
	}
	so.Appender = l
	so.Audit = l.Records()
	fmt.Fprintf(m.Stderr, "audit   shared log and index in the database (origin %s, fail %s)\n", signer.Name(), map[bool]string{false: "closed", true: "open"}[so.AuditFailOpen])
	closeLog := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.Close(cctx); err != nil {
			fmt.Fprintf(m.Stderr, "audit log close: %v\n", err)
		}
	}
	if !o.CaptureInputs {
		return closeLog, nil
	}
	store, err := sqlcapture.Open(ctx, l.DB(), sqlcapture.Options{Retain: retain})
	if err != nil {
		closeLog()
		return nil, err
	}
	so.Capture = store
	stopPurge := m.purgeDaily(store.Purge) // on every replica: a purge is idempotent
	fmt.Fprintf(m.Stderr, "capture in the database (AES-256-GCM, key per model, retain %s)\n", retainText(retain))
	return func() { stopPurge(); closeLog() }, nil
}

// purgeDaily runs a capture store's retention now and every day, until the
// returned function is called.
func (m *Main) purgeDaily(purge func() (int, error)) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(24 * time.Hour)
		defer t.Stop()
		for {
			if n, err := purge(); err != nil {
				fmt.Fprintf(m.Stderr, "capture purge: %v\n", err)
			} else if n > 0 {
				fmt.Fprintf(m.Stderr, "capture purge: %d expired inputs deleted\n", n)
			}
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(quit); <-done }
}

// consoleLog is what the console reads, from a log directory or from the
// shared log alike.
type consoleLog struct {
	console.Log
	keys    []string
	files   func(context.Context) fs.FS // the C2SP files, for verification
	exports string                      // the exporters' cursor directory
}

// consoleLogOf returns the console's view of the server's audit store;
// false when it keeps none the console can read.
func consoleLogOf(o ServeOptions, a server.AuditStore) (consoleLog, bool) {
	switch l := a.(type) {
	case *audit.Log:
		return consoleLog{Log: l, keys: l.VerifierKeys(), exports: exportDir(l.Dir()),
			files: func(context.Context) fs.FS { return os.DirFS(l.Dir()) }}, true
	case *sqllog.Records:
		return consoleLog{Log: l, keys: l.VerifierKeys(), exports: exportDir(auditDir(o.DataDir)), files: l.FS}, true
	}
	return consoleLog{}, false
}
