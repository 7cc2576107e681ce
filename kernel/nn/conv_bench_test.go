package nn

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// BenchmarkConvResNetStem is resnet18's first convolution (3->64, 7x7,
// stride 2, pads 3, 224x224) through Into, one worker.
func BenchmarkConvResNetStem(b *testing.B) {
	for _, tac := range []string{TacticIm2col, TacticDirect} {
		b.Run(tac, func(b *testing.B) { benchStem(b, tac) })
	}
}

func benchStem(b *testing.B, tac string) {
	r := rand.New(rand.NewSource(1))
	n := node("Conv", ints("strides", 2, 2), ints("pads", 3, 3, 3, 3), strAttr(kernel.TacticAttr, tac))
	x := tensor.From(randF32(r, 3*224*224), 1, 3, 224, 224)
	w := tensor.From(randF32(r, 64*3*49), 64, 3, 7, 7)
	bias := tensor.From(randF32(r, 64), 64)
	y := tensor.New(tensor.Float32, 1, 64, 112, 112)
	p := parallel.New(1)
	defer p.Close()
	c := &kernel.Ctx{Pool: p}
	for i := 0; i < b.N; i++ {
		if err := intoConv(c, n, []*tensor.Tensor{x, w, bias}, []*tensor.Tensor{y}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(2*float64(64*3*49*112*112)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkLayerNormBERT is tiny_bert's LayerNormalization (64 x 128) through
// Run.
func BenchmarkLayerNormBERT(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	n := node("LayerNormalization")
	in := []*tensor.Tensor{tensor.From(randF32(r, 64*128), 1, 64, 128), tensor.From(randF32(r, 128), 128), tensor.From(randF32(r, 128), 128)}
	for i := 0; i < b.N; i++ {
		if _, err := runLayerNorm(nil, n, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConv3x3 is resnet18's 3x3 stride-1 convolutions at each stage
// (no bias) through Into, one worker; GFLOP/s counts 2 per multiply-add.
func BenchmarkConv3x3(b *testing.B) {
	for _, c := range []struct{ ch, hw int }{{64, 56}, {128, 28}, {256, 14}, {512, 7}} {
		for _, tac := range []string{TacticIm2col, TacticDirect} {
			b.Run(fmt.Sprintf("%dx%d/%s", c.ch, c.hw, tac), func(b *testing.B) {
				r := rand.New(rand.NewSource(1))
				n := node("Conv", ints("pads", 1, 1, 1, 1), strAttr(kernel.TacticAttr, tac))
				x := tensor.From(randF32(r, c.ch*c.hw*c.hw), 1, c.ch, c.hw, c.hw)
				w := tensor.From(randF32(r, c.ch*c.ch*9), c.ch, c.ch, 3, 3)
				y := tensor.New(tensor.Float32, 1, c.ch, c.hw, c.hw)
				p := parallel.New(1)
				defer p.Close()
				// A State keeps the packed weights between calls, as a
				// bound plan does (without one they are repacked per call).
				ctx := &kernel.Ctx{Pool: p, State: &kernel.State{}}
				if err := intoConv(ctx, n, []*tensor.Tensor{x, w}, []*tensor.Tensor{y}); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := intoConv(ctx, n, []*tensor.Tensor{x, w}, []*tensor.Tensor{y}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(c.ch*c.ch*9*c.hw*c.hw)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkConvZTiles is resnet18's 3x3 stride-1 convolutions through
// conv.direct with each listed ConvZ tile forced (forced.tileZ), one
// worker.
func BenchmarkConvZTiles(b *testing.B) {
	for _, c := range []struct{ ch, hw int }{{64, 56}, {128, 28}} {
		for _, z := range []zShape{{1, 14, 2}, {2, 7, 2}, {1, 7, 4}} {
			b.Run(fmt.Sprintf("%dx%d/%dx%dx%d", c.ch, c.hw, z.R, z.T, z.C), func(b *testing.B) {
				if !fastOK() {
					b.Skip("no fast kernels")
				}
				r := rand.New(rand.NewSource(1))
				n := node("Conv", ints("pads", 1, 1, 1, 1), strAttr(kernel.TacticAttr, TacticDirect))
				x := tensor.From(randF32(r, c.ch*c.hw*c.hw), 1, c.ch, c.hw, c.hw)
				w := tensor.From(randF32(r, c.ch*c.ch*9), c.ch, c.ch, 3, 3)
				y := tensor.New(tensor.Float32, 1, c.ch, c.hw, c.hw)
				p := parallel.New(1)
				defer p.Close()
				ctx := ctxAt(p, kernel.ISABest, &forced{tileZ: z})
				for i := 0; i < b.N; i++ {
					if err := intoConv(ctx, n, []*tensor.Tensor{x, w}, []*tensor.Tensor{y}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(c.ch*c.ch*9*c.hw*c.hw)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkConv1x1S2 is ResNet-50's stride-2 1x1 downsampling
// convolutions (C -> 2C over a 2H x 2W plane) through each tactic, one
// worker, the packed weights kept in a kernel.State.
func BenchmarkConv1x1S2(b *testing.B) {
	for _, c := range []struct{ ch, hw int }{{256, 28}, {512, 14}, {1024, 7}} {
		for _, tac := range []string{TacticIm2col, TacticDirect} {
			b.Run(fmt.Sprintf("%dx%d/%s", c.ch, c.hw, tac), func(b *testing.B) {
				r := rand.New(rand.NewSource(1))
				n := node("Conv", ints("strides", 2, 2), strAttr(kernel.TacticAttr, tac))
				x := tensor.From(randF32(r, c.ch*4*c.hw*c.hw), 1, c.ch, 2*c.hw, 2*c.hw)
				w := tensor.From(randF32(r, 2*c.ch*c.ch), 2*c.ch, c.ch, 1, 1)
				y := tensor.New(tensor.Float32, 1, 2*c.ch, c.hw, c.hw)
				p := parallel.New(1)
				defer p.Close()
				ctx := &kernel.Ctx{Pool: p, State: &kernel.State{}}
				if err := intoConv(ctx, n, []*tensor.Tensor{x, w}, []*tensor.Tensor{y}); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := intoConv(ctx, n, []*tensor.Tensor{x, w}, []*tensor.Tensor{y}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(2*c.ch*c.ch*c.hw*c.hw)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkConvFCNHead is fcn_resnet50's (160x160 input) dilated 3x3
// convolutions of its last stage and its 3x3 head over 20x20 planes, and
// VGG's 512-channel 3x3 over 28x28, through each tactic, one worker,
// weights kept in a kernel.State.
func BenchmarkConvFCNHead(b *testing.B) {
	for _, c := range []struct{ cin, cout, dil, hw int }{{512, 512, 4, 20}, {2048, 512, 1, 20}, {512, 512, 1, 28}, {256, 256, 1, 56}, {512, 512, 1, 14}, {256, 256, 1, 28}, {128, 128, 1, 56}, {256, 256, 1, 14}, {512, 512, 1, 7}, {64, 64, 1, 56}, {128, 128, 1, 28}} {
		for _, tac := range []string{TacticIm2col, TacticDirect} {
			b.Run(fmt.Sprintf("%d-%d-d%d-%dx%d/%s", c.cin, c.cout, c.dil, c.hw, c.hw, tac), func(b *testing.B) {
				r := rand.New(rand.NewSource(1))
				d := int64(c.dil)
				n := node("Conv", ints("pads", d, d, d, d), ints("dilations", d, d), strAttr(kernel.TacticAttr, tac))
				x := tensor.From(randF32(r, c.cin*c.hw*c.hw), 1, c.cin, c.hw, c.hw)
				w := tensor.From(randF32(r, c.cout*c.cin*9), c.cout, c.cin, 3, 3)
				y := tensor.New(tensor.Float32, 1, c.cout, c.hw, c.hw)
				convCPU(b, n, x, w, y, 2*float64(c.cout*c.cin*9*c.hw*c.hw))
			})
		}
	}
}

// BenchmarkConv1x1Deep is ResNet-50's deep 1x1 convolutions (layer3 and
// layer4, and their stride-2 downsampling) through each tactic, one
// worker, weights kept in a kernel.State; GFLOP/s from thread CPU time.
func BenchmarkConv1x1Deep(b *testing.B) {
	for _, c := range []struct{ cin, cout, hw, stride int }{
		{1024, 512, 14, 1}, {1024, 256, 14, 1}, {256, 1024, 14, 1}, {512, 2048, 7, 1}, {2048, 512, 7, 1},
		{1024, 2048, 14, 2}, {512, 1024, 28, 2}, {512, 128, 14, 1}, {832, 128, 7, 1}, {320, 1280, 7, 1}, {960, 160, 7, 1}, {960, 320, 7, 1},
	} {
		tacs := []string{TacticGemm1x1, TacticIm2col, TacticDirect}
		if c.stride > 1 {
			tacs = tacs[1:]
		}
		for _, tac := range tacs {
			b.Run(fmt.Sprintf("%d-%d-%dx%d-s%d/%s", c.cin, c.cout, c.hw, c.hw, c.stride, tac), func(b *testing.B) {
				r := rand.New(rand.NewSource(1))
				s := int64(c.stride)
				n := node("Conv", ints("strides", s, s), strAttr(kernel.TacticAttr, tac))
				x := tensor.From(randF32(r, c.cin*c.hw*c.hw), 1, c.cin, c.hw, c.hw)
				w := tensor.From(randF32(r, c.cout*c.cin), c.cout, c.cin, 1, 1)
				o := (c.hw + c.stride - 1) / c.stride
				y := tensor.New(tensor.Float32, 1, c.cout, o, o)
				convCPU(b, n, x, w, y, 2*float64(c.cout*c.cin*o*o))
			})
		}
	}
}

// convCPU times intoConv(n) of x and w into y on one worker, weights kept
// in a kernel.State, and reports GFLOP/s (flops a call) from the median
// thread CPU time.
func convCPU(b *testing.B, n *ir.Node, x, w, y *tensor.Tensor, flops float64) {
	convCPUF(b, nil, n, x, w, y, flops)
}

// convCPUF is convCPU with the forced choices f (nil: none).
func convCPUF(b *testing.B, f *forced, n *ir.Node, x, w, y *tensor.Tensor, flops float64) {
	p := parallel.New(1)
	defer p.Close()
	ctx := ctxAt(p, kernel.ISABest, f)
	ctx.State = &kernel.State{}
	if err := intoConv(ctx, n, []*tensor.Tensor{x, w}, []*tensor.Tensor{y}); err != nil {
		b.Fatal(err)
	}
	var ns []float64
	cpuLoop(b, func() {
		t0 := threadCPU()
		if err := intoConv(ctx, n, []*tensor.Tensor{x, w}, []*tensor.Tensor{y}); err != nil {
			b.Fatal(err)
		}
		ns = append(ns, float64(threadCPU()-t0))
	})
	slices.Sort(ns)
	b.ReportMetric(flops/ns[len(ns)/2], "GFLOP/s")
}

// BenchmarkConvStem3 is the 3-channel first convolution of VGG and U-Net
// (3->64 3x3 at 224x224), of MobileNet-style stems (3->32 and 3->16 3x3,
// stride 2) and of ResNet (3->64 7x7, stride 2), through each tactic, one
// worker; GFLOP/s from thread CPU time.
func BenchmarkConvStem3(b *testing.B) {
	for _, c := range []struct{ cout, hw, stride, k int }{{64, 224, 1, 3}, {32, 224, 2, 3}, {16, 224, 2, 3}, {64, 224, 2, 7}} {
		for _, tac := range []string{TacticIm2col, TacticDirect} {
			b.Run(fmt.Sprintf("3-%d-%dx%d-%dx%d-s%d/%s", c.cout, c.k, c.k, c.hw, c.hw, c.stride, tac), func(b *testing.B) {
				r := rand.New(rand.NewSource(1))
				s, pd := int64(c.stride), int64(c.k/2)
				n := node("Conv", ints("pads", pd, pd, pd, pd), ints("strides", s, s), strAttr(kernel.TacticAttr, tac))
				x := tensor.From(randF32(r, 3*c.hw*c.hw), 1, 3, c.hw, c.hw)
				w := tensor.From(randF32(r, c.cout*3*c.k*c.k), c.cout, 3, c.k, c.k)
				o := (c.hw-1)/c.stride + 1
				y := tensor.New(tensor.Float32, 1, c.cout, o, o)
				convCPU(b, n, x, w, y, 2*float64(c.cout*3*c.k*c.k*o*o))
			})
		}
	}
}

// BenchmarkConvDirectKB is VGG-11's and ResNet-50's 3x3 stride-1
// convolutions through conv.direct with each k block of the AVX2 kernel
// (steps; 1<<20: one block), one worker, the packed weights kept in a
// State; GFLOP/s from thread CPU time.
func BenchmarkConvDirectKB(b *testing.B) {
	for _, c := range []struct{ cin, cout, hw int }{{64, 128, 112}, {128, 256, 56}, {256, 256, 56}, {512, 512, 28}, {512, 512, 14}, {512, 512, 7}} {
		for _, kb := range []int{1 << 20, 128, 256, 512} {
			b.Run(fmt.Sprintf("%d-%dx%d/kb%d", c.cin, c.cout, c.hw, kb), func(b *testing.B) {
				r := rand.New(rand.NewSource(1))
				n := node("Conv", ints("pads", 1, 1, 1, 1), strAttr(kernel.TacticAttr, TacticDirect))
				x := tensor.From(randF32(r, c.cin*c.hw*c.hw), 1, c.cin, c.hw, c.hw)
				w := tensor.From(randF32(r, c.cout*c.cin*9), c.cout, c.cin, 3, 3)
				y := tensor.New(tensor.Float32, 1, c.cout, c.hw, c.hw)
				convCPUF(b, &forced{dirKB: kb}, n, x, w, y, 2*float64(c.cout*c.cin*9*c.hw*c.hw))
			})
		}
	}
}
