package kernels

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The fast golden PTX must have been made from the current fast.cu, and
// hold every fast entry point; its tensor-core steps are the m16n8k16
// mma.sync of FP16 and BF16 with FP32 accumulation, and nothing reduces
// through atomics.
func TestFastGoldenMatchesSource(t *testing.T) {
	b, err := os.ReadFile("testdata/fast.ptx")
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseGolden(b)
	if err != nil {
		t.Fatal(err)
	}
	if g.Source != FastName || g.Digest != FastDigest() {
		t.Fatalf("testdata/fast.ptx was made from %s sha256 %s, fast.cu is now %s: regenerate it (go test -tags cuda ./cuda/kernels -run FastGolden -update)", g.Source, g.Digest, FastDigest())
	}
	ptx := string(g.PTX)
	for _, k := range FastKernels {
		if !strings.Contains(ptx, ".entry "+k+"(") {
			t.Errorf("fast golden PTX has no entry %s", k)
		}
	}
	for _, want := range []string{"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "cvt.rn.f16x2.f32", "cvt.rn.bf16x2.f32"} {
		if !strings.Contains(ptx, want) {
			t.Errorf("fast golden PTX has no %s", want)
		}
	}
	for _, bad := range []string{`\batom\.`, `\bred\.`, `\.ftz\b`, `\bmad\.f32`} {
		if m := regexp.MustCompile(bad).FindString(ptx); m != "" {
			t.Errorf("fast golden PTX contains %q", m)
		}
	}
}

func TestFastKernelNames(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range FastKernels {
		if seen[k] || !strings.HasPrefix(k, "vf_") {
			t.Errorf("fast kernel %q", k)
		}
		seen[k] = true
		if !strings.Contains(fastCU, "VF_TILES(") {
			t.Fatal("fast.cu lost its entry points")
		}
	}
	if len(FastKernels) != 2*(3*len(FastTiles)+3) {
		t.Errorf("%d fast kernels", len(FastKernels))
	}
	if FastKernel(FastBF16, Fast1x1, 128, 64) != "vf_bf16_m1_128x64" {
		t.Error(FastKernel(FastBF16, Fast1x1, 128, 64))
	}
}
