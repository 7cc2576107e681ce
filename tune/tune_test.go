package tune

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/buildlog"
)

// fakeClock advances by the durations the candidates "take".
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time { return f.t }

func TestChooseAndCache(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	cost := func(d time.Duration) func() error {
		return func() error { clk.t = clk.t.Add(d); return nil }
	}
	log := buildlog.New(nil)
	tu := &Tuner{Cache: NewCache(), Reps: 5, Log: log, Now: clk.now}
	got, err := tu.Choose("conv1", "Conv|k", []Candidate{{"im2col", cost(30)}, {"direct", cost(10)}, {"winograd", cost(20)}})
	if err != nil || got != "direct" {
		t.Fatalf("got %q, %v", got, err)
	}
	if log.Count("tactics", "timed") != 3 {
		t.Fatal("every timing must be logged")
	}
	var buf bytes.Buffer
	if err := tu.Cache.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	c2, err := ReadCache(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	// With the cache, nothing runs and the same tactic wins.
	boom := func() error { t.Fatal("a cached tactic was run"); return nil }
	tu2 := &Tuner{Cache: c2, Reps: 5, Log: buildlog.New(nil)}
	got, err = tu2.Choose("conv1", "Conv|k", []Candidate{{"im2col", boom}, {"direct", boom}, {"winograd", boom}})
	if err != nil || got != "direct" {
		t.Fatalf("cached: got %q, %v", got, err)
	}
	var again bytes.Buffer
	c2.Encode(&again)
	if again.String() != buf.String() {
		t.Fatal("re-encoding the cache changed it")
	}
}

func TestTiesGoToTheFirst(t *testing.T) {
	c := NewCache()
	c.put("k", "a", 5)
	c.put("k", "b", 5)
	got, _ := (&Tuner{Cache: c}).Choose("l", "k", []Candidate{{"b", nil}, {"a", nil}})
	if got != "b" {
		t.Fatalf("tie went to %q", got)
	}
}

func TestBadCache(t *testing.T) {
	for _, in := range []string{"", "hello\n", header + "\nk\tt\n", header + "\nk\tt\t-3\n"} {
		if _, err := ReadCache(strings.NewReader(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
