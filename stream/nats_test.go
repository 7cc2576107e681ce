package stream

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startNATS runs a real nats-server with JetStream on port (-1: any) with
// its store in dir.
func startNATS(t *testing.T, port int, dir string) *natsserver.Server {
	t.Helper()
	s, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	return s
}

// TestNATSExporter delivers every record to a JetStream stream across a
// restart of the server in the middle of the stream: every log index is in
// the stream once (JetStream drops the repeats by message id).
func TestNATSExporter(t *testing.T) {
	store := t.TempDir()
	s := startNATS(t, -1, store)
	port := s.Addr().(interface{ String() string }).String()
	p, _ := strconv.Atoi(port[len("127.0.0.1:"):])
	url := "nats://" + port

	l := testLog(t)
	ctx := context.Background()
	sink, err := NewNATSSink(ctx, NATSOptions{URL: url, Subject: "vouch.audit", Stream: "AUDIT", Origin: testOrigin})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	e, cancel, done := runExporter(t, l, sink, filepath.Join(t.TempDir(), "cursor"))
	appendN(t, l, 0, 300)
	waitCursor(t, e, 300, 20*time.Second)

	// The server goes down while records keep coming, then comes back
	// with its store.
	s.Shutdown()
	s.WaitForShutdown()
	appendN(t, l, 300, 300)
	time.Sleep(300 * time.Millisecond)
	if e.Cursor() > 300 {
		t.Fatalf("cursor moved to %d while the server was down", e.Cursor())
	}
	if e.Err() == nil {
		t.Error("no delivery error reported while the server was down")
	}
	s = startNATS(t, p, store)
	defer s.Shutdown()
	appendN(t, l, 600, 100)
	waitCursor(t, e, 700, 30*time.Second)
	cancel()
	<-done

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	str, err := js.Stream(ctx, "AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	seen := newSeen()
	for seq := uint64(1); ; seq++ {
		m, err := str.GetMsg(ctx, seq)
		if err != nil {
			break
		}
		i, err := strconv.ParseUint(m.Header.Get(HeaderLogIndex), 10, 64)
		if err != nil {
			t.Fatalf("message %d without a log index", seq)
		}
		if m.Header.Get(nats.MsgIdHdr) != testOrigin+"/"+strconv.FormatUint(i, 10) {
			t.Errorf("message %d: id %q", seq, m.Header.Get(nats.MsgIdHdr))
		}
		seen.add(i)
	}
	seen.wait(t, 700, time.Second)
	if d := seen.dups(); d != 0 {
		t.Errorf("%d repeats in the stream (JetStream should drop them by message id)", d)
	}
	if x := seen.extra(700); len(x) > 0 {
		t.Errorf("indexes that are not in the log: %v", x)
	}
}

func waitCursor(t *testing.T, e *Exporter, n uint64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for e.Cursor() < n {
		if time.Now().After(deadline) {
			t.Fatalf("after %v the cursor is at %d, want %d (last error: %v)", d, e.Cursor(), n, e.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
