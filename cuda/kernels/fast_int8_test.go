package kernels

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The INT8 golden PTX must have been made from the current fast_int8.cu
// and hold every entry point; its tensor-core steps are the m16n8k32
// s8 x s8 -> s32 mma.sync, its quantization cvt.rni, its epilogue
// separate rounded multiplies and adds (no FMA contraction), and nothing
// reduces through atomics.
func TestFastInt8GoldenMatchesSource(t *testing.T) {
	b, err := os.ReadFile("testdata/fast_int8.ptx")
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseGolden(b)
	if err != nil {
		t.Fatal(err)
	}
	if g.Source != FastInt8Name || g.Digest != FastInt8Digest() {
		t.Fatalf("testdata/fast_int8.ptx was made from %s sha256 %s, fast_int8.cu is now %s: regenerate it (go test -tags cuda ./cuda/kernels -run FastGolden -update)", g.Source, g.Digest, FastInt8Digest())
	}
	ptx := string(g.PTX)
	for _, k := range FastInt8Kernels {
		if !strings.Contains(ptx, ".entry "+k+"(") {
			t.Errorf("int8 golden PTX has no entry %s", k)
		}
	}
	for _, want := range []string{"mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "ldmatrix.sync.aligned.m8n8.x4.shared.b16", "cvt.rni.s32.f32", "cvt.rn.f32.s32", "mul.rn.f32"} {
		if !strings.Contains(ptx, want) {
			t.Errorf("int8 golden PTX has no %s", want)
		}
	}
	for _, bad := range []string{`\batom\.`, `\bred\.`, `\.ftz\b`, `\bfma\.rn\.f32`, `\bmad\.f32`} {
		if m := regexp.MustCompile(bad).FindString(ptx); m != "" {
			t.Errorf("int8 golden PTX contains %q", m)
		}
	}
}

func TestFastInt8KernelNames(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range FastInt8Kernels {
		if seen[k] || !strings.HasPrefix(k, "v8_") {
			t.Errorf("int8 kernel %q", k)
		}
		seen[k] = true
		if !strings.Contains(fastInt8CU, "V8_ENTRY("+k+",") && !strings.Contains(fastInt8CU, " "+k+"(") {
			t.Errorf("fast_int8.cu has no entry %s", k)
		}
	}
	if len(FastInt8Kernels) != 1+2*len(FastTiles) {
		t.Errorf("%d int8 kernels", len(FastInt8Kernels))
	}
	if FastInt8Kernel(128, 64) != "v8_128x64" || FastInt8NarrowKernel(64, 64) != "v8_n_64x64" {
		t.Error(FastInt8Kernel(128, 64), FastInt8NarrowKernel(64, 64))
	}
	if !strings.HasSuffix(FastImageSource(), fastInt8CU) {
		t.Error("a fast plan's image does not hold fast_int8.cu")
	}
}
