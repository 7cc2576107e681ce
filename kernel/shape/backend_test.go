package shape_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/vouchml/vouch/conformance"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/shape"
)

var backend = flag.String("backend", "", "regexp of suite/name: TestBackend runs the matching backend tests with only this package's operators")

// TestBackend runs backend tests against a registry of this package's
// operators alone, so that the family can be checked on its own:
//
//	go test ./kernel/shape -run TestBackend -backend 'node/test_(reshape|slice)' -v
func TestBackend(t *testing.T) {
	if *backend == "" {
		t.Skip("set -backend=regexp")
	}
	if _, err := os.Stat(conformance.DefaultRoot); err != nil {
		t.Skipf("backend test data missing: %v", err)
	}
	re := regexp.MustCompile(*backend)
	reg := kernel.NewRegistry("", shape.Ops())
	pass, fail := 0, 0
	for _, s := range conformance.Suites {
		entries, err := os.ReadDir(filepath.Join(conformance.DefaultRoot, s))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !re.MatchString(s + "/" + e.Name()) {
				continue
			}
			r := conformance.RunTest(conformance.DefaultRoot, s, e.Name(), reg, time.Minute)
			if r.Status == conformance.Pass {
				pass++
				t.Logf("pass %s", r.ID())
			} else {
				fail++
				t.Errorf("%s %s: %s", r.Status, r.ID(), r.Reason)
			}
		}
	}
	t.Logf("%d pass, %d not", pass, fail)
}
