package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/vouchml/vouch/conformance"
	"github.com/vouchml/vouch/kernel/builtin"
)

func runConformance(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("conformance", "conformance [--data DIR] [--out FILE]", `
Runs the ONNX backend test suite (Debian's libonnx-testdata) through vouch's
executor with ONNX Runtime's tolerances and writes a Markdown report: totals
per suite, per-operator counts, and the reason for every test that does not
pass. The CI test (go test ./conformance) fails when a test recorded as
passing in conformance/testdata/passing.txt stops passing.`)
	data := fs.String("data", conformance.DefaultRoot, "root of the suite (holds node/, pytorch-converted/, ...)")
	out := fs.String("out", "conformance.md", "where to write the report")
	timeout := fs.Duration("timeout", 2*time.Minute, "time limit per test")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	results, err := conformance.RunAll(*data, builtin.Registry(), *timeout)
	if err != nil {
		return err
	}
	md := conformance.Markdown(results, "vouch conformance")
	if err := writeFileAtomic(*out, []byte(md), 0o644); err != nil {
		return err
	}
	var pass int
	for _, r := range results {
		if r.Status == conformance.Pass {
			pass++
		}
	}
	fmt.Fprintf(m.Stdout, "%d of %d tests pass; report written to %s\n", pass, len(results), *out)
	return nil
}
