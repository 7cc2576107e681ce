//go:build cuda

package fast

import (
	"flag"
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"sort"
	"testing"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/plan"
)

var (
	flagInt8Cases   = flag.Int("int8-cases", 6, "random cases per INT8 kernel (mode x tile)")
	flagInt8Speedup = flag.Float64("int8-speedup", 0, "when above 0, TestInt8GPUSpeed also fails when INT8 is not this many times faster than FP16 on ResNet-50's convolutions at batch 256 (off by default: speed is reported, not asserted; issue 19's bar is 1.5)")
	flagInt8Reps    = flag.Int("int8-reps", 20, "timed launches per layer (the median counts)")
	flagInt8Tiles   = flag.Bool("int8-tiles", false, "TestInt8GPUSpeed also times each layer's INT8 GEMM at every tile and its quantization pass alone (figures for choosing INT8 tiles; logged only)")
)

// gpu8 is a device with a fast plan's image loaded (the exact kernels,
// fast.cu and fast_int8.cu: kernels.FastImageSource, as BuildFast
// compiles it).
type gpu8 struct {
	c   *cuda.Context
	e8  *Int8Engine
	e16 *Engine
	st  *cuda.Stream
}

func openGPU8(t *testing.T) *gpu8 {
	t.Helper()
	d, err := cuda.Open("")
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Context(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	nv, err := cuda.OpenNVRTC("")
	if err != nil {
		t.Fatal(err)
	}
	img, err := cuda.Build(nv, kernels.FastImageSource(), kernels.FastImageName, c.Info.Arch(), kernels.Options)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := exact.Load(c, img)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	m := ex.Mod
	g := &gpu8{c: c}
	if g.e8, err = LoadInt8(m); err != nil {
		t.Fatal(err)
	}
	if g.e16, err = Load(ex); err != nil {
		t.Fatal(err)
	}
	if g.st, err = c.NewStream(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (%s), %d SMs", c.Info.Name, c.Info.Arch(), c.Info.Multiproc)
	for _, k := range kernels.FastInt8Kernels {
		f, _ := m.Function(k)
		if a, err := f.Attrs(); err == nil {
			t.Logf("kernel %s: %d registers, %d B shared, %d B local", k, a.Registers, a.SharedBytes, a.LocalBytes)
		}
	}
	return g
}

// dev uploads v (nil: address 0).
func (g *gpu8) dev(t *testing.T, v []float32) uint64 {
	t.Helper()
	if v == nil {
		return 0
	}
	b, err := g.c.Alloc(uint64(max(len(v), 1)) * 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	if err := g.c.Upload(b, v); err != nil {
		t.Fatal(err)
	}
	return b.Ptr
}

// out allocates n floats poisoned with a NaN no kernel writes. The
// poison goes on g.st, the stream of every launch here: g.st is a
// non-blocking stream, which does not wait for the legacy default
// stream, so a poison there (Fill32(nil, ...), as this helper had it)
// could still be running when the layer's v8_quant and GEMM ran and
// overwrite their scratch or output. That race was the sixth session's
// TestInt8GPUBatch failure: the stem conv at batch 256 (822 MB of output
// and 205 MB of scratch to poison) differed in 634,409 outputs, none of
// the smaller cases did, and the kernels' indexing at that shape gives
// image 0 its bits alone (TestInt8StemBatchEmulated).
func (g *gpu8) out(t *testing.T, n int) *cuda.Buffer {
	t.Helper()
	b, err := g.c.Alloc(uint64(max(n, 1)) * 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	if err := g.c.Fill32(g.st, b.Ptr, 0x7fbadbad, uint64(max(n, 1))); err != nil {
		t.Fatal(err)
	}
	return b
}

func (g *gpu8) fetch(t *testing.T, b *cuda.Buffer, n int) []float32 {
	t.Helper()
	if err := g.c.Synchronize(); err != nil {
		t.Fatal(err)
	}
	v := make([]float32, n)
	if err := g.c.Download(v, b); err != nil {
		t.Fatal(err)
	}
	return v
}

// layer uploads c's packed weights.
func (g *gpu8) layer(t *testing.T, c case8) Int8Layer {
	t.Helper()
	w := c.weights(t)
	l, bufs, err := UploadInt8(g.c, c.packed(t), w.Mult(c.sx), c.sx)
	t.Cleanup(func() {
		for _, b := range bufs {
			b.Free()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// run runs c on the device: a Gemm through GEMM, a convolution through
// Conv, with a scratch of Int8Scratch bytes.
func (g *gpu8) run(t *testing.T, c case8) []float32 {
	t.Helper()
	l := g.layer(t, c)
	x, b, r := g.dev(t, c.x), g.dev(t, c.bias), g.dev(t, c.res)
	y := g.out(t, c.g.OutLen())
	sc := g.out(t, int((Int8Scratch(c.g)+3)/4))
	var err error
	if c.gemm {
		err = g.e8.GEMM(g.st, c.t, c.g.N, c.g.M, c.g.C, l, x, sc.Ptr, b, c.act, y.Ptr)
	} else {
		err = g.e8.Conv(g.st, c.t, c.g, l, x, sc.Ptr, b, r, c.act, y.Ptr)
	}
	if err != nil {
		t.Fatalf("%v: %v", c, err)
	}
	if err := g.st.Synchronize(); err != nil {
		t.Fatalf("%v: %v", c, err)
	}
	return g.fetch(t, y, c.g.OutLen())
}

// resnet50 are ResNet-50's (torchvision v1.5) distinct convolutions at
// batch 1 and how often each occurs.
func resnet50() []struct {
	g     exact.ConvGeom
	count int
} {
	c := func(ci, h, co, k, st int) exact.ConvGeom {
		p := k / 2
		o := (h+2*p-k)/st + 1
		return exact.ConvGeom{N: 1, C: ci, H: h, W: h, M: co, OH: o, OW: o, G: 1, KH: k, KW: k, SH: st, SW: st, PH: p, PW: p, DH: 1, DW: 1}
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
}

// resnetCase is a ResNet-50 layer as an INT8 case: ReLU, a bias, inputs
// of a post-ReLU activation's range with a few specials.
func resnetCase(r *rand.Rand, g exact.ConvGeom, res bool) case8 {
	c := case8{g: g, t: ChooseTile(g.M, g.OH*g.OW), sx: 4.0 / 127, act: exact.Act{Relu: true}}
	K := g.C * g.KH * g.KW
	c.x = make([]float32, g.N*g.C*g.H*g.W)
	for i := range c.x {
		c.x[i] = float32(math.Abs(r.NormFloat64()))
		if r.Intn(1000) == 0 {
			c.x[i] = []float32{float32(math.NaN()), float32(math.Inf(1)), 1e30, float32(math.Copysign(0, -1))}[r.Intn(4)]
		}
	}
	c.w = make([]float32, g.M*K)
	for i := range c.w {
		c.w[i] = float32(r.NormFloat64() / math.Sqrt(float64(K)))
	}
	c.bias = make([]float32, g.M)
	for i := range c.bias {
		c.bias[i] = float32(r.NormFloat64() * 0.1)
	}
	if res {
		c.res = make([]float32, g.OutLen())
		for i := range c.res {
			c.res[i] = float32(r.NormFloat64())
		}
	}
	return c
}

// TestInt8GPUTwin: fast_int8.cu on the GPU against its Go twin Int8Conv,
// 0 differing bits required: every tile on random convolutions and
// Gemms of every kind (specials, ties of the quantization, clamped values, zero and
// Inf weight channels), then every ResNet-50 convolution at batch 1 and
// 2 with its chosen tile.
func TestInt8GPUTwin(t *testing.T) {
	g := openGPU8(t)
	r := rand.New(rand.NewSource(19))
	var cases []case8
	for kind := range kindCount {
		for _, tt := range kernels.FastTiles {
			for range *flagInt8Cases {
				cases = append(cases, randCase8(r, Tile{tt[0], tt[1]}, kind))
			}
		}
	}
	for i, l := range resnet50() {
		for _, n := range []int{1, 2} {
			lg := l.g
			lg.N = n
			cases = append(cases, resnetCase(r, lg, i%2 == 0))
		}
	}
	// The twins run on every CPU while the GPU runs the cases in order.
	type twinOut struct {
		y   []float32
		err error
	}
	outs := make([]chan twinOut, len(cases))
	for i := range outs {
		outs[i] = make(chan twinOut, 1)
	}
	next := make(chan int, len(cases))
	for i := range cases {
		next <- i
	}
	close(next)
	for range runtime.NumCPU() {
		go func() {
			for i := range next {
				c := cases[i]
				K := c.g.C * c.g.KH * c.g.KW
				w, err := QuantizeWeights(c.w, c.g.M, K, K, 1)
				var y []float32
				if err == nil {
					y, err = Int8Conv(c.g, c.x, w, c.sx, c.bias, c.res, c.act)
				}
				outs[i] <- twinOut{y, err}
			}
		}()
	}
	total, bad := 0, 0
	for i, c := range cases {
		got := g.run(t, c)
		tw := <-outs[i]
		if tw.err != nil {
			t.Fatalf("%v: the twin: %v", c, tw.err)
		}
		want := tw.y
		d, first := differ(got, want)
		total += len(want)
		bad += d
		if d != 0 {
			t.Errorf("%v: %d of %d outputs differ from the twin (first %d: gpu %#08x twin %#08x)", c, d, len(want), first, math.Float32bits(got[first]), math.Float32bits(want[first]))
		}
	}
	t.Logf("INT8 kernels vs the Go twin: %d outputs compared, %d differ", total, bad)
}

// TestInt8GPUBatch: a row computed alone has the bits it has in batches
// of 2..256 (each batch's image 0 is the row; the rest random), and two
// runs of one launch agree: ResNet-50 layers of every tile and the
// classifier's Gemm (K a multiple of 16 and not).
func TestInt8GPUBatch(t *testing.T) {
	g := openGPU8(t)
	r := rand.New(rand.NewSource(7))
	layers := resnet50()
	picks := []exact.ConvGeom{layers[0].g, layers[3].g, layers[7].g, layers[16].g, layers[22].g, layers[20].g}
	gemms := []case8{}
	for _, k := range []int{2048, 2046} {
		c := randCase8(r, Tile{64, 32}, kindGemm)
		c.g = gemmGeom(1, 1000, k)
		gemms = append(gemms, c)
	}
	compared, bad := 0, 0
	for _, pg := range picks {
		one := resnetCase(r, pg, true)
		alone := g.run(t, one)
		if again := g.run(t, one); !equalBits(alone, again) {
			t.Errorf("%v: two runs differ", one)
		}
		for _, n := range []int{2, 7, 64, 256} {
			if pg.C*pg.H*pg.W*n > 1<<27 {
				continue
			}
			bg := pg
			bg.N = n
			b := resnetCase(r, bg, true)
			copy(b.x, one.x)
			copy(b.res, one.res)
			b.w, b.bias = one.w, one.bias
			got := g.run(t, b)[:len(alone)]
			d, first := differ(got, alone)
			compared += len(alone)
			bad += d
			if d != 0 {
				t.Errorf("%v: row alone vs in a batch of %d: %d outputs differ (first %d)", one, n, d, first)
			}
		}
	}
	for _, one := range gemms {
		one.res = nil
		one.x = make([]float32, one.g.C)
		for i := range one.x {
			one.x[i] = float32(r.NormFloat64())
		}
		one.w = make([]float32, one.g.M*one.g.C)
		for i := range one.w {
			one.w[i] = float32(r.NormFloat64() * 0.02)
		}
		one.bias = make([]float32, one.g.M)
		alone := g.run(t, one)
		for _, n := range []int{2, 33, 256} {
			b := one
			b.g.N = n
			b.x = make([]float32, n*one.g.C)
			for i := range b.x {
				b.x[i] = float32(r.NormFloat64())
			}
			copy(b.x, one.x)
			got := g.run(t, b)[:len(alone)]
			d, _ := differ(got, alone)
			compared += len(alone)
			bad += d
			if d != 0 {
				t.Errorf("%v: Gemm row alone vs in %d rows: %d outputs differ", one, n, d)
			}
		}
	}
	t.Logf("row alone vs in a batch: %d outputs compared, %d differ", compared, bad)
}

func equalBits(a, b []float32) bool { d, _ := differ(a, b); return len(a) == len(b) && d == 0 }

// TestInt8GPUSpeed times ResNet-50's convolutions in INT8 and in FP16
// (fast.cu, the same tiles), each layer (for INT8 its quantization pass
// and its GEMM) the median of -int8-reps
// event-timed launches with a bias and ReLU, at batch 1, 32 and 256, and
// logs the ratios; only with -int8-speedup > 0 does it require INT8 to be
// that many times faster at batch 256 (a device check, never run on CI).
func TestInt8GPUSpeed(t *testing.T) {
	g := openGPU8(t)
	r := rand.New(rand.NewSource(5))
	e0, err := g.c.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	e1, err := g.c.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	timeIt := func(f func() error) float64 {
		var ms []float64
		for i := 0; i < *flagInt8Reps+3; i++ {
			if err := e0.Record(g.st); err != nil {
				t.Fatal(err)
			}
			if err := f(); err != nil {
				t.Fatal(err)
			}
			if err := e1.Record(g.st); err != nil {
				t.Fatal(err)
			}
			v, err := e0.Elapsed(e1)
			if err != nil {
				t.Fatal(err)
			}
			if i >= 3 {
				ms = append(ms, v)
			}
		}
		sort.Float64s(ms)
		return ms[len(ms)/2]
	}
	pool := make([]float32, 1<<20) // random values, tiled into the operands
	for i := range pool {
		pool[i] = float32(r.NormFloat64())
	}
	fill := func(n int, scale float64, abs bool) []float32 {
		v := make([]float32, n)
		off := r.Intn(len(pool))
		for i := range v {
			f := pool[(off+i*7)%len(pool)] * float32(scale)
			if abs && f < 0 {
				f = -f
			}
			v[i] = f
		}
		return v
	}
	for _, batch := range []int{1, 32, 256} {
		var t8, t16, flops float64
		tileSum := make([]float64, len(kernels.FastTiles))
		var bestSum, quantSum float64
		for _, l := range resnet50() {
			lg := l.g
			lg.N = batch
			K := lg.C * lg.KH * lg.KW
			tile := ChooseTile(lg.M, lg.OH*lg.OW)
			x, w := fill(lg.N*lg.C*lg.H*lg.W, 1, true), fill(lg.M*K, 0.05, false)
			c := case8{g: lg, t: tile, x: x, w: w, sx: 4.0 / 127}
			a, b := g.timeLayer(t, c, timeIt)
			t.Logf("batch %3d conv %4d->%4d %3dx%-3d k%d s%d tile %-7s: int8 %.4f ms, fp16 %.4f ms (%.2fx) x%d",
				batch, lg.C, lg.M, lg.H, lg.W, lg.KH, lg.SH, tile, a, b, b/a, l.count)
			t8 += a * float64(l.count)
			t16 += b * float64(l.count)
			if *flagInt8Tiles {
				q, per := g.timeInt8Tiles(t, c, timeIt)
				line := fmt.Sprintf("tiles batch %3d conv %4d->%4d %3dx%-3d k%d s%d: quant %.4f ms", batch, lg.C, lg.M, lg.H, lg.W, lg.KH, lg.SH, q)
				best := math.Inf(1)
				for i, v := range per {
					line += fmt.Sprintf(", %s %.4f", tileOf(kernels.FastTiles[i]), v)
					tileSum[i] += v * float64(l.count)
					best = math.Min(best, v)
				}
				bestSum += best * float64(l.count)
				quantSum += q * float64(l.count)
				t.Log(line)
			}
			flops += 2 * float64(lg.OutLen()) * float64(K) * float64(l.count)
		}
		msg := fmt.Sprintf("ResNet-50's convolutions, batch %d: int8 %.3f ms (%.0f img/s, %.1f TOPS), fp16 %.3f ms (%.0f img/s, %.1f TFLOPS): int8 %.2fx faster",
			batch, t8, float64(batch)/t8*1e3, flops/(t8*1e-3)/1e12, t16, float64(batch)/t16*1e3, flops/(t16*1e-3)/1e12, t16/t8)
		t.Log(msg)
		if *flagInt8Tiles {
			line := fmt.Sprintf("tiles batch %d, ResNet-50's convolutions, int8 (quantization + GEMM) with one tile for all: quant alone %.3f ms", batch, quantSum)
			for i, v := range tileSum {
				line += fmt.Sprintf(", %s %.3f ms", tileOf(kernels.FastTiles[i]), v)
			}
			t.Logf("%s; each layer's fastest tile at this batch %.3f ms (%.2fx fp16's ChooseTile time)", line, bestSum, t16/bestSum)
		}
		if batch == 256 && t16/t8 < *flagInt8Speedup {
			t.Errorf("%s: the target is %.2fx", msg, *flagInt8Speedup)
		}
	}
}

// bench8 is a timed layer's operands on the device: its INT8 layer, the
// input, a zero bias, the output, the INT8 scratch, and what to free.
type bench8 struct {
	g             *gpu8
	l8            Int8Layer
	dx, db, y, sc *cuda.Buffer
	bufs          []*cuda.Buffer
}

// upload8 puts c's INT8 weights and operands on the device (b.free
// frees them).
func (g *gpu8) upload8(t *testing.T, c case8) *bench8 {
	t.Helper()
	b := &bench8{g: g}
	w := c.weights(t)
	l8, wb, err := UploadInt8(g.c, c.packed(t), w.Mult(c.sx), c.sx)
	b.l8, b.bufs = l8, wb
	if err != nil {
		b.free()
		t.Fatal(err)
	}
	lg := c.g
	b.dx = b.alloc(t, uint64(len(c.x))*4)
	b.db = b.alloc(t, uint64(lg.M)*4)
	b.y = b.alloc(t, uint64(lg.OutLen())*4)
	b.sc = b.alloc(t, Int8Scratch(lg)+16)
	for _, e := range []error{g.c.Upload(b.dx, c.x), g.c.Upload(b.db, make([]float32, lg.M))} {
		if e != nil {
			b.free()
			t.Fatal(e)
		}
	}
	return b
}

func (b *bench8) alloc(t *testing.T, n uint64) *cuda.Buffer {
	t.Helper()
	d, err := b.g.c.Alloc(n)
	if err != nil {
		b.free()
		t.Fatal(err)
	}
	b.bufs = append(b.bufs, d)
	return d
}

func (b *bench8) free() {
	for _, d := range b.bufs {
		d.Free()
	}
	b.bufs = nil
}

// timeLayer times c's convolution in INT8 and in FP16 (fast.cu, c's tile,
// the weights packed with PackWeights), a zero bias and ReLU, freeing its
// buffers before it returns.
func (g *gpu8) timeLayer(t *testing.T, c case8, timeIt func(func() error) float64) (int8ms, fp16ms float64) {
	t.Helper()
	b := g.upload8(t, c)
	defer b.free()
	lg := c.g
	K := lg.C * lg.KH * lg.KW
	w16, err := PackWeights(c.w, lg.M, K, K, 1, plan.FP16)
	if err != nil {
		t.Fatal(err)
	}
	bw := b.alloc(t, uint64(len(w16))*2)
	if err := g.c.UploadUint16(bw, w16); err != nil {
		t.Fatal(err)
	}
	relu := exact.Act{Relu: true}
	int8ms = timeIt(func() error { return g.e8.Conv(g.st, c.t, lg, b.l8, b.dx.Ptr, b.sc.Ptr, b.db.Ptr, 0, relu, b.y.Ptr) })
	fp16ms = timeIt(func() error {
		return g.e16.Conv(g.st, plan.FP16, c.t, lg, b.dx.Ptr, bw.Ptr, b.db.Ptr, 0, relu, b.y.Ptr)
	})
	return int8ms, fp16ms
}

func tileOf(t [2]int) Tile { return Tile{t[0], t[1]} }

// timeInt8Tiles times c's INT8 convolution (quantization and GEMM, a zero
// bias and ReLU) at every tile of kernels.FastTiles, and its quantization
// pass alone, freeing its buffers before it returns.
func (g *gpu8) timeInt8Tiles(t *testing.T, c case8, timeIt func(func() error) float64) (quant float64, per []float64) {
	t.Helper()
	b := g.upload8(t, c)
	defer b.free()
	lg := c.g
	relu := exact.Act{Relu: true}
	lp, err := planLaunch8(c.t, lg)
	if err != nil {
		t.Fatal(err)
	}
	qa := new(cuda.Args).Ptr(b.dx.Ptr).Ptr(b.sc.Ptr).I32(int32(lg.N)).I32(int32(lg.C)).I32(int32(lg.H * lg.W)).F32(Inv(b.l8.Scale))
	quant = timeIt(func() error {
		return g.e8.fn[kernels.FastInt8Quant].Launch(g.st, cuda.D3(lp.quant, 1, 1), cuda.D3(256, 1, 1), 0, qa)
	})
	for _, tt := range kernels.FastTiles {
		per = append(per, timeIt(func() error {
			return g.e8.Conv(g.st, tileOf(tt), lg, b.l8, b.dx.Ptr, b.sc.Ptr, b.db.Ptr, 0, relu, b.y.Ptr)
		}))
	}
	return quant, per
}
