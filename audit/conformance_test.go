package audit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/audittest"
	"github.com/vouchml/vouch/audit/index"
)

func openLog(t *testing.T, d audit.Durability) (*audit.Log, string) {
	skey, vkey, err := audit.GenerateKey("vouch.test/conformance")
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.Open(context.Background(), t.TempDir(), audit.Options{SignerKey: skey, Durability: d, CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, vkey
}

func TestConformance(t *testing.T) {
	for _, d := range []audit.Durability{audit.Durable, audit.Async} {
		t.Run(d.String(), func(t *testing.T) {
			l, _ := openLog(t, d)
			audittest.TestAppender(t, l, l.Entry, l.Sync)
		})
	}
}

func TestExportRoundTrip(t *testing.T) {
	ctx := context.Background()
	l, vkey := openLog(t, audit.Durable)
	for i := range 300 {
		if _, _, err := l.Append(ctx, audittest.Record(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := l.Export(ctx, &buf, index.Filter{Since: time.Date(2025, 6, 1, 0, 0, 0, 100, time.UTC)})
	if err != nil || n != 200 {
		t.Fatalf("export: %d records, %v", n, err)
	}
	seen := 0
	cp, m, err := audit.VerifyExport(bytes.NewReader(buf.Bytes()), func(inc *audit.Inclusion, r *audit.Record) error {
		seen++
		return nil
	}, vkey)
	if err != nil || m != 200 || seen != 200 || cp.Size < 300 {
		t.Fatalf("verify export: %d records, %v", m, err)
	}
	// One changed byte in a record breaks its proof, and the error names the line.
	bad := bytes.Replace(buf.Bytes(), []byte(`"principal":"conformance"`), []byte(`"principal":"conformancf"`), 1)
	if _, _, err := audit.VerifyExport(bytes.NewReader(bad), nil, vkey); !errors.Is(err, audit.ErrProof) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("tampered export: %v", err)
	}
	_, other, _ := audit.GenerateKey("vouch.test/conformance")
	if _, _, err := audit.VerifyExport(bytes.NewReader(buf.Bytes()), nil, other); !errors.Is(err, audit.ErrCheckpoint) {
		t.Fatalf("export under a foreign key: %v", err)
	}
}

func TestHandlerServesOnlyTiles(t *testing.T) {
	ctx := context.Background()
	l, vkey := openLog(t, audit.Durable)
	for i := range 10 {
		l.Append(ctx, audittest.Record(i))
	}
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(l.Handler())
	defer srv.Close()
	for path, want := range map[string]int{
		"/checkpoint": 200, "/tile/0/000.p/10": 200, "/tile/entries/000.p/10": 200,
		"/index.db": 404, "/wal/": 404, "/.state/treeState": 404, "/log.pub": 404, "/tile/../index.db": 404,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
		// C2SP tlog-tiles (issue 20 A8: it was application/octet-stream).
		if ct := resp.Header.Get("Content-Type"); path == "/checkpoint" && ct != "text/plain; charset=utf-8" {
			t.Errorf("GET /checkpoint: Content-Type %q", ct)
		}
	}
	// What is served verifies.
	if _, err := audit.Verify(ctx, os.DirFS(l.Dir()), audit.VerifyOptions{VerifierKeys: []string{vkey}}); err != nil {
		t.Fatal(err)
	}
}

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "audit-example-")
	defer os.RemoveAll(dir)
	skey, vkey, _ := audit.GenerateKey("example.com/vouch/audit")
	l, err := audit.Open(ctx, dir, audit.Options{SignerKey: skey, CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	rec := &audit.Record{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Time: time.Now(), Model: "credit", Code: 200}
	i, _, err := l.Append(ctx, rec) // durable on return
	if err != nil {
		panic(err)
	}
	inc, _ := l.Show(ctx, rec.TraceID) // record, inclusion proof, signed checkpoint
	got, _, err := inc.Verify(vkey)    // offline check
	fmt.Println(i, got.Model, err)
	l.Close(ctx)
	// Output: 0 credit <nil>
}
