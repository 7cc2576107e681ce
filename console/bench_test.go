package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/index"
	"github.com/vouchml/vouch/server"
)

// indexLog is a Log over a bare index: what the search page reads.
type indexLog struct{ db *index.DB }

var errBench = errors.New("console: not in the benchmark")

func (l indexLog) Query(ctx context.Context, f index.Filter, fn func(index.Row) error) error {
	return l.db.Query(ctx, f, fn)
}
func (indexLog) Entry(uint64) ([]byte, error)                           { return nil, errBench }
func (indexLog) Show(context.Context, string) (*audit.Inclusion, error) { return nil, errBench }
func (indexLog) Export(context.Context, io.Writer, index.Filter) (int, error) {
	return 0, errBench
}
func (indexLog) Checkpoint() (*audit.Checkpoint, error) { return nil, errBench }

const benchRows = 1_000_000

var (
	benchOnce sync.Once
	benchDir  string
	benchDB   *index.DB
	benchT0   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	benchErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDB != nil {
		benchDB.Close()
	}
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// benchIndex fills an index with a million rows through the index's own
// insert path (DB.Add, in batches as the log's indexer does): three
// models, two versions, a thousand principals, a decision a second.
func benchIndex(b *testing.B) *index.DB {
	benchOnce.Do(func() {
		if benchDir, benchErr = os.MkdirTemp("", "vouch-console-bench"); benchErr != nil {
			return
		}
		if benchDB, benchErr = index.Open(filepath.Join(benchDir, "index.db"), false); benchErr != nil {
			return
		}
		ctx := context.Background()
		rows := make([]index.Row, 0, 10000)
		for i := range benchRows {
			rows = append(rows, index.Row{Index: uint64(i), TraceID: fmt.Sprintf("%032x", uint64(i)*2654435761),
				Time: benchT0.Add(time.Duration(i) * time.Second), Kind: "inference",
				Model: []string{"credit", "fraud", "triage"}[i%3], Version: []string{"1", "2"}[i/500000],
				Principal: fmt.Sprintf("svc-%03d", i%1000), Status: "ok", Label: []string{"approve", "decline"}[i%7/6]})
			if len(rows) == cap(rows) {
				if benchErr = benchDB.Add(ctx, rows); benchErr != nil {
					return
				}
				rows = rows[:0]
			}
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDB
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// BenchmarkSearchPage serves the search page (sign-in done, the access
// record appended to a durable transparency log, the page rendered) over
// an index of a million records.
func BenchmarkSearchPage(b *testing.B) {
	db := benchIndex(b)
	ctx := context.Background()
	l := openLog(b, audit.Durable)
	defer l.Close(ctx)
	creds, err := server.ParseCredentials(strings.NewReader("auditor audit " + server.HashToken("t") + "\n"))
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(Options{Log: indexLog{db}, Appender: l, Credentials: creds, LogKeys: l.VerifierKeys()})
	if err != nil {
		b.Fatal(err)
	}
	h := c.Handler()
	session := signIn(b, h)
	for _, q := range []struct{ name, query string }{
		{"first-page", ""},
		{"model", "model=fraud"},
		{"model-version-outcome", "model=triage&version=2&outcome=decline"},
		{"time-range", "since=2026-01-06T00:00&until=2026-01-07T00:00"},
		{"model-time-range", "model=credit&since=2026-01-06T00:00&until=2026-01-07T00:00"},
		{"principal", "principal=svc-417"},
		{"principal-absent", "principal=nobody"},
		{"outcome-absent", "outcome=refer"},
		{"model-outcome-absent", "model=fraud&outcome=refer"},
		{"trace", "trace=" + fmt.Sprintf("%032x", uint64(777777)*2654435761)},
		{"page-deep", "model=fraud&before=" + formatCursor(index.Cursor{Time: benchT0.Add(1000 * time.Second), Index: 1000})},
	} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest("GET", "/console/?"+q.query, nil)
				req.AddCookie(session)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 || !strings.Contains(rec.Body.String(), `href="/console/decision/`) && !strings.HasSuffix(q.name, "-absent") {
					b.Fatalf("%s: %d %s", q.query, rec.Code, rec.Body.String())
				}
			}
		})
	}
}
