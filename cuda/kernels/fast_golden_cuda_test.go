//go:build cuda

package kernels_test

import (
	"testing"

	"github.com/vouchml/vouch/cuda/kernels"
)

// TestFastGolden compiles fast.cu alone for compute_90 and compares the
// PTX with testdata/fast.ptx (-update writes it), as TestGolden does for
// the exact kernels.
func TestFastGolden(t *testing.T) {
	checkGoldenOf(t, kernels.FastSource(), kernels.FastName, kernels.FastDigest(), "testdata/fast.ptx")
}
