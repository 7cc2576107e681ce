package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/vouchml/vouch/cuda"
)

// On a machine without the NVIDIA driver (CI), vouch gputest fails with the
// driver's error and exit status 1; it never panics.
func TestGPUTestWithoutGPU(t *testing.T) {
	if d, err := cuda.Open(""); err == nil {
		t.Skipf("a CUDA driver is installed here (%s)", d.Path)
	}
	var out, errb bytes.Buffer
	code := NewMain(&out, &errb).Run(context.Background(), []string{"gputest", "--cases", "1"})
	if code != 1 || !strings.Contains(errb.String(), "vouch gputest: cuda: no NVIDIA driver found (libcuda.so.1): ") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	code = NewMain(&out, &errb).Run(context.Background(), []string{"gputest", "extra"})
	if code == 0 || !strings.Contains(errb.String(), "unexpected arguments") {
		t.Fatalf("extra argument: exit %d, stderr %q", code, errb.String())
	}
	for _, b := range []string{"0", "1,x", "70000"} {
		errb.Reset()
		code = NewMain(&out, &errb).Run(context.Background(), []string{"gputest", "--plan", "m.plan", "--batches", b})
		if code != 2 || !strings.Contains(errb.String(), "--batches") {
			t.Fatalf("--batches %s: exit %d, stderr %q", b, code, errb.String())
		}
	}
}
