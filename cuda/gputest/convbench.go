package gputest

import (
	"fmt"

	"github.com/vouchml/vouch/cuda/exact"
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

// convBench times the exact Conv kernel on resnet18's convolutions at
// several batch sizes (median of BenchReps launches each, events) and
// prints the sum over the network: the convolutions' share of a resnet18
// inference on this GPU, a lower bound of a whole exact plan's time.
func (s *suite) convBench() error {
	tm, err := s.newTimer()
	if err != nil {
		return err
	}
	defer tm.close()
	defer func() { s.e.ConvTile = 0 }()
	for _, run := range []struct {
		batch, tile int
	}{{1, 64}, {1, 0}, {32, 64}, {32, 128}, {32, 0}, {256, 64}, {256, 128}, {256, 0}} {
		batch := run.batch
		s.e.ConvTile = run.tile
		var total, flops float64
		for _, l := range resnet18Convs {
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
			var ms []float64
			for i := 0; i < s.cfg.BenchReps+2; i++ {
				t, err := tm.time(func() error { return s.e.Conv2D(tm.st, g, x.Ptr, w.Ptr, 0, 0, true, y.Ptr) })
				if err != nil {
					return err
				}
				if i >= 2 {
					ms = append(ms, t)
				}
			}
			x.Free()
			w.Free()
			y.Free()
			med := median(ms)
			total += med * float64(l.count)
			flops += 2 * float64(g.OutLen()) * float64(g.C/g.G*g.KH*g.KW) * float64(l.count)
		}
		tile := fmt.Sprintf("tile %d", run.tile)
		if run.tile == 0 {
			tile = "chosen tiles"
		}
		fmt.Fprintf(s.w, "bench exact conv, resnet18's 20 convolutions, batch %3d, %-12s: %.3f ms (%.1f img/s, %.1f TFLOP/s)\n",
			batch, tile, total, float64(batch)/total*1e3, flops/(total*1e-3)/1e12)
	}
	return nil
}
