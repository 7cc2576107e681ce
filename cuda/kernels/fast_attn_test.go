package kernels

import (
	"regexp"
	"strings"
	"testing"
)

// Every attention entry point the engine may name is defined in
// fast_attn.cu, and a fast plan's image holds the file after the kernels
// whose helpers it uses.
func TestFastAttnKernels(t *testing.T) {
	seen := map[string]bool{}
	if FastAttnKernels[0] != FastLayerNorm || !strings.Contains(fastAttnCU, " "+FastLayerNorm+"(") {
		t.Errorf("fast_attn.cu has no %s first", FastLayerNorm)
	}
	for _, k := range FastAttnKernels[1:] {
		if seen[k] || !strings.HasPrefix(k, "va_") {
			t.Errorf("attention kernel %q", k)
		}
		seen[k] = true
		f := strings.Split(strings.TrimPrefix(k, "va_"), "_")
		entry := "VA_ENTRY(" + k + ", " + map[string]string{FastF16: "false", FastBF16: "true"}[f[0]] + ", " +
			strings.TrimPrefix(f[1], "d") + ", " + strings.TrimPrefix(f[2], "s") + ")"
		if !strings.Contains(fastAttnCU, entry) {
			t.Errorf("fast_attn.cu has no %s", entry)
		}
	}
	if len(FastAttnKernels) != 1+2*len(FastAttnShapes) {
		t.Errorf("%d attention kernels", len(FastAttnKernels))
	}
	if strings.Count(fastAttnCU, "VA_ENTRY(va_") != len(FastAttnKernels)-1 {
		t.Errorf("fast_attn.cu has %d attention entry points, FastAttnKernels %d", strings.Count(fastAttnCU, "VA_ENTRY(va_"), len(FastAttnKernels)-1)
	}
	src := FastAttnImageSource()
	if !strings.HasSuffix(src, fastAttnCU) || !strings.HasPrefix(src, FastImageSource()) {
		t.Error("a fast plan's image is not FastImageSource then fast_attn.cu")
	}
	for _, k := range []string{"#define VA_BQ 32", "#define VA_THREADS 128", "#define VA_LN_MAXD 1024", "#define VA_LN_ROWS 4"} {
		if !strings.Contains(fastAttnCU, k) {
			t.Errorf("fast_attn.cu has no %q (FastAttnBQ, FastAttnThreads)", k)
		}
	}
	if m := regexp.MustCompile(`\batomic[A-Z]\w*|__shfl\w*|\bred\.`).FindString(fastAttnCU); m != "" {
		t.Errorf("fast_attn.cu uses %s (its reductions are sequential, in one thread)", m)
	}
}
