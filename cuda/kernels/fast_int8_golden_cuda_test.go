//go:build cuda

package kernels_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/kernels"
)

// TestFastGoldenInt8 compiles fast_int8.cu alone for compute_90 and
// compares the PTX with testdata/fast_int8.ptx (-update writes it); its
// name makes `-run FastGolden` regenerate it with fast.cu's.
func TestFastGoldenInt8(t *testing.T) {
	checkGoldenOf(t, kernels.FastInt8Source(), kernels.FastInt8Name, kernels.FastInt8Digest(), "testdata/fast_int8.ptx")
}

// TestFastGoldenImage: the joined source of a fast plan's image (the exact
// kernels, fast.cu and fast_int8.cu, one translation unit) compiles.
func TestFastGoldenImage(t *testing.T) {
	n, err := cuda.OpenNVRTC(*nvrtcPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Compile(kernels.FastImageSource(), kernels.FastImageName, "compute_90", kernels.Options); err != nil {
		t.Fatal(err)
	}
}

// checkGoldenOf compiles src (name, digest) for compute_90 and compares
// its PTX with the golden file (-update writes it; another NVRTC version's
// golden is not comparable: skipped).
func checkGoldenOf(t *testing.T, src, name, digest, file string) {
	t.Helper()
	n, err := cuda.OpenNVRTC(*nvrtcPath)
	if err != nil {
		t.Fatal(err)
	}
	v, err := n.Version()
	if err != nil {
		t.Fatal(err)
	}
	out, err := n.Compile(src, name, "compute_90", kernels.Options)
	if err != nil {
		t.Fatal(err)
	}
	got := kernels.FormatGoldenOf(v, "compute_90", name, digest, out.PTX)
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
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
		t.Fatalf("NVRTC %s's PTX of %s differs from %s (%d vs %d bytes): rerun with -update and review the diff", v, name, file, len(got), len(want))
	}
}
