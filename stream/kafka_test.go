package stream

import (
	"context"
	"encoding/hex"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumeKafka reads topic from the cluster at addrs into seen until ctx is
// done, checking each record's headers against its value.
func consumeKafka(ctx context.Context, t *testing.T, addrs []string, topic string, seen *seenSet) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			i, err := strconv.ParseUint(h[HeaderLogIndex], 10, 64)
			if err != nil {
				t.Errorf("record without a log index header: %v", h)
				return
			}
			lh := LeafHash(r.Value)
			if h[HeaderLeafHash] != hex.EncodeToString(lh[:]) {
				t.Errorf("index %d: leaf hash header %s does not hash the value", i, h[HeaderLeafHash])
			}
			ev := EventOf(i, r.Value)
			if string(r.Key) != ev.TraceID || h[HeaderSchemaVersion] != strconv.Itoa(ev.SchemaVersion) || h[HeaderKind] != ev.Kind {
				t.Errorf("index %d: key %q headers %v do not match the record", i, r.Key, h)
			}
			seen.add(i)
		})
	}
}

// TestKafkaExporter delivers every record to a kfake cluster while the
// broker first refuses produce requests for a while, then is stopped and a
// new one is started on the same port: every log index arrives, and the
// exporter's cursor ends at the log's size.
func TestKafkaExporter(t *testing.T) {
	const topic = "vouch-audit"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	addrs := c.ListenAddrs()
	seen := newSeen()
	cctx, cstop := context.WithCancel(context.Background())
	go consumeKafka(cctx, t, addrs, topic, seen)

	l := testLog(t)
	sink, err := NewKafkaSink(addrs, topic, kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.RecordDeliveryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	e, cancel, done := runExporter(t, l, sink, filepath.Join(t.TempDir(), "cursor"))
	appendN(t, l, 0, 300)
	seen.wait(t, 300, 20*time.Second)

	// The broker refuses every produce request for 600 ms.
	var refusing atomic.Bool
	refusing.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !refusing.Load() {
			return nil, nil, false
		}
		return nil, errors.New("broker down"), true
	})
	appendN(t, l, 300, 200)
	time.Sleep(600 * time.Millisecond)
	refusing.Store(false)
	seen.wait(t, 500, 20*time.Second)

	// The broker process goes away and a new one takes its port.
	cstop()
	// kfake keeps its data in memory, so the new broker starts empty (a
	// real one would keep the topic); the consumer read the first 500
	// from the old one.
	_, port, _ := net.SplitHostPort(addrs[0])
	c.Close()
	appendN(t, l, 500, 200)
	p, _ := strconv.Atoi(port)
	c2, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(p), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	cctx2, cstop2 := context.WithCancel(context.Background())
	defer cstop2()
	go consumeKafka(cctx2, t, c2.ListenAddrs(), topic, seen)
	seen.wait(t, 700, 30*time.Second)
	cancel()
	<-done
	if e.Cursor() != 700 {
		t.Errorf("cursor %d after delivering 700 records", e.Cursor())
	}
	if x := seen.extra(700); len(x) > 0 {
		t.Errorf("indexes that are not in the log were delivered: %v", x)
	}
	t.Logf("700 records delivered, %d repeats (at-least-once)", seen.dups())
}
