package server

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"golang.org/x/mod/sumdb/tlog"
)

// The file appender gives dense indexes, leaf hashes over each line, and
// continues the count when reopened; concurrent appends share fsyncs.
func TestFileAppender(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := OpenFileAppender(path, true)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	seen := make([]bool, 50)
	var mu sync.Mutex
	for i := range 50 {
		wg.Go(func() {
			idx, _, err := a.Append(context.Background(), &audit.Record{TraceID: "t", Time: time.Unix(int64(i), 0), Status: audit.StatusOK})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[idx] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	for i, ok := range seen {
		if !ok {
			t.Fatalf("index %d never returned", i)
		}
	}
	a.Close()
	a, err = OpenFileAppender(path, false)
	if err != nil {
		t.Fatal(err)
	}
	idx, leaf, err := a.Append(context.Background(), &audit.Record{TraceID: "u", Time: time.Unix(99, 0), Status: audit.StatusError, Code: 400, Error: "bad"})
	if err != nil || idx != 50 {
		t.Fatalf("reopened: index %d, %v", idx, err)
	}
	a.Close()
	f, _ := os.Open(path)
	defer f.Close()
	sc := bufio.NewScanner(f)
	var last []byte
	n := 0
	for sc.Scan() {
		last = append([]byte(nil), sc.Bytes()...)
		n++
	}
	if n != 51 || [32]byte(tlog.RecordHash(last)) != leaf {
		t.Fatalf("%d lines; leaf hash of the last line does not match", n)
	}
	// Each line is the record's canonical encoding, the log's entry bytes.
	r, err := audit.Parse(last)
	if err != nil || r.Code != 400 || r.TraceID != "u" {
		t.Fatalf("last record %s: %v", last, err)
	}
}
