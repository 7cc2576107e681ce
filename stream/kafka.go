package stream

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka record headers set on every event.
const (
	HeaderLogIndex      = "vouch-log-index"      // decimal log index: the idempotency key
	HeaderLeafHash      = "vouch-leaf-hash"      // hex RFC 6962 leaf hash of the value
	HeaderSchemaVersion = "vouch-schema-version" // the record's schema_version
	HeaderKind          = "vouch-kind"           // "inference" or "access"
)

// KafkaSink produces each event as one Kafka record: key the trace id,
// value the record's canonical JSON, headers the log index, leaf hash,
// schema version and kind. The producer is franz-go's idempotent producer
// with acks from all in-sync replicas, so a retried batch is not
// duplicated by the broker within a producer session; across sessions the
// log index header is the key to deduplicate on.
//
// A failed Send closes the client, and the next Send starts a fresh one: a
// client keeps broker metadata (topic ids, producer ids) that a restarted
// or rebuilt cluster no longer knows, and would otherwise fail for ever.
type KafkaSink struct {
	opts   []kgo.Opt
	cl     *kgo.Client
	topic  string
	broken bool
}

// NewKafkaSink connects to the seed brokers and produces to topic.
func NewKafkaSink(brokers []string, topic string, extra ...kgo.Opt) (*KafkaSink, error) {
	if len(brokers) == 0 || topic == "" {
		return nil, fmt.Errorf("stream: kafka sink needs brokers and a topic")
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(30 * time.Second),
		kgo.AllowAutoTopicCreation(),
	}, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("stream: kafka: %w", err)
	}
	return &KafkaSink{opts: opts, cl: cl, topic: topic}, nil
}

// Send implements Sink.
func (k *KafkaSink) Send(ctx context.Context, evs []Event) error {
	if k.broken {
		cl, err := kgo.NewClient(k.opts...)
		if err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		k.cl.Close()
		k.cl, k.broken = cl, false
	}
	rs := make([]*kgo.Record, len(evs))
	for i, ev := range evs {
		rs[i] = &kgo.Record{
			Key:   []byte(ev.TraceID),
			Value: ev.Entry,
			Headers: []kgo.RecordHeader{
				{Key: HeaderLogIndex, Value: []byte(strconv.FormatUint(ev.Index, 10))},
				{Key: HeaderLeafHash, Value: []byte(hex.EncodeToString(ev.LeafHash[:]))},
				{Key: HeaderSchemaVersion, Value: []byte(strconv.Itoa(ev.SchemaVersion))},
				{Key: HeaderKind, Value: []byte(ev.Kind)},
			},
		}
		// The record's own time is not the Kafka timestamp: franz-go
		// measures its delivery timeout from Timestamp, so a backlog of
		// older records would time out before it was sent.
	}
	if err := k.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		k.broken = true
		return fmt.Errorf("kafka topic %s: %w", k.topic, err)
	}
	return nil
}

// Close implements Sink.
func (k *KafkaSink) Close() error {
	k.cl.Close()
	return nil
}
