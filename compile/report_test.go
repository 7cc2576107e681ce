package compile_test

import (
	"strings"
	"testing"

	"github.com/vouchml/vouch/compile"
)

// The report's counts are the passes' own (typed, counted where the work
// is done); they must agree with the build log's events, so a pass that
// logs a fusion without counting it (or counts without logging) fails.
func TestReportCounts(t *testing.T) {
	for _, name := range []string{"resnet18", "tiny_bert", "mobilenet_v2"} {
		res, log := build(t, name, compile.DefaultOptions())
		fusions, folded, removed := 0, 0, 0
		for _, r := range log.Records {
			switch {
			case r.Event == "fused" || r.Event == "folded" && (strings.HasPrefix(r.Pass, "fold-batchnorm") || r.Pass == "fold-layout"):
				fusions++
			case r.Event == "folded":
				folded++
			case r.Event == "removed":
				removed++
			}
		}
		rep := res.Report
		sum := 0
		for _, n := range rep.Fusions {
			sum += n
		}
		if sum != fusions || rep.FoldedConsts != folded || rep.Removed != removed {
			t.Errorf("%s: report fusions %d, folded %d, removed %d; the log has %d, %d, %d", name, sum, rep.FoldedConsts, rep.Removed, fusions, folded, removed)
		}
		if sum == 0 {
			t.Errorf("%s: no fusion counted", name)
		}
	}
}
