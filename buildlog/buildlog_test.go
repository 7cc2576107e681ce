package buildlog

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestJSONLines(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf)
	l.Clock = func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }
	l.Info("fold-constants", "folded", map[string]any{"node": "n1"})
	l.Warn("quant", "clipped", map[string]any{"fraction": 0.032})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	var r Record
	if err := json.Unmarshal([]byte(lines[1]), &r); err != nil {
		t.Fatal(err)
	}
	if r.Level != Warn || r.Pass != "quant" || r.Fields["fraction"] != 0.032 || !r.Time.Equal(l.Clock()) {
		t.Fatalf("record %+v", r)
	}
	if l.Count("fold-constants", "folded") != 1 || l.Err() != nil {
		t.Fatal("count or error")
	}
	var nilLog *Log
	nilLog.Info("x", "y", nil) // a nil log discards
}
