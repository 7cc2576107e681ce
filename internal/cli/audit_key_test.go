package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
)

// Regression (issue 20 D): the checkpoint signing key lived in the log's
// own directory, so whoever could write the log could re-sign a rewritten
// history. New keys go elsewhere; an old data directory's key is refused
// with the command that moves it, unless a flag says to use it.
func TestLogKeyPlacement(t *testing.T) {
	const origin = "test.vouch/audit"
	data := t.TempDir()
	var warn bytes.Buffer
	skey, err := loadLogKey(&warn, data, logKeyFlags{}, origin)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(defaultLogKey(data))
	if err != nil || st.Mode().Perm() != 0o600 || strings.HasPrefix(defaultLogKey(data), auditDir(data)) {
		t.Fatalf("new key at %s: %v %v", defaultLogKey(data), st, err)
	}
	if again, err := loadLogKey(&warn, data, logKeyFlags{}, ""); err != nil || again != skey {
		t.Fatalf("reload: %v", err)
	}

	// A key readable by others is refused.
	os.Chmod(defaultLogKey(data), 0o644)
	if _, err := loadLogKey(&warn, data, logKeyFlags{}, ""); !errors.Is(err, audit.ErrKeyPlacement) {
		t.Fatalf("mode 0644 key: %v", err)
	}
	// A key inside the log directory is refused, whatever its name.
	inLog := filepath.Join(auditDir(data), "keys", "k")
	if _, err := loadLogKey(&warn, data, logKeyFlags{Path: inLog}, origin); !errors.Is(err, audit.ErrKeyPlacement) {
		t.Fatalf("key inside the log directory: %v", err)
	}

	// An old data directory: DATA/audit/log.key.
	old := t.TempDir()
	legacy, err := audit.LoadOrCreateKey(auditDir(old), origin)
	if err != nil {
		t.Fatal(err)
	}
	_, err = loadLogKey(&warn, old, logKeyFlags{}, origin)
	if !errors.Is(err, audit.ErrKeyPlacement) || !strings.Contains(err.Error(), "mv "+filepath.Join(auditDir(old), audit.KeyFile)) {
		t.Fatalf("legacy key: %v, want a refusal that says how to move it", err)
	}
	warn.Reset()
	got, err := loadLogKey(&warn, old, logKeyFlags{AllowLegacy: true}, origin)
	if err != nil || got != legacy || !strings.Contains(warn.String(), "WARNING") {
		t.Fatalf("legacy key allowed: %v %q", err, warn.String())
	}
	// Moved as told: used, and the stale copy is pointed out.
	os.MkdirAll(filepath.Dir(defaultLogKey(old)), 0o700)
	os.WriteFile(defaultLogKey(old), []byte(legacy+"\n"), 0o600)
	warn.Reset()
	if got, err := loadLogKey(&warn, old, logKeyFlags{}, origin); err != nil || got != legacy || !strings.Contains(warn.String(), "Remove the old copy") {
		t.Fatalf("moved key: %v %q", err, warn.String())
	}
}

// makeLog writes records straight into DATA/audit, keyed as serve keys it.
func makeLog(t *testing.T, data string, recs []*audit.Record) {
	t.Helper()
	ctx := t.Context()
	skey, err := loadLogKey(new(bytes.Buffer), data, logKeyFlags{}, "test.vouch/audit")
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.Open(ctx, auditDir(data), audit.Options{SignerKey: skey, CheckpointInterval: 100e6})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if _, _, err := l.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func sharedTraceRecords() []*audit.Record {
	var recs []*audit.Record
	for i, model := range []string{"first", "second", "third"} {
		recs = append(recs, &audit.Record{Kind: audit.KindInference, TraceID: strings.Repeat("ab", 16), Time: time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC),
			Principal: "app", Model: model, ModelVersion: "1", Status: audit.StatusOK, Code: 200})
	}
	return recs
}

// Regression (issue 20 D): records sharing a trace id could not be shown
// one by one; --index addresses each.
func TestAuditShowByIndex(t *testing.T) {
	data := t.TempDir()
	makeLog(t, data, sharedTraceRecords())
	code, out, errs := run(t, "audit", "show", "--index", "1", "--data", data)
	if code != 0 || !strings.Contains(out, "second@1") || !strings.Contains(out, "verified") {
		t.Fatalf("show --index 1: %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(t, "audit", "show", strings.Repeat("ab", 16), "--data", data)
	if code != 0 || !strings.Contains(out, "first@1") || !strings.Contains(errs, "2 more records share trace id") || !strings.Contains(errs, "[1 2]") {
		t.Fatalf("show TRACE of a shared trace: %d\n%s%s", code, out, errs)
	}
	if code, _, errs = run(t, "audit", "show", "--index", "99", "--data", data); code == 0 || !strings.Contains(errs, "none at index 99") {
		t.Fatalf("show --index 99: %d %s", code, errs)
	}
}

// Regression (issue 20 A8): verify --checkpoint rewrote the saved file
// without the cosignatures it held. It also warns when no earlier
// checkpoint is held.
func TestVerifyKeepsCosignatures(t *testing.T) {
	data := t.TempDir()
	makeLog(t, data, sharedTraceRecords())
	pub := filepath.Join(auditDir(data), "log.pub")
	code, _, errs := run(t, "audit", "verify", "--data", data, "--key", pub)
	if code != 0 || !strings.Contains(errs, "no earlier checkpoint") {
		t.Fatalf("verify without --checkpoint: %d %s", code, errs)
	}
	cp, err := os.ReadFile(filepath.Join(auditDir(data), "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	// A cosignature line from a witness the log does not know.
	cosig := "— witness.example/w1 AAAAAQAAAABpbGVOAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\n"
	saved := filepath.Join(t.TempDir(), "saved")
	os.WriteFile(saved, append(cp, cosig...), 0o644)
	code, out, errs := run(t, "audit", "verify", "--data", data, "--key", pub, "--checkpoint", saved)
	if code != 0 || strings.Contains(errs, "no earlier checkpoint") {
		t.Fatalf("verify --checkpoint: %d\n%s%s", code, out, errs)
	}
	got, _ := os.ReadFile(saved)
	if !strings.Contains(string(got), cosig) || !strings.HasPrefix(string(got), string(cp)) {
		t.Fatalf("the saved checkpoint lost its cosignature:\n%s", got)
	}
}

// vouch audit repair opens a log whose WAL is damaged, loudly.
func TestAuditRepairCommand(t *testing.T) {
	data := t.TempDir()
	makeLog(t, data, sharedTraceRecords())
	segs, _ := filepath.Glob(filepath.Join(auditDir(data), "wal", "*.wal"))
	if len(segs) != 1 {
		t.Fatalf("wal files: %v", segs)
	}
	// A bad header: damage, not a torn tail (four bytes that are no WAL magic).
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if code, _, errs := run(t, "audit", "show", "--index", "0", "--data", data); code == 0 || !strings.Contains(errs, "vouch audit repair") {
		t.Fatalf("show over a damaged WAL: %d %s", code, errs)
	}
	code, out, errs := run(t, "audit", "repair", "--data", data)
	if code != 0 || !strings.Contains(errs, "AUDIT REPAIR") || !strings.Contains(out, "3 entries") {
		t.Fatalf("repair: %d\n%s%s", code, out, errs)
	}
	if code, _, errs := run(t, "audit", "show", "--index", "2", "--data", data); code != 0 {
		t.Fatalf("show after repair: %d %s", code, errs)
	}
}
