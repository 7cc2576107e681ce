package stream

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSSink publishes each event to a JetStream subject, waiting for the
// stream's acknowledgement of every message. Each message carries
// Nats-Msg-Id "<origin>/<log index>", so JetStream drops a repeat within its
// duplicate window, and the headers of [KafkaSink] (log index, leaf hash,
// schema version, kind) plus the trace id.
type NATSSink struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
	origin  string
}

// NATSOptions configures a NATSSink.
type NATSOptions struct {
	URL     string // nats://host:port
	Subject string // subject the messages go to
	// Stream, when set, is created (or updated) to capture Subject.
	Stream string
	// Origin prefixes the message ids (the log's origin), so that two logs
	// exporting into one stream do not collide.
	Origin string
}

// NewNATSSink connects to the server. The connection reconnects forever
// in the background; while it is down, Send fails and the exporter retries.
func NewNATSSink(ctx context.Context, o NATSOptions) (*NATSSink, error) {
	if o.URL == "" || o.Subject == "" {
		return nil, fmt.Errorf("stream: nats sink needs a URL and a subject")
	}
	nc, err := nats.Connect(o.URL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.RetryOnFailedConnect(true), nats.Name("vouch-exporter"))
	if err != nil {
		return nil, fmt.Errorf("stream: nats %s: %w", o.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("stream: nats: %w", err)
	}
	if o.Stream != "" {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := js.CreateOrUpdateStream(cctx, jetstream.StreamConfig{
			Name: o.Stream, Subjects: []string{o.Subject}, Storage: jetstream.FileStorage,
			Duplicates: 10 * time.Minute,
		})
		cancel()
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("stream: nats stream %s: %w", o.Stream, err)
		}
	}
	return &NATSSink{nc: nc, js: js, subject: o.Subject, origin: o.Origin}, nil
}

// Send implements Sink.
func (s *NATSSink) Send(ctx context.Context, evs []Event) error {
	if !s.nc.IsConnected() {
		return fmt.Errorf("nats: not connected (%s)", s.nc.Status())
	}
	futs := make([]jetstream.PubAckFuture, 0, len(evs))
	for _, ev := range evs {
		m := nats.NewMsg(s.subject)
		m.Data = ev.Entry
		m.Header.Set(nats.MsgIdHdr, s.origin+"/"+strconv.FormatUint(ev.Index, 10))
		m.Header.Set(HeaderLogIndex, strconv.FormatUint(ev.Index, 10))
		m.Header.Set(HeaderLeafHash, hex.EncodeToString(ev.LeafHash[:]))
		m.Header.Set(HeaderSchemaVersion, strconv.Itoa(ev.SchemaVersion))
		m.Header.Set(HeaderKind, ev.Kind)
		m.Header.Set("vouch-trace-id", ev.TraceID)
		f, err := s.js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("nats publish index %d: %w", ev.Index, err)
		}
		futs = append(futs, f)
	}
	var errs []error
	for i, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs = append(errs, fmt.Errorf("nats ack of index %d: %w", evs[i].Index, err))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			errs = append(errs, fmt.Errorf("nats ack of index %d: timed out", evs[i].Index))
		}
		if len(errs) > 0 {
			break
		}
	}
	return errors.Join(errs...)
}

// Close implements Sink.
func (s *NATSSink) Close() error {
	s.nc.Close()
	return nil
}
