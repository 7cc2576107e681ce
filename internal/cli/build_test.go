package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/tune"
)

// TestBuildReproducibleByDefault: two default builds of an unseen model
// give the same plan bytes (issue 20 A5: the default used to time tactics,
// and timings differ between runs), and a timed build's bundle carries the
// timing cache it was chosen from, with every timed layer in it, even
// without --timing-cache.
func TestBuildReproducibleByDefault(t *testing.T) {
	dir := t.TempDir()
	model := "../../../shared/models/mobilenet_v2/model.onnx"
	var plans [2][]byte
	for i := range plans {
		pl := filepath.Join(dir, "m.plan")
		if code, _, errs := run(t, "build", model, "-o", pl); code != 0 {
			t.Fatalf("build: exit %d: %s", code, errs)
		}
		b, err := os.ReadFile(pl)
		if err != nil {
			t.Fatal(err)
		}
		plans[i] = b
	}
	if !bytes.Equal(plans[0], plans[1]) {
		t.Fatal("two default builds gave different plans")
	}
	bf := filepath.Join(dir, "t.vouch")
	if code, _, errs := run(t, "build", model, "-o", filepath.Join(dir, "t.plan"), "--tactics", "timed", "--tune-reps", "1", "--bundle", bf); code != 0 {
		t.Fatalf("timed build: exit %d: %s", code, errs)
	}
	b, err := bundle.ReadFile(bf)
	if err != nil {
		t.Fatal(err)
	}
	tc, ok := b.File(bundle.TimingCacheFile)
	if !ok || len(tc) == 0 {
		t.Fatal("the timed build's bundle has no timing cache")
	}
	c, err := tune.ReadCache(bytes.NewReader(tc))
	if err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "t.plan.log.jsonl"))
	// Layers of the same problem share a timing (logged "cached").
	measured := 0
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, `"event":"timed"`) && strings.Contains(line, `"cached":false`) {
			measured++
		}
	}
	if c.Len() == 0 || c.Len() != measured {
		t.Errorf("timing cache holds %d timings, the build log measured %d", c.Len(), measured)
	}
}
