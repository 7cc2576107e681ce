package stream

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Open returns the sink a URL names:
//
//	kafka://HOST:PORT[,HOST:PORT...]/TOPIC
//	nats://HOST:PORT/SUBJECT[?stream=NAME]   (stream: create or update it to capture SUBJECT)
//	http://HOST[:PORT]/PATH, https://...     (CloudEvents, binary mode)
//
// origin is the log's origin line; it prefixes NATS message ids and is the
// CloudEvents source.
func Open(ctx context.Context, raw, origin string) (Sink, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("stream: export target %q: %w", raw, err)
	}
	switch u.Scheme {
	case "kafka":
		topic := strings.Trim(u.Path, "/")
		if u.Host == "" || topic == "" || strings.Contains(topic, "/") {
			return nil, fmt.Errorf("stream: export target %q: want kafka://HOST:PORT[,HOST:PORT]/TOPIC", raw)
		}
		return NewKafkaSink(strings.Split(u.Host, ","), topic)
	case "nats":
		subj := strings.Trim(u.Path, "/")
		if u.Host == "" || subj == "" {
			return nil, fmt.Errorf("stream: export target %q: want nats://HOST:PORT/SUBJECT[?stream=NAME]", raw)
		}
		return NewNATSSink(ctx, NATSOptions{URL: "nats://" + u.Host, Subject: subj, Stream: u.Query().Get("stream"), Origin: origin})
	case "http", "https":
		if u.Host == "" {
			return nil, fmt.Errorf("stream: export target %q: no host", raw)
		}
		return &CloudEventsSink{URL: raw, Source: origin, Client: &http.Client{Timeout: 10 * time.Second}}, nil
	}
	return nil, fmt.Errorf("stream: export target %q: scheme must be kafka, nats, http or https", raw)
}

// Name returns a short name for an export target, safe for file names and
// metric labels: scheme, host and path, without credentials or query,
// with every byte but letters, digits, '-' and '.' replaced by '_'.
func Name(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		raw = u.Scheme + "_" + u.Host + u.Path
	}
	var b strings.Builder
	for _, r := range raw {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 100 {
			break
		}
	}
	return b.String()
}
