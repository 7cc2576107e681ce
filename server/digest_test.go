package server

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/tensor"
)

// The server keeps no record type or digest of its own: the record that a
// served request leaves in the log is audit.Record, its input digest is
// audit.InputDigest of the tensors the client sent (the worked example of
// docs/audit-digest.md), and the entry parses back with audit.Parse, the
// function replay and `vouch audit` read it with.
func TestServedRecordIsAuditRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	fa, err := OpenFileAppender(path, false)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Appender: fa})
	if err := s.AddModel(&slowRunner{}); err != nil {
		t.Fatal(err)
	}
	hs := newTestServer(t, s)
	resp, _ := httpCall(t, "POST", hs.URL+"/v2/models/slow/infer", "", strings.NewReader(inferBody))
	if resp.StatusCode != 200 {
		t.Fatalf("infer: %s", resp.Status)
	}
	fa.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line := bytes.TrimSuffix(b, []byte("\n"))
	rec, err := audit.Parse(line)
	if err != nil {
		t.Fatalf("served record does not parse as audit.Record: %v\n%s", err, line)
	}
	want, per, err := audit.InputDigest(map[string]*tensor.Tensor{"x": tensor.From([]float32{1, -2.5}, 1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if want != "sha256:1ecc0bdc29fb96d249c058166db012fe2c554016303a540d2ec4be6e05c48f04" {
		t.Fatalf("audit.InputDigest of the worked example is %s", want)
	}
	if rec.InputDigest != want || len(rec.Inputs) != 1 || rec.Inputs[0].Digest != per[0].Digest {
		t.Errorf("served input digest %s %v, audit.InputDigest %s %v", rec.InputDigest, rec.Inputs, want, per)
	}
	outs, _, _ := audit.InputDigest(map[string]*tensor.Tensor{"y": tensor.From([]float32{2, -5}, 1, 2)})
	if rec.OutputDigest != outs {
		t.Errorf("served output digest %s, audit.InputDigest of the outputs %s", rec.OutputDigest, outs)
	}
	if again, err := rec.MarshalCanonical(); err != nil || !bytes.Equal(again, line) {
		t.Errorf("re-encoded record differs: %v", err)
	}
	if rec.Time.IsZero() || time.Since(rec.Time) > time.Hour {
		t.Errorf("record time %v", rec.Time)
	}
}
