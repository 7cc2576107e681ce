//go:build cuda

package kernels_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/kernels"
)

// TestFastGolden compiles fast.cu alone for compute_90 and compares the
// PTX with testdata/fast.ptx (-update writes it), as TestGolden does for
// the exact kernels.
func TestFastGolden(t *testing.T) {
	n, err := cuda.OpenNVRTC(*nvrtcPath)
	if err != nil {
		t.Fatal(err)
	}
	v, err := n.Version()
	if err != nil {
		t.Fatal(err)
	}
	out, err := n.Compile(kernels.FastSource(), kernels.FastName, "compute_90", kernels.Options)
	if err != nil {
		t.Fatal(err)
	}
	got := kernels.FormatGoldenOf(v, "compute_90", kernels.FastName, kernels.FastDigest(), out.PTX)
	if *update {
		if err := os.WriteFile("testdata/fast.ptx", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("testdata/fast.ptx")
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
		t.Fatalf("NVRTC %s's PTX of fast.cu differs from testdata/fast.ptx (%d vs %d bytes): rerun with -update and review the diff", v, len(got), len(want))
	}
}
