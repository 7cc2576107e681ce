package stream

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// CloudEvents types, as KServe's InferenceLogger names them, and vouch's
// own for records of reads of audit data.
const (
	TypeRequest  = "org.kubeflow.serving.inference.request"
	TypeResponse = "org.kubeflow.serving.inference.response"
	TypeAccess   = "dev.vouch.audit.access"
)

// CloudEventsSink posts events to an HTTP receiver in the CloudEvents 1.0
// HTTP binding's binary content mode, the form KServe's InferenceLogger
// sends and a Knative broker accepts: the attributes travel as ce-*
// headers and the body is the event data.
//
// An inference record becomes two events, as the InferenceLogger sends a
// request and a response: type [TypeRequest], whose data is the request
// half of the record (trace id, model, input digests), and type
// [TypeResponse], whose data is the whole record as logged. Both have the
// id "<log index>" (an id is unique per source and type, as the logger's
// pair is), source "<Source>", the extension attributes
// inferenceservicename (the model), modelversion, traceid, vouchlogindex,
// vouchleafhash (hex) and vouchschema, and time the record's time. An
// access record is one event of type [TypeAccess]. A receiver deduplicates
// on (source, type, id).
type CloudEventsSink struct {
	URL    string
	Source string // ce-source; default "vouch"
	Client *http.Client
}

// Send implements Sink. Each event is one POST; any status but 2xx fails
// the batch, which the exporter then sends again.
func (c *CloudEventsSink) Send(ctx context.Context, evs []Event) error {
	for _, ev := range evs {
		if ev.Kind == "access" {
			if err := c.post(ctx, ev, TypeAccess, ev.Entry); err != nil {
				return err
			}
			continue
		}
		req, err := requestHalf(ev.Entry)
		if err != nil {
			return fmt.Errorf("cloudevents: index %d: %w", ev.Index, err)
		}
		if err := c.post(ctx, ev, TypeRequest, req); err != nil {
			return err
		}
		if err := c.post(ctx, ev, TypeResponse, ev.Entry); err != nil {
			return err
		}
	}
	return nil
}

// requestHalf returns the members of a record that describe the request.
func requestHalf(entry []byte) ([]byte, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(entry, &all); err != nil {
		return nil, err
	}
	keep := map[string]json.RawMessage{}
	for _, k := range []string{"trace_id", "request_id", "traceparent", "time", "principal", "source_addr",
		"model", "model_version", "bundle_digest", "plan_digest", "input_digest", "inputs", "schema_version"} {
		if v, ok := all[k]; ok {
			keep[k] = v
		}
	}
	return json.Marshal(keep) // map keys sorted: a stable encoding
}

func (c *CloudEventsSink) post(ctx context.Context, ev Event, typ string, data []byte) error {
	src := c.Source
	if src == "" {
		src = "vouch"
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("cloudevents: %w", err)
	}
	h := r.Header
	h.Set("Content-Type", "application/json")
	h.Set("ce-specversion", "1.0")
	h.Set("ce-id", strconv.FormatUint(ev.Index, 10))
	h.Set("ce-source", src)
	h.Set("ce-type", typ)
	if !ev.Time.IsZero() {
		h.Set("ce-time", ev.Time.UTC().Format(time.RFC3339Nano))
	}
	if ev.Model != "" {
		h.Set("ce-inferenceservicename", ev.Model)
	}
	if ev.ModelVersion != "" {
		h.Set("ce-modelversion", ev.ModelVersion)
	}
	if ev.TraceID != "" {
		h.Set("ce-traceid", ev.TraceID)
	}
	h.Set("ce-vouchlogindex", strconv.FormatUint(ev.Index, 10))
	h.Set("ce-vouchleafhash", hex.EncodeToString(ev.LeafHash[:]))
	h.Set("ce-vouchschema", strconv.Itoa(ev.SchemaVersion))
	cl := c.Client
	if cl == nil {
		cl = http.DefaultClient
	}
	resp, err := cl.Do(r)
	if err != nil {
		return fmt.Errorf("cloudevents: index %d: %w", ev.Index, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("cloudevents: index %d: %s answered %s", ev.Index, c.URL, resp.Status)
	}
	return nil
}

// Close implements Sink.
func (c *CloudEventsSink) Close() error { return nil }
