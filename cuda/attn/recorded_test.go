package attn

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vouchml/vouch/cuda/mma"
)

// recorded holds the digests of the H200's outputs for Cases(19)
// (cuda/gputest TestFastAttention -attn-record, bench/gpu/bert.sh).
const recorded = "testdata/h200-2026-12-03.txt"

// TestRecordedDeviceOutputs: Reference, on the fitted sm_90 model, gives
// the bits the GPU gave for every recorded case.
func TestRecordedDeviceOutputs(t *testing.T) {
	b, err := os.ReadFile(recorded)
	if os.IsNotExist(err) {
		t.Skip("no recorded device outputs")
	}
	if err != nil {
		t.Fatal(err)
	}
	cases := Cases(19)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		i, err := strconv.Atoi(f[0])
		if err != nil || len(f) != 3 || i < 0 || i >= len(cases) {
			t.Fatalf("%s: line %q", recorded, line)
		}
		c := cases[i]
		if c.Kernel() != f[1] {
			t.Fatalf("%s: case %d ran %s, Cases(19) gives %s", recorded, i, f[1], c.Kernel())
		}
		fm := mma.FP16
		if c.BF {
			fm = mma.BF16
		}
		m, _ := mma.ModelFor("sm_90", fm)
		y, err := Reference(m, fm, c.G, c.Q, c.Kt, c.V, c.M, c.Op, c.Scale)
		if err != nil {
			t.Fatal(err)
		}
		if d := Digest(y); d != f[2] {
			t.Errorf("case %d (%v): Reference's output digest %s, the H200's %s", i, c, d, f[2])
		}
		n++
	}
	if n != len(cases) {
		t.Errorf("%d recorded cases, Cases(19) has %d", n, len(cases))
	}
}
