// Package stream delivers the audit log's records to a bank's data
// platform: Kafka, NATS JetStream, or any receiver of CloudEvents over HTTP
// (a Knative broker, KServe's InferenceLogger format).
//
// The transparency log stays the source of truth. An [Exporter] is a cursor
// over the log: it reads the entries after its cursor, hands them to a
// [Sink] in log order, and advances the cursor only once the sink has
// acknowledged them, persisting it to a small file so that a restarted
// server resumes where the last acknowledged batch ended. Delivery is
// therefore at least once: a batch in flight when the process dies is sent
// again, and every event carries its log index (and leaf hash) so that the
// receiver can drop the repeat. Serving never waits for an exporter: the
// exporter reads what the log has already made durable, on its own
// goroutine, and a dead or slow sink only makes its lag grow (exported as a
// metric) until it catches up.
//
// # Cursor file, version 1
//
// The cursor file is three lines of text, written to a temporary file,
// synced and renamed over the old one:
//
//	vouch-export-cursor v1
//	<exporter name>
//	<next log index to deliver, decimal>
//
// A file whose first line differs, whose name is another exporter's, or
// whose index is not a decimal number is refused with an error: an exporter
// never silently restarts from zero (which would resend the whole log) or
// skips ahead.
package stream
