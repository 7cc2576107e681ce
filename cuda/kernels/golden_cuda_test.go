//go:build cuda

package kernels_test

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/kernels"
)

var (
	update    = flag.Bool("update", false, "rewrite testdata/exact.ptx with this NVRTC's output")
	nvrtcPath = flag.String("nvrtc", "", "path of libnvrtc.so")
)

// TestGolden compiles exact.cu for compute_90 and compares the PTX with
// the golden file when this NVRTC is the golden's version (-update writes
// it). It needs NVRTC, not a GPU.
func TestGolden(t *testing.T) {
	n, err := cuda.OpenNVRTC(*nvrtcPath)
	if err != nil {
		t.Fatal(err)
	}
	v, err := n.Version()
	if err != nil {
		t.Fatal(err)
	}
	out, err := n.Compile(kernels.Source(), kernels.Name, "compute_90", kernels.Options)
	if err != nil {
		t.Fatal(err)
	}
	got := kernels.FormatGolden(v, "compute_90", out.PTX)
	if *update {
		if err := os.WriteFile("testdata/exact.ptx", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("testdata/exact.ptx")
	if err != nil {
		t.Fatal(err)
	}
	g, err := kernels.ParseGolden(want)
	if err != nil {
		t.Fatal(err)
	}
	if g.NVRTC != v {
		t.Skipf("golden PTX is from NVRTC %s, this is %s: not comparable", g.NVRTC, v)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("NVRTC %s's PTX differs from testdata/exact.ptx (%d vs %d bytes): rerun with -update and review the diff", v, len(got), len(want))
	}
}
