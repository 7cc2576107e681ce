// Package buildlog records every decision a build makes, as JSON lines:
//
//	{"time":"2026-11-29T19:00:00.123456Z","level":"info","pass":"fold-constants","event":"folded","fields":{...}}
//
// One line per event; fields hold the evidence (which nodes became which
// layer, which constant was folded, each tactic timing, each range warning).
// A build writes the log next to its plan, and the bundle carries it. The
// Clock is injectable so tests (and reproducible builds) can fix it.
package buildlog

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Levels.
const (
	Info  = "info"
	Warn  = "warn"
	Debug = "debug"
)

// Record is one line of the build log.
type Record struct {
	Time   time.Time      `json:"time"`
	Level  string         `json:"level"`
	Pass   string         `json:"pass"`
	Event  string         `json:"event"`
	Fields map[string]any `json:"fields,omitempty"`
}

// Log collects records and, when W is set, streams them as JSON lines.
type Log struct {
	mu      sync.Mutex
	W       io.Writer
	Clock   func() time.Time
	Records []Record
	err     error
}

// New returns a Log streaming to w (nil: keep in memory only).
func New(w io.Writer) *Log { return &Log{W: w, Clock: time.Now} }

// Add appends a record.
func (l *Log) Add(level, pass, event string, fields map[string]any) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := Record{Time: l.Clock().UTC(), Level: level, Pass: pass, Event: event, Fields: fields}
	l.Records = append(l.Records, r)
	if l.W != nil && l.err == nil {
		b, err := json.Marshal(r)
		if err == nil {
			b = append(b, '\n')
			_, err = l.W.Write(b)
		}
		l.err = err
	}
}

// Info records an informational event.
func (l *Log) Info(pass, event string, fields map[string]any) { l.Add(Info, pass, event, fields) }

// Warn records a warning.
func (l *Log) Warn(pass, event string, fields map[string]any) { l.Add(Warn, pass, event, fields) }

// Err returns the first error writing to W.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Count returns how many records have the given pass and event.
func (l *Log) Count(pass, event string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.Records {
		if r.Pass == pass && r.Event == event {
			n++
		}
	}
	return n
}
