package gputest

import (
	"fmt"
	"math"
	"strings"

	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
)

// resnet18Convs are resnet18's convolutions at batch 1 with how often each
// occurs (torchvision's architecture, BatchNorm folded into the bias).
var resnet18Convs = []struct {
	g     exact.ConvGeom
	count int
}{
	{exact.ConvGeom{C: 3, H: 224, W: 224, M: 64, OH: 112, OW: 112, G: 1, KH: 7, KW: 7, SH: 2, SW: 2, PH: 3, PW: 3, DH: 1, DW: 1}, 1},
	{exact.ConvGeom{C: 64, H: 56, W: 56, M: 64, OH: 56, OW: 56, G: 1, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1}, 4},
	{exact.ConvGeom{C: 64, H: 56, W: 56, M: 128, OH: 28, OW: 28, G: 1, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1}, 1},
	{exact.ConvGeom{C: 64, H: 56, W: 56, M: 128, OH: 28, OW: 28, G: 1, KH: 1, KW: 1, SH: 2, SW: 2, DH: 1, DW: 1}, 1},
	{exact.ConvGeom{C: 128, H: 28, W: 28, M: 128, OH: 28, OW: 28, G: 1, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1}, 3},
	{exact.ConvGeom{C: 128, H: 28, W: 28, M: 256, OH: 14, OW: 14, G: 1, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1}, 1},
	{exact.ConvGeom{C: 128, H: 28, W: 28, M: 256, OH: 14, OW: 14, G: 1, KH: 1, KW: 1, SH: 2, SW: 2, DH: 1, DW: 1}, 1},
	{exact.ConvGeom{C: 256, H: 14, W: 14, M: 256, OH: 14, OW: 14, G: 1, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1}, 3},
	{exact.ConvGeom{C: 256, H: 14, W: 14, M: 512, OH: 7, OW: 7, G: 1, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1}, 1},
	{exact.ConvGeom{C: 256, H: 14, W: 14, M: 512, OH: 7, OW: 7, G: 1, KH: 1, KW: 1, SH: 2, SW: 2, DH: 1, DW: 1}, 1},
	{exact.ConvGeom{C: 512, H: 7, W: 7, M: 512, OH: 7, OW: 7, G: 1, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1}, 3},
}

// resnet50Convs are ResNet-50's (torchvision, v1.5: the stride on the
// 3x3) distinct convolutions at batch 1 with how often each occurs.
var resnet50Convs = func() []struct {
	g     exact.ConvGeom
	count int
} {
	c := func(ci, h, co, k, st int) exact.ConvGeom {
		p := k / 2
		o := (h+2*p-k)/st + 1
		return exact.ConvGeom{C: ci, H: h, W: h, M: co, OH: o, OW: o, G: 1, KH: k, KW: k, SH: st, SW: st, PH: p, PW: p, DH: 1, DW: 1}
	}
	type lc = struct {
		g     exact.ConvGeom
		count int
	}
	return []lc{
		{c(3, 224, 64, 7, 2), 1},
		{c(64, 56, 64, 1, 1), 1}, {c(256, 56, 64, 1, 1), 2}, {c(64, 56, 64, 3, 1), 3}, {c(64, 56, 256, 1, 1), 4},
		{c(256, 56, 128, 1, 1), 1}, {c(128, 56, 128, 3, 2), 1}, {c(128, 28, 512, 1, 1), 4}, {c(256, 56, 512, 1, 2), 1},
		{c(512, 28, 128, 1, 1), 3}, {c(128, 28, 128, 3, 1), 3},
		{c(512, 28, 256, 1, 1), 1}, {c(256, 28, 256, 3, 2), 1}, {c(256, 14, 1024, 1, 1), 6}, {c(512, 28, 1024, 1, 2), 1},
		{c(1024, 14, 256, 1, 1), 5}, {c(256, 14, 256, 3, 1), 5},
		{c(1024, 14, 512, 1, 1), 1}, {c(512, 14, 512, 3, 2), 1}, {c(512, 7, 2048, 1, 1), 3}, {c(1024, 14, 2048, 1, 2), 1},
		{c(2048, 7, 512, 1, 1), 2}, {c(512, 7, 512, 3, 1), 2},
	}
}()

// convBench times the exact Conv kernels on resnet18's and ResNet-50's
// convolutions at batch 1, 32 and 256: every kernel on every distinct
// convolution (median of BenchReps event-timed launches, ReLU epilogue),
// then per network the sum with the kernel Conv2D chooses and with the
// fastest kernel of each layer (what a perfect choice would give): the
// convolutions' share of an inference, a lower bound of a whole plan.
func (s *suite) convBench() error {
	tm, err := s.newTimer()
	if err != nil {
		return err
	}
	defer tm.close()
	defer func() { s.e.ConvKernel = "" }()
	nets := []struct {
		name  string
		convs []struct {
			g     exact.ConvGeom
			count int
		}
	}{{"resnet18", resnet18Convs}, {"resnet50", resnet50Convs}}
	for _, net := range nets {
		for _, batch := range []int{1, 32, 256} {
			var chosen, best, flops float64
			for _, l := range net.convs {
				g := l.g
				g.N = batch
				x, err := s.dev(s.data(g.N*g.C*g.H*g.W, 1, 0))
				if err != nil {
					return err
				}
				w, err := s.dev(s.data(g.M*g.C*g.KH*g.KW, 0.1, 0))
				if err != nil {
					x.Free()
					return err
				}
				y, err := s.out(g.OutLen())
				if err != nil {
					x.Free()
					w.Free()
					return err
				}
				choice := s.e.ConvChoice(g)
				line := fmt.Sprintf("conv %s b%d %dx%d %d->%d k%d s%d:", net.name, batch, g.H, g.W, g.C, g.M, g.KH, g.SH)
				lbest, lchosen := math.Inf(1), 0.0
				for _, kn := range exact.ConvKernels(g) {
					if kn == kernels.ConvDirect || (batch == 256 && (kn == kernels.Conv2D || strings.HasPrefix(kn, "vx_ct16x16"))) {
						continue // far too slow to matter here
					}
					s.e.ConvKernel = kn
					var ms []float64
					for i := 0; i < s.cfg.BenchReps+2; i++ {
						t, err := tm.time(func() error { return s.e.Conv2D(tm.st, g, x.Ptr, w.Ptr, 0, 0, true, y.Ptr) })
						if err != nil {
							x.Free()
							w.Free()
							y.Free()
							return fmt.Errorf("%s %s: %w", line, kn, err)
						}
						if i >= 2 {
							ms = append(ms, t)
						}
					}
					med := median(ms)
					lbest = math.Min(lbest, med)
					if kn == choice {
						lchosen = med
					}
					line += fmt.Sprintf(" %s %.4f", strings.TrimPrefix(kn, "vx_"), med)
				}
				x.Free()
				w.Free()
				y.Free()
				if lchosen == 0 {
					lchosen = math.NaN()
				}
				fmt.Fprintf(s.w, "%s | chosen %s\n", line, strings.TrimPrefix(choice, "vx_"))
				chosen += lchosen * float64(l.count)
				best += lbest * float64(l.count)
				flops += 2 * float64(g.OutLen()) * float64(g.C/g.G*g.KH*g.KW) * float64(l.count)
			}
			fmt.Fprintf(s.w, "bench exact conv, %s's convolutions, batch %3d: chosen kernels %.3f ms (%.1f img/s, %.1f TFLOP/s), fastest per layer %.3f ms (%.1f TFLOP/s)\n",
				net.name, batch, chosen, float64(batch)/chosen*1e3, flops/(chosen*1e-3)/1e12, best, flops/(best*1e-3)/1e12)
		}
	}
	return nil
}
