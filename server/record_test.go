package server

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
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
			idx, _, err := a.Append(context.Background(), &Record{SchemaVersion: 1, TraceID: "t", Time: time.Unix(int64(i), 0), Status: StatusOK})
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
	idx, leaf, err := a.Append(context.Background(), &Record{SchemaVersion: 1, TraceID: "u", Status: StatusError, Code: 400, Error: "bad"})
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
	if n != 51 || LeafHash(last) != leaf {
		t.Fatalf("%d lines; leaf hash of the last line does not match", n)
	}
	var r Record
	if err := json.Unmarshal(last, &r); err != nil || r.Code != 400 || r.TraceID != "u" {
		t.Fatalf("last record %s: %v", last, err)
	}
}
