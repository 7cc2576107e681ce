package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/sqllog"
	"github.com/vouchml/vouch/server"
)

// serveSharedAudit opens the transparency log that several replicas share
// in MariaDB/MySQL (--audit-db DSN). Every replica must hold the same
// signing key (--log-key FILE, made beforehand: `vouch audit keygen` or
// audit.GenerateKey); a missing key is an error, never a new key, so two
// replicas cannot start one log with two keys. The public log (/log/) is
// served from the database; the per-record audit API (/v1/audit, which
// reads a local index) is not available on the shared log yet.
func (m *Main) serveSharedAudit(ctx context.Context, o ServeOptions, so *server.Options) (func(), error) {
	if o.AuditLog != "" || o.CaptureInputs {
		return nil, fmt.Errorf("%w: --audit-db excludes --audit-log and --capture-inputs", ErrUsage)
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
	skey, err := audit.LoadKeyFile(o.LogKey, "", "")
	if err != nil {
		return nil, err
	}
	signer, err := audit.NewSigner(skey)
	if err != nil {
		return nil, err
	}
	l, err := sqllog.Open(ctx, sqllog.Options{DSN: o.AuditDB, Signer: signer})
	if err != nil {
		return nil, err
	}
	so.Appender = l
	so.PublicLog = l.Handler()
	fmt.Fprintf(m.Stderr, "audit   shared log in the database (origin %s, fail %s)\n", signer.Name(), map[bool]string{false: "closed", true: "open"}[so.AuditFailOpen])
	return func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.Close(cctx); err != nil {
			fmt.Fprintf(m.Stderr, "audit log close: %v\n", err)
		}
	}, nil
}
