package conformance

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/kernel/builtin"
)

var update = flag.Bool("update", false, "rewrite ../conformance.md and testdata/passing.txt from this run")

const passingFile = "testdata/passing.txt"

// TestConformance runs the whole backend suite. It fails when a test that
// passing.txt records as passing no longer passes; -update records the
// current results (and rewrites conformance.md).
func TestConformance(t *testing.T) {
	if _, err := os.Stat(DefaultRoot); err != nil {
		t.Fatalf("the ONNX backend test data is missing (%v): apt-get install libonnx-testdata", err)
	}
	results, err := RunAll(DefaultRoot, builtin.Registry(), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Result{}
	counts := map[string]*Counts{}
	for _, r := range results {
		byID[r.ID()] = r
		if counts[r.Suite] == nil {
			counts[r.Suite] = &Counts{}
		}
		add(counts[r.Suite], r.Status)
	}
	for _, s := range Suites {
		c := counts[s]
		t.Logf("%s: %d pass, %d fail, %d skip", s, c.Pass, c.Fail, c.Skip)
	}
	if *update {
		var pass []string
		for _, r := range results {
			if r.Status == Pass {
				pass = append(pass, r.ID())
			}
		}
		sort.Strings(pass)
		if err := os.WriteFile(passingFile, []byte(strings.Join(pass, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		md := Markdown(results, "go test ./conformance -run TestConformance -update")
		if err := os.WriteFile("../conformance.md", []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(passingFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range strings.Fields(string(want)) {
		r, ok := byID[id]
		if !ok {
			t.Errorf("%s: recorded as passing but not found in the suite", id)
			continue
		}
		if r.Status != Pass {
			t.Errorf("%s: recorded as passing, now %s: %s", id, r.Status, r.Reason)
		}
	}
}

// TestOne runs a single test by name, for development:
//
//	go test ./conformance -run TestOne -test=node/test_add
func TestOne(t *testing.T) {
	if *one == "" {
		t.Skip("set -test=suite/name")
	}
	suite, name, _ := strings.Cut(*one, "/")
	r := RunTest(DefaultRoot, suite, name, builtin.Registry(), time.Minute)
	if r.Status != Pass {
		t.Fatalf("%s: %s: %s", r.ID(), r.Status, r.Reason)
	}
}

var one = flag.String("test", "", "suite/name of one backend test for TestOne")

var match = flag.String("match", "", "regexp of suite/name: TestSubset runs the matching backend tests")

// TestSubset runs the backend tests whose suite/name matches -match and
// logs each result, for development:
//
//	go test ./conformance -run TestSubset -match 'node/test_(add|sub)' -v
func TestSubset(t *testing.T) {
	if *match == "" {
		t.Skip("set -match=regexp")
	}
	re := regexp.MustCompile(*match)
	reg := builtin.Registry()
	var c Counts
	for _, s := range Suites {
		entries, err := os.ReadDir(filepath.Join(DefaultRoot, s))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !re.MatchString(s + "/" + e.Name()) {
				continue
			}
			r := RunTest(DefaultRoot, s, e.Name(), reg, time.Minute)
			add(&c, r.Status)
			if r.Status == Pass {
				t.Logf("pass %s", r.ID())
			} else {
				t.Errorf("%s %s: %s", r.Status, r.ID(), r.Reason)
			}
		}
	}
	t.Logf("%d pass, %d fail, %d skip", c.Pass, c.Fail, c.Skip)
}
