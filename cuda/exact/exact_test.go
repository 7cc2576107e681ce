package exact

import (
	"slices"
	"strings"
	"testing"

	"github.com/vouchml/vouch/cuda/kernels"
)

// Bad arguments are refused before anything reaches the driver, so these
// run on any CPU with a zero Engine.
func TestArgumentErrors(t *testing.T) {
	e := &Engine{}
	for name, err := range map[string]error{
		"unary":     e.Unary(nil, Unary(99), 0, 0, 1),
		"sgemm":     e.SGEMM(nil, 0, 4, 4, Mat{}, Mat{}, 0, 4),
		"conv":      e.Conv2D(nil, ConvGeom{N: 1, C: 3, M: 4, G: 2, OH: 1, OW: 1}, 0, 0, 0, 0, false, 0),
		"softmax":   e.Softmax(nil, 0, 0, 1, 0),
		"layernorm": e.LayerNorm(nil, 0, 0, 0, 1e-5, 0, 1, 0),
		// A copy past its source, past its destination, of rank 7.
		"copy x":    e.Copy(nil, Copy{Dims: []int{2, 3}, XS: []int{3, 1}, YS: []int{3, 1}, X0: 1}, 0, 6, 0, 6),
		"copy y":    e.Copy(nil, Copy{Dims: []int{3}, XS: []int{-1}, YS: []int{2}, X0: 2}, 0, 3, 0, 4),
		"copy rank": e.Copy(nil, Copy{Dims: make([]int, 7), XS: make([]int, 7), YS: make([]int, 7)}, 0, 1, 0, 1),
	} {
		if err == nil || !strings.HasPrefix(err.Error(), "exact: ") {
			t.Errorf("%s: err = %v, want an exact: error", name, err)
		}
	}
}

func TestUnaryNames(t *testing.T) {
	if Relu.String() != "Relu" || GeluTanh.String() != "GeluTanh" || Unary(42).String() != "Unary(42)" {
		t.Fatal(Relu.String(), GeluTanh.String(), Unary(42).String())
	}
}

// resnet50Like are convolutions of ResNet-50's kinds (stem, 1x1 at stride
// 1 and 2, 3x3 at stride 1 and 2, the classifier as a 1x1) and
// mobilenet_v2's depthwise, at a batch.
func resnet50Like(n int) map[string]ConvGeom {
	c := func(ci, h, co, k, st, g int) ConvGeom {
		p := k / 2
		o := (h+2*p-k)/st + 1
		return ConvGeom{N: n, C: ci, H: h, W: h, M: co, OH: o, OW: o, G: g, KH: k, KW: k, SH: st, SW: st, PH: p, PW: p, DH: 1, DW: 1}
	}
	return map[string]ConvGeom{
		"stem": c(3, 224, 64, 7, 2, 1), "1x1": c(256, 56, 64, 1, 1, 1), "1x1 7x7": c(512, 7, 2048, 1, 1, 1),
		"1x1 s2": c(1024, 14, 2048, 1, 2, 1), "3x3": c(256, 14, 256, 3, 1, 1), "3x3 s2": c(128, 56, 128, 3, 2, 1),
		"fc": c(2048, 1, 1000, 1, 1, 1), "dw": c(96, 56, 96, 3, 2, 96), "grouped": c(64, 28, 128, 3, 1, 4),
	}
}

// The kernel Conv2D chooses is always one of ConvKernels(g) — the kernels
// the GPU suite checks against the CPU twin for that geometry — and the
// vectorised variants are chosen only for aligned operands of the shapes
// they need.
func TestConvChoice(t *testing.T) {
	for _, batch := range []int{1, 3, 32, 256} {
		for name, g := range resnet50Like(batch) {
			for _, vec := range []bool{true, false} {
				k := chooseConv(g, 132, vec)
				if !slices.Contains(ConvKernels(g), k) {
					t.Errorf("batch %d %s (vec %v): chose %s, not among %v", batch, name, vec, k, ConvKernels(g))
				}
				v := strings.Contains(k, "_va") || strings.HasSuffix(k, "_3x3")
				if v && !vec {
					t.Errorf("batch %d %s: chose %s for unaligned operands", batch, name, k)
				}
				if strings.HasSuffix(k, "_vab") && (g.SH != 1 || (g.OH*g.OW)%4 != 0) {
					t.Errorf("batch %d %s: chose %s for stride %d, %d pixels", batch, name, k, g.SH, g.OH*g.OW)
				}
				if name == "dw" && k != kernels.ConvDirect {
					t.Errorf("batch %d depthwise: chose %s, want %s", batch, k, kernels.ConvDirect)
				}
			}
		}
	}
	// ResNet-50 at batch 256: the large tiles and their vectorised variants
	// (the measured choice of docs/gpu/gputest-2026-12-02-speed4.log).
	g := resnet50Like(256)
	for name, want := range map[string]string{"3x3": "vx_ct128x128_3x3", "1x1 7x7": "vx_ct128x128_1x1_va", "1x1 s2": "vx_ct128x128_1x1_va", "3x3 s2": "vx_ct128x128_3x3"} {
		if k := chooseConv(g[name], 132, true); k != want {
			t.Errorf("batch 256 %s: chose %s, want %s", name, k, want)
		}
	}
	// Batch 1: the small tiles, which fill the GPU.
	if k := chooseConv(resnet50Like(1)["3x3"], 132, true); !strings.HasPrefix(k, "vx_ct16x16") && !strings.HasPrefix(k, "vx_ct32x32") {
		t.Errorf("batch 1 3x3: chose %s, want a 16x16 or 32x32 tile", k)
	}
}

// A forced kernel that cannot run a geometry, or a vectorised one on
// unaligned operands, is refused before the driver.
func TestConvKernelRefused(t *testing.T) {
	g := resnet50Like(1)["3x3"]
	for kn, ptr := range map[string]uint64{"vx_ct128x128_1x1": 256, "vx_ct128x128_3x3": 4, "vx_nope": 256} {
		e := &Engine{SMs: 132, ConvKernel: kn}
		err := e.Conv2D(nil, g, ptr, 256, 0, 0, false, 256)
		if err == nil || !strings.HasPrefix(err.Error(), "exact: ") {
			t.Errorf("%s: err = %v, want an exact: error", kn, err)
		}
	}
}
