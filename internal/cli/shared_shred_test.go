package cli

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/index"
	"github.com/vouchml/vouch/audit/sqlcapture"
	"github.com/vouchml/vouch/audit/sqllog"
	"github.com/vouchml/vouch/audit/sqllog/sqltest"
	"github.com/vouchml/vouch/tensor"
)

// TestSharedShred: `vouch audit shred MODEL --audit-db DSN --log-key FILE`
// erases a model's inputs in the store replicas share — what another
// replica captured becomes unreadable — and records the erasure in the
// shared log first; another model's inputs stay. `audit purge --audit-db`
// runs the shared store's retention.
func TestSharedShred(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MariaDB")
	}
	dsn := sqltest.Start(t)
	ctx := context.Background()
	dir := t.TempDir()
	skey, vkey, err := audit.GenerateKey("vouch.test/shred")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "log.key")
	if err := os.WriteFile(keyFile, []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The tables exist once a replica has opened the shared log.
	signer, err := audit.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	l, err := sqllog.Open(ctx, sqllog.Options{DSN: dsn, Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	replica, err := sqlcapture.Open(ctx, l.DB(), sqlcapture.Options{})
	if err != nil {
		t.Fatal(err)
	}
	put := func(model string, v float32) string {
		in := map[string]*tensor.Tensor{"x": tensor.From([]float32{v, v + 1}, 1, 2)}
		d, _, err := audit.InputDigest(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := replica.Put(model, d, in); err != nil {
			t.Fatal(err)
		}
		return d
	}
	credit, fraud := put("credit", 1), put("fraud", 2)
	if code, _, errs := run(t, "audit", "shred", "credit", "--audit-db", dsn); code == 0 || !strings.Contains(errs, "--log-key") {
		t.Fatalf("shred without the log key: %d %s", code, errs)
	}
	code, out, errs := run(t, "audit", "shred", "credit", "--audit-db", dsn, "--log-key", keyFile)
	if code != 0 || !strings.Contains(out, "shredded 1 key(s) of credit in the shared store") || !strings.Contains(errs, "access recorded: shared log index") {
		t.Fatalf("shred: %d %s %s", code, out, errs)
	}
	if _, err := replica.Get(credit); err == nil {
		t.Fatal("the shredded model's input is still readable through another replica's store")
	}
	if _, err := replica.Get(fraud); err != nil {
		t.Fatalf("another model's input: %v", err)
	}
	// The erasure is a signed, proven record of the shared log.
	recs := l.Records()
	found := false
	err = recs.Query(ctx, index.Filter{Kind: audit.KindAccess}, func(row index.Row) error {
		inc, err := recs.Show(ctx, row.TraceID)
		if err != nil {
			return err
		}
		r, _, err := inc.Verify(vkey)
		if err != nil {
			return err
		}
		if r.Access != nil && r.Access.Action == "shred" && r.Access.Target == "credit" {
			found = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatal("no verified shred access record in the shared log")
	}
	// An input captured in 2020 by a replica that keeps inputs an hour.
	old, err := sqlcapture.Open(ctx, l.DB(), sqlcapture.Options{Retain: time.Hour,
		Now: func() time.Time { return time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tensor.Tensor{"x": tensor.From([]float32{7, 8}, 1, 2)}
	d, _, _ := audit.InputDigest(in)
	if err := old.Put("fraud", d, in); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := run(t, "audit", "purge", "--audit-db", dsn); code != 0 || !strings.Contains(out, "purged 1 expired inputs") {
		t.Fatalf("purge: %d %s %s", code, out, errs)
	}
	if _, err := replica.Get(d); err == nil {
		t.Fatal("the expired input survived the purge")
	}
	if _, err := replica.Get(fraud); err != nil {
		t.Fatalf("the purge took an unexpired input: %v", err)
	}
}
