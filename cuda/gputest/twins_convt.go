package gputest

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

func init() { extraTwins = append(extraTwins, (*suite).convT) }

// convtCase is one ConvTranspose: the node (its attributes), X's and W's
// shapes, whether it has a bias, and whether its weights hold NaN and
// ±Inf (which turn kernel/nn's tiled chain off).
type convtCase struct {
	name      string
	n         *ir.Node
	x, w      []int
	bias      bool
	nonFinite bool
	timed     bool // the suite also times it (unet_small's layers)
	// x and w, when set, are the operands (else random ones).
	x0, w0 []float32
}

// convtNode is a ConvTranspose node with the given attributes.
func convtNode(attrs ...*ir.Attr) *ir.Node {
	n := &ir.Node{OpType: "ConvTranspose", Version: 11, Attrs: map[string]*ir.Attr{}, Outputs: []string{"y"}}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	return n
}

func strAttr(name, v string) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrString, S: v} }

// convtCases are the suite's ConvTranspose cases: unet_small's
// up-convolutions, the tiled geometry (stride = kernel) with and without
// finite weights, 1-D, 3-D, groups and depthwise, dilations, output_padding,
// output_shape (a negative leading pad among them) and auto_pad, then
// s.cfg.Cases random ones with odd sizes, strides 1-3 and asymmetric pads.
// Every case has a valid geometry (engine.ConvTGeometry accepts it).
func (s *suite) convtCases() []convtCase {
	c2 := func(n, c, h, w, mg, g, kh, kw int, bias bool, attrs ...*ir.Attr) convtCase {
		return convtCase{n: convtNode(append(attrs, intAttr("group", g))...), x: []int{n, c, h, w}, w: []int{c, mg, kh, kw}, bias: bias}
	}
	st := func(v ...int) *ir.Attr { return ints("strides", v...) }
	timed := func(c convtCase) convtCase { c.timed = true; return c }
	cs := []convtCase{
		// unet_small's up-convolutions (128 -> 64 -> 32 -> 16 channels).
		timed(c2(1, 128, 16, 16, 64, 1, 2, 2, true, st(2, 2))),
		timed(c2(1, 64, 32, 32, 32, 1, 2, 2, true, st(2, 2))),
		timed(c2(1, 32, 64, 64, 16, 1, 2, 2, true, st(2, 2))),
		// Tiled: 3x3 / 3, 2x3 / (2, 3) at a batch, no bias; 1x1 / 1.
		c2(2, 7, 5, 6, 5, 1, 3, 3, true, st(3, 3)),
		c2(3, 9, 4, 7, 11, 1, 2, 3, false, st(2, 3)),
		c2(1, 13, 9, 9, 3, 1, 1, 1, true),
		// Near the tiled geometry, but not: a pad, output_padding, dilation, groups.
		c2(1, 6, 5, 5, 4, 1, 2, 2, true, st(2, 2), ints("pads", 0, 0, 1, 0)),
		c2(1, 6, 5, 5, 4, 1, 2, 2, true, st(2, 2), ints("output_padding", 1, 1)),
		c2(1, 6, 5, 5, 4, 1, 2, 2, false, st(2, 2), ints("dilations", 1, 2)),
		c2(2, 6, 5, 5, 4, 2, 2, 2, true, st(2, 2)),
		// The common upsamplers: 4x4 / 2 pad 1, 3x3 / 2 pad 1 output_padding 1,
		// depthwise (group = C = M) 4x4 / 2.
		c2(1, 10, 7, 9, 6, 1, 4, 4, true, st(2, 2), ints("pads", 1, 1, 1, 1)),
		c2(2, 8, 6, 5, 12, 1, 3, 3, true, st(2, 2), ints("pads", 1, 1, 1, 1), ints("output_padding", 1, 1)),
		c2(1, 12, 8, 8, 1, 12, 4, 4, false, st(2, 2), ints("pads", 1, 1, 1, 1)),
		// Dilations and strides 3, asymmetric pads.
		c2(1, 5, 6, 7, 3, 1, 3, 2, true, st(3, 2), ints("dilations", 2, 3), ints("pads", 2, 0, 1, 3)),
		// output_shape: within the full result, past it (a negative
		// leading pad), with N and C in front; auto_pad.
		c2(1, 4, 5, 5, 3, 1, 3, 3, true, st(2, 2), ints("output_shape", 10, 9)),
		c2(1, 4, 5, 5, 3, 1, 3, 3, true, st(2, 2), ints("output_shape", 1, 3, 14, 13)),
		c2(1, 4, 5, 6, 3, 1, 3, 3, false, st(2, 2), strAttr("auto_pad", "SAME_UPPER")),
		c2(1, 4, 5, 6, 3, 1, 4, 3, true, st(3, 2), strAttr("auto_pad", "SAME_LOWER")),
		c2(1, 4, 5, 6, 3, 1, 3, 3, true, st(2, 1), strAttr("auto_pad", "VALID"), ints("pads", 1, 1, 1, 1)),
	}
	// Where the two chains differ with finite weights: the live tap's
	// product underflows to -0, and a dead tap's FMA(w, 0, -0) would make
	// it +0; the CPU's tiled chain keeps -0.
	// The tiled geometry also when output_shape or auto_pad gives it.
	for _, c := range []convtCase{c2(1, 1, 1, 1, 1, 1, 2, 2, false, st(2, 2)), c2(1, 1, 1, 1, 1, 1, 2, 2, false, st(2, 2), ints("output_shape", 2, 2)),
		c2(1, 1, 1, 1, 1, 1, 2, 2, false, st(2, 2), strAttr("auto_pad", "SAME_LOWER"))} {
		c.x0, c.w0 = []float32{-1e-30}, []float32{1e-30, 1, 1, -1}
		cs = append(cs, c)
	}
	// The tiled geometry with NaN or ±Inf weights: the CPU's general chain.
	for _, c := range []convtCase{c2(1, 8, 6, 5, 4, 1, 2, 2, true, st(2, 2)), c2(2, 3, 3, 4, 5, 1, 3, 2, false, st(3, 2))} {
		c.nonFinite = true
		cs = append(cs, c)
	}
	// 3-D: a 2x2x2 / 2 upsampler (not tiled: the CPU tiles 2-D only), and
	// strides, pads and dilations per dimension with groups.
	c3 := func(n, c, d, h, w, mg, g, kd, kh, kw int, bias bool, attrs ...*ir.Attr) convtCase {
		return convtCase{n: convtNode(append(attrs, intAttr("group", g))...), x: []int{n, c, d, h, w}, w: []int{c, mg, kd, kh, kw}, bias: bias}
	}
	cs = append(cs,
		c3(1, 8, 3, 4, 5, 4, 1, 2, 2, 2, true, st(2, 2, 2)),
		c3(2, 6, 4, 3, 5, 2, 2, 3, 2, 3, false, st(1, 2, 3), ints("pads", 1, 0, 2, 0, 1, 1), ints("dilations", 2, 1, 1), ints("output_padding", 0, 1, 2)),
	)
	// 1-D: an upsampler (4 / 2 pad 1), grouped with output_padding, dilated.
	c1 := func(n, c, w, mg, g, k int, bias bool, attrs ...*ir.Attr) convtCase {
		return convtCase{n: convtNode(append(attrs, intAttr("group", g))...), x: []int{n, c, w}, w: []int{c, mg, k}, bias: bias}
	}
	cs = append(cs,
		c1(1, 16, 37, 8, 1, 4, true, st(2), ints("pads", 1, 1)),
		c1(2, 6, 11, 5, 3, 3, false, st(3), ints("output_padding", 2)),
		c1(1, 5, 20, 3, 1, 5, true, st(1), ints("dilations", 2), ints("pads", 3, 0)),
		c1(1, 5, 9, 3, 1, 2, true, st(2)),
	)
	fixed := len(cs)
	for try := 0; len(cs) < fixed+s.cfg.Cases && try < 100*s.cfg.Cases; try++ {
		if c, ok := s.randConvT(); ok {
			cs = append(cs, c)
		}
	}
	for i := range cs {
		cs[i].name = cs[i].describe()
	}
	return cs
}

// randConvT draws a random ConvTranspose; ok is false when its geometry
// is invalid or its output empty or larger than 1<<20 floats.
func (s *suite) randConvT() (convtCase, bool) {
	r := s.r
	rank := []int{1, 2, 2, 2, 3}[r.Intn(5)]
	g := []int{1, 1, 2, 3}[r.Intn(4)]
	c := convtCase{n: convtNode(intAttr("group", g)), x: []int{1 + r.Intn(3), g * (1 + r.Intn(9))}, bias: r.Intn(2) == 0}
	c.w = []int{c.x[1], 1 + r.Intn(12)}
	var stride, dil, opad, padB, padE, oshape []int
	for range rank {
		k := 1 + r.Intn(4)
		sd := 1 + r.Intn(3)
		d := 1
		if r.Intn(4) == 0 {
			d = 2
		}
		in := 1 + r.Intn(13-3*rank)
		c.x, c.w = append(c.x, in), append(c.w, k)
		stride, dil = append(stride, sd), append(dil, d)
		// ONNX asks output_padding below the stride or the dilation.
		opad = append(opad, r.Intn(max(sd, d)))
		padB, padE = append(padB, r.Intn(k)), append(padE, r.Intn(k))
		full := sd*(in-1) + (k-1)*d + 1
		oshape = append(oshape, max(0, full-2+r.Intn(5)))
	}
	c.n.Attrs["strides"] = ints("strides", stride...)
	if slices.ContainsFunc(dil, func(d int) bool { return d != 1 }) {
		c.n.Attrs["dilations"] = ints("dilations", dil...)
	}
	switch r.Intn(8) {
	case 0:
		c.n.Attrs["output_shape"] = ints("output_shape", oshape...)
	case 1:
		c.n.Attrs["auto_pad"] = strAttr("auto_pad", []string{"SAME_UPPER", "SAME_LOWER", "VALID"}[r.Intn(3)])
	default:
		c.n.Attrs["pads"] = ints("pads", append(padB, padE...)...)
		if r.Intn(2) == 0 {
			c.n.Attrs["output_padding"] = ints("output_padding", opad...)
		}
	}
	geo, err := engine.ConvTGeometry(c.n, c.x, c.w)
	// An empty output is left out: kernel/nn's addBias divides by the
	// output plane's size.
	if err != nil || geo.OutLen() == 0 || geo.OutLen() > 1<<20 {
		return c, false
	}
	c.nonFinite = r.Intn(6) == 0
	return c, true
}

func (c convtCase) describe() string {
	s := fmt.Sprintf("ConvTranspose %v W%v", c.x, c.w)
	for _, a := range []string{"group", "strides", "pads", "dilations", "output_padding", "output_shape", "auto_pad"} {
		if v, ok := c.n.Attrs[a]; ok {
			switch v.Kind {
			case ir.AttrInt:
				if v.I != 1 {
					s += fmt.Sprintf(" %s=%d", a, v.I)
				}
			case ir.AttrString:
				s += " " + v.S
			default:
				s += fmt.Sprintf(" %s=%v", a, v.Ints)
			}
		}
	}
	if c.bias {
		s += " +bias"
	}
	if c.nonFinite {
		s += " (NaN/Inf weights)"
	}
	return s
}

// convtData draws c's operands: X with 1% NaN, ±Inf, ±0 and subnormals;
// W with 2% of them (the finite ones only unless c.nonFinite; subnormal
// products round to ±0, and -0 is where the two chains could differ);
// the bias (nil without one). A case's fixed operands are returned as
// they are (no bias).
func (s *suite) convtData(c convtCase) (x, w, b []float32) {
	if c.x0 != nil {
		return c.x0, c.w0, nil
	}
	x = s.data(tensor.NumElems(c.x), 1, 0.01)
	w = s.data(tensor.NumElems(c.w), 0.3, 0.02)
	if !c.nonFinite {
		for i, v := range w {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				w[i] = float32(math.Copysign(0, float64(i%2*2-1)))
			}
		}
	} else {
		w[s.r.Intn(len(w))] = float32(math.Inf(1 - 2*s.r.Intn(2)))
	}
	if c.bias {
		b = s.data(c.w[1]*int(c.n.Int("group", 1)), 0.5, 0)
	}
	return x, w, b
}

// cpuConvT runs the CPU twin: the kernel registry's ConvTranspose.
func cpuConvT(c convtCase, x, w, b []float32) (*tensor.Tensor, error) {
	var attrs []*ir.Attr
	for _, a := range c.n.Attrs {
		attrs = append(attrs, a)
	}
	ins := []*tensor.Tensor{tensor.From(x, c.x...), tensor.From(w, c.w...)}
	if b != nil {
		ins = append(ins, tensor.From(b, len(b)))
	}
	return cpuOp("ConvTranspose", 11, attrs, ins...)
}

// convT checks vx_convt against kernel/nn's ConvTranspose on every case:
// exact.ConvT (the chain the CPU runs for the geometry) and, for the
// tiled geometry with finite weights, the tiled chain forced.
func (s *suite) convT() error {
	for _, c := range s.convtCases() {
		x, w, b := s.convtData(c)
		want, err := cpuConvT(c, x, w, b)
		if err != nil {
			return fmt.Errorf("gputest: %s: %w", c.name, err)
		}
		g, err := engine.ConvTGeometry(c.n, c.x, c.w)
		if err != nil {
			return fmt.Errorf("gputest: %s: %w", c.name, err)
		}
		if sh := engine.ConvTShape(g); fmt.Sprint(sh) != fmt.Sprint(want.Shape) {
			return fmt.Errorf("gputest: %s: GPU geometry gives %v, the CPU %v", c.name, sh, want.Shape)
		}
		modes := []exact.ConvTMode{-1}
		if g.Tiled() && !c.nonFinite {
			modes = append(modes, exact.ConvTLive)
		}
		for _, mode := range modes {
			gpu, err := s.run(len(f32(want)), [][]float32{x, w, b, {0}}, func(in []uint64, out uint64) error {
				if mode < 0 {
					return s.e.ConvT(nil, g, in[0], in[1], in[2], in[3], out)
				}
				return s.e.ConvTWith(nil, g, mode, in[0], in[1], in[2], in[3], out)
			})
			if err != nil {
				return fmt.Errorf("gputest: %s: %w", c.name, err)
			}
			tag := ""
			switch {
			case mode == exact.ConvTLive:
				tag = " live forced"
			case g.Tiled():
				tag = " tiled, checked"
			}
			s.record(c.name+tag, gpu, f32(want), !c.bias)
		}
		if c.timed {
			if err := s.timeConvT(c, g, x, w, b); err != nil {
				return fmt.Errorf("gputest: %s: %w", c.name, err)
			}
		}
	}
	return nil
}

// timeConvT prints the median time of 10 launches of exact.ConvT on c
// (after 2 warm-ups), and of 3 runs of the CPU twin in this process.
func (s *suite) timeConvT(c convtCase, g exact.ConvTGeom, x, w, b []float32) error {
	tm, err := s.newTimer()
	if err != nil {
		return err
	}
	defer tm.close()
	var bufs []*cuda.Buffer
	defer func() {
		for _, v := range bufs {
			v.Free()
		}
	}()
	ptr := func(v []float32) (uint64, error) {
		if v == nil {
			return 0, nil
		}
		d, err := s.dev(v)
		if err != nil {
			return 0, err
		}
		bufs = append(bufs, d)
		return d.Ptr, nil
	}
	var p [5]uint64
	for i, v := range [][]float32{x, w, b, {0}, make([]float32, g.OutLen())} {
		if p[i], err = ptr(v); err != nil {
			return err
		}
	}
	var gpu []float64
	for i := 0; i < 12; i++ {
		ms, err := tm.time(func() error { return s.e.ConvT(tm.st, g, p[0], p[1], p[2], p[3], p[4]) })
		if err != nil {
			return err
		}
		if i >= 2 {
			gpu = append(gpu, ms)
		}
	}
	var cpu []float64
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		if _, err := cpuConvT(c, x, w, b); err != nil {
			return err
		}
		cpu = append(cpu, float64(time.Since(t0).Microseconds())/1e3)
	}
	flop := 2 * float64(g.OutLen()) * float64(g.C/g.G)
	fmt.Fprintf(s.w, "bench %s: GPU %.4f ms (%.1f GFLOP/s of live taps), CPU twin %.3f ms (median of 3, this process)\n",
		c.name, median(gpu), flop/median(gpu)/1e6, median(cpu))
	return nil
}
