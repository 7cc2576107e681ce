package q8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"unsafe"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/elementwise"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestQ8Depthwise: the depthwise path (dwBlocks where the CPU has it, its
// portable twin elsewhere) gives the bits of the grouped GEMM on the
// zoo's depthwise shapes (3×3, 5×5, 7×7; strides 1 and 2; maps from 7×7
// to 57×57, odd widths, asymmetric pads) with residual, Relu, SiLU and
// HardSwish, at every level, 1 and 2 workers, batch 1 and 2, with a
// float32 and a chained u8 input, and as a chained producer.
func TestQ8Depthwise(t *testing.T) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add(fused.Domain, fused.Ops(reg))
	reg.Add(fused.Domain, Ops(reg))
	r := rand.New(rand.NewPCG(51, 52))
	type cs struct {
		c, h, w, k, stride int
		pads               [4]int
		act                string
		res                bool
	}
	cases := []cs{
		{16, 57, 57, 3, 1, [4]int{1, 1, 1, 1}, "Relu", false},
		{24, 28, 28, 3, 2, [4]int{1, 1, 1, 1}, "HardSwish", false},
		{20, 14, 14, 5, 1, [4]int{2, 2, 2, 2}, "SiLU", true},
		{12, 15, 15, 5, 2, [4]int{2, 2, 2, 2}, "", false},
		{8, 7, 7, 7, 1, [4]int{3, 3, 3, 3}, "", true},
		{9, 7, 7, 3, 1, [4]int{1, 1, 1, 1}, "Relu", false},
		{5, 17, 33, 3, 2, [4]int{0, 0, 1, 1}, "Relu", false}, // TF-style asymmetric padding
		{3, 10, 19, 5, 1, [4]int{2, 1, 0, 3}, "", false},
		{4, 4, 4, 8, 1, [4]int{4, 4, 3, 3}, "", false},
	}
	for ci, s := range cases {
		for _, batch := range []int{1, 2} {
			t.Run(fmt.Sprintf("%d_b%d", ci, batch), func(t *testing.T) {
				oh := (s.h+s.pads[0]+s.pads[2]-s.k)/s.stride + 1
				ow := (s.w+s.pads[1]+s.pads[3]-s.k)/s.stride + 1
				wq := make([]int8, s.c*s.k*s.k)
				for i := range wq {
					wq[i] = int8(r.IntN(255) - 127)
				}
				wq[0] = -127
				var xs, ys float32 = 0.02, 0.05
				x := randF32(r, batch*s.c*s.h*s.w)
				for i := range x {
					x[i] *= 2
				}
				inputs := []string{"x", "w", "s", "b"}
				add := int64(0)
				in := []*tensor.Tensor{tensor.From(x, batch, s.c, s.h, s.w), tensor.From(wq, s.c, 1, s.k, s.k), tensor.From(randPos(r, s.c), s.c), tensor.From(randF32(r, s.c), s.c)}
				if s.res {
					inputs, add = append(inputs, "r"), 1
					in = append(in, tensor.From(randF32(r, batch*s.c*oh*ow), batch, s.c, oh, ow))
				}
				node := func(yScale float32, xU8 bool) *ir.Node {
					p := s.pads
					a := map[string]*ir.Attr{
						"base":    {Name: "base", Kind: ir.AttrString, S: "Conv"},
						"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: xs},
						"layout":  {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, add, 0}},
						"group":   {Name: "group", Kind: ir.AttrInt, I: int64(s.c)},
						"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(s.stride), int64(s.stride)}},
						"pads":    {Name: "pads", Kind: ir.AttrInts, Ints: []int64{int64(p[0]), int64(p[1]), int64(p[2]), int64(p[3])}},
					}
					if s.act != "" {
						a[fused.AttrActivation] = &ir.Attr{Name: fused.AttrActivation, Kind: ir.AttrString, S: s.act}
						a[fused.AttrActVersion] = &ir.Attr{Name: fused.AttrActVersion, Kind: ir.AttrInt, I: 14}
					}
					if yScale > 0 {
						a["y_scale"] = &ir.Attr{Name: "y_scale", Kind: ir.AttrFloat, F: yScale}
					}
					if xU8 {
						a["x_u8"] = &ir.Attr{Name: "x_u8", Kind: ir.AttrInt, I: 1}
					}
					return &ir.Node{Name: "dw", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: inputs, Outputs: []string{"y"}, Attrs: a}
				}
				plain := node(0, false)
				op, err := reg.Lookup(plain)
				if err != nil {
					t.Fatal(err)
				}
				// The reference: the grouped GEMM, portable.
				ref, err := op.Run(ctxAt(nil, kernel.ISAPortable, &forced{noDWQ8: true}), plain, in)
				if err != nil {
					t.Fatal(err)
				}
				want := ref[0].Data.([]float32)
				wantU := u8Of(want, 1/ys)
				inU8 := slices.Clone(in)
				inU8[0] = tensor.From(u8Of(x, 1/xs), batch, s.c, s.h, s.w)
				for _, l := range []kernel.ISA{kernel.ISAPortable, kernel.ISAAVX2, kernel.ISABest} {
					for _, threads := range []int{1, 2} {
						ctx := ctxAt(parallel.New(threads), l, nil)
						for _, k := range []struct {
							name string
							n    *ir.Node
							in   []*tensor.Tensor
						}{{"plain", plain, in}, {"x_u8", node(0, true), inU8}, {"both", node(ys, true), inU8}} {
							got, err := op.Run(ctx, k.n, k.in)
							if err != nil {
								t.Fatal(err)
							}
							where := fmt.Sprintf("%+v: %s at %v on %d workers", s, k.name, l, threads)
							if k.name == "both" {
								if i := firstDiffU8(got[0].Data.([]uint8), wantU); i >= 0 {
									t.Fatalf("%s: u[%d] = %d, want %d", where, i, got[0].Data.([]uint8)[i], wantU[i])
								}
								continue
							}
							for i, g := range got[0].Data.([]float32) {
								if math.Float32bits(g) != math.Float32bits(want[i]) {
									t.Fatalf("%s: y[%d] = %v, want %v", where, i, g, want[i])
								}
							}
						}
						ctx.Pool.Close()
					}
				}
			})
		}
	}
}

// BenchmarkDepthwise compares the int8 depthwise layer (float32 in and
// out, and chained: u8 in and out) with the float32 Conv kernel on
// MobileNetV3/EfficientNet depthwise shapes (1 thread).
func BenchmarkDepthwise(b *testing.B) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add("vouch", Ops(reg))
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range []struct{ c, h, k, stride int }{{64, 112, 3, 2}, {72, 56, 3, 1}, {120, 28, 5, 1}, {480, 14, 3, 1}, {960, 7, 5, 1}} {
		pad := int64(s.k / 2)
		oh := (s.h+2*(s.k/2)-s.k)/s.stride + 1
		x := randF32(r, s.c*s.h*s.h)
		wf := randF32(r, s.c*s.k*s.k)
		wq := make([]int8, len(wf))
		for i := range wq {
			wq[i] = int8(r.IntN(255) - 127)
		}
		conv := map[string]*ir.Attr{
			"group":   {Name: "group", Kind: ir.AttrInt, I: int64(s.c)},
			"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(s.stride), int64(s.stride)}},
			"pads":    {Name: "pads", Kind: ir.AttrInts, Ints: []int64{pad, pad, pad, pad}},
		}
		q := func(chain bool) *ir.Node {
			a := map[string]*ir.Attr{
				"base":    {Name: "base", Kind: ir.AttrString, S: "Conv"},
				"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: 0.02},
				"layout":  {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, 0, 0}},
			}
			for k, v := range conv {
				a[k] = v
			}
			if chain {
				a["x_u8"] = &ir.Attr{Name: "x_u8", Kind: ir.AttrInt, I: 1}
				a["y_scale"] = &ir.Attr{Name: "y_scale", Kind: ir.AttrFloat, F: 0.05}
			}
			return &ir.Node{Name: "q", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: []string{"x", "w", "s", "b"}, Outputs: []string{"y"}, Attrs: a}
		}
		f32 := &ir.Node{Name: "c", OpType: "Conv", Version: 11, Inputs: []string{"x", "w", "b"}, Outputs: []string{"y"}, Attrs: conv}
		bias := randF32(r, s.c)
		ctx := &kernel.Ctx{Pool: parallel.New(1), ISA: kernel.ISABest}
		name := fmt.Sprintf("c%d_%dx%d_k%d_s%d", s.c, s.h, s.h, s.k, s.stride)
		qin := []*tensor.Tensor{tensor.From(x, 1, s.c, s.h, s.h), tensor.From(wq, s.c, 1, s.k, s.k), tensor.From(randPos(r, s.c), s.c), tensor.From(bias, s.c)}
		cin := slices.Clone(qin)
		cin[0] = tensor.From(u8Of(x, 50), 1, s.c, s.h, s.h)
		variants := []struct {
			name string
			n    *ir.Node
			in   []*tensor.Tensor
			out  *tensor.Tensor
		}{
			{"fp32", f32, []*tensor.Tensor{tensor.From(x, 1, s.c, s.h, s.h), tensor.From(wf, s.c, 1, s.k, s.k), tensor.From(bias, s.c)}, tensor.New(tensor.Float32, 1, s.c, oh, oh)},
			{"int8", q(false), qin, tensor.New(tensor.Float32, 1, s.c, oh, oh)},
			{"int8-chained", q(true), cin, tensor.New(tensor.Uint8, 1, s.c, oh, oh)},
		}
		// The variants alternate call by call; each reports the median
		// of its calls' thread CPU time (the machine is shared).
		b.Run(name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ts := make([][]int64, len(variants))
			for i := 0; i < b.N+3; i++ {
				for k, v := range variants {
					op, err := reg.Lookup(v.n)
					if err != nil {
						b.Fatal(err)
					}
					t0 := threadCPU()
					if err := op.Into(ctx, v.n, v.in, []*tensor.Tensor{v.out}); err != nil {
						b.Fatal(err)
					}
					if i >= 3 {
						ts[k] = append(ts[k], threadCPU()-t0)
					}
				}
			}
			for k, v := range variants {
				slices.Sort(ts[k])
				b.ReportMetric(float64(ts[k][len(ts[k])/2])/1e3, v.name+"-cpu-us")
			}
		})
		ctx.Pool.Close()
	}
}

// threadCPU is the calling thread's CPU time in nanoseconds.
func threadCPU() int64 {
	var ts syscall.Timespec
	// CLOCK_THREAD_CPUTIME_ID
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
