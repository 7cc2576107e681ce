package kernels

import (
	"fmt"
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
	if src != FastImageSource()+fastAttnCU+fastGeluCU {
		t.Error("a fast plan's image is not FastImageSource then fast_attn.cu and fast_gelu.cu")
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

// The GELU-epilogue tiles the engine may name are the ones fast_gelu.cu
// instantiates: VA_GELU_TILES for each precision and mode, fast.cu's tiles
// in it, and every one ends in vx_gelu_erf through vf_tile's POST.
func TestFastGeluKernels(t *testing.T) {
	if len(FastGeluKernels) != 2*len(FastGeluModes)*len(FastTiles) || FastGeluKernel(FastF16, FastRows, 128, 64) != "vf_f16_m2_128x64_gelu" {
		t.Fatalf("%d GELU kernels, %s", len(FastGeluKernels), FastGeluKernel(FastF16, FastRows, 128, 64))
	}
	for _, p := range []string{FastF16, FastBF16} {
		for _, m := range FastGeluModes {
			line := fmt.Sprintf("VA_GELU_TILES(%s, %d, %v)", p, m, p == FastBF16)
			if strings.Count(fastGeluCU, line) != 1 {
				t.Errorf("fast_gelu.cu has no %s", line)
			}
		}
	}
	if n := strings.Count(fastGeluCU, "\nVA_GELU_TILES("); n != 2*len(FastGeluModes) {
		t.Errorf("fast_gelu.cu instantiates %d GELU tile sets", n)
	}
	for _, tl := range FastTiles {
		e := fmt.Sprintf("VA_GELU_ENTRY(vf_##P##_m##MODE##_%dx%d_gelu, %d, %d, MODE, BF)", tl[0], tl[1], tl[0], tl[1])
		if !strings.Contains(fastGeluCU, e) {
			t.Errorf("fast_gelu.cu has no %s", e)
		}
	}
	if strings.Count(fastGeluCU, "VA_GELU_ENTRY(vf_") != len(FastTiles) ||
		!strings.Contains(fastGeluCU, "vf_tile<BM, BN, MODE, BF, va_gelu>") ||
		!strings.Contains(fastGeluCU, "return vx_gelu_erf(v);") ||
		!strings.Contains(fastCU, "y[o] = POST::f(vf_act(v, act, lo, hi));") {
		t.Error("the GELU tiles are not fast.cu's tile with vx_gelu_erf last")
	}
}
