package nn

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// ConvTranspose is computed as a gather: output o of channel m is one FMA
// chain over (input channel c, kernel taps ascending) of x[c, i] * w[c, m,
// tap] over the taps with o = i*stride + tap*dil - padB, the taps that hit
// no input contributing FMA(0, w, acc). That is im2col with the transposed
// tap relation followed by the ordinary GEMM, so the determinism rules of
// gemm.go hold unchanged; the bias is added after the chain.

// transposeGeom derives ConvTranspose's output size and pads.
func transposeGeom(n *ir.Node, inSp, k []int) (*geom, error) {
	nd := len(inSp)
	g := &geom{in: inSp, k: k, out: make([]int, nd), padB: make([]int, nd), padE: make([]int, nd)}
	var err error
	if g.stride, err = attrInts(n, "strides", nd, 1); err != nil {
		return nil, err
	}
	if g.dil, err = attrInts(n, "dilations", nd, 1); err != nil {
		return nil, err
	}
	opad, err := attrInts(n, "output_padding", nd, 0)
	if err != nil {
		return nil, err
	}
	pads, err := attrInts(n, "pads", 2*nd, 0)
	if err != nil {
		return nil, err
	}
	for i := 0; i < nd; i++ {
		if g.stride[i] < 1 || g.dil[i] < 1 || k[i] < 1 {
			return nil, fmt.Errorf("nn: ConvTranspose: strides %v, dilations %v and kernel %v must be positive", g.stride, g.dil, k)
		}
	}
	ap := n.String("auto_pad", "NOTSET")
	var oshape []int
	if v := n.Ints("output_shape", nil); v != nil {
		if len(v) == nd+2 {
			v = v[2:]
		}
		if len(v) != nd {
			return nil, fmt.Errorf("nn: ConvTranspose: output_shape %v, want %d spatial values", v, nd)
		}
		oshape = intsOf(v)
	} else if ap == "SAME_UPPER" || ap == "SAME_LOWER" {
		oshape = make([]int, nd)
		for i := range oshape {
			oshape[i] = inSp[i] * g.stride[i]
		}
	}
	for i := 0; i < nd; i++ {
		full := g.stride[i]*(inSp[i]-1) + opad[i] + (k[i]-1)*g.dil[i] + 1
		if oshape != nil {
			total := full - oshape[i]
			// Python's floor division: a negative total (output_shape
			// larger than the full result) extends the end.
			half := total >> 1
			if ap == "SAME_UPPER" {
				g.padB[i], g.padE[i] = half, total-half
			} else {
				g.padB[i], g.padE[i] = total-half, half
			}
			g.out[i] = oshape[i]
		} else {
			if ap != "VALID" {
				g.padB[i], g.padE[i] = pads[i], pads[nd+i]
			}
			g.out[i] = full - g.padB[i] - g.padE[i]
		}
		if g.out[i] < 0 {
			return nil, fmt.Errorf("nn: ConvTranspose: negative output size in spatial dimension %d", i)
		}
	}
	return g, nil
}

func runConvTranspose(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 2, "ConvTranspose"); err != nil {
		return nil, err
	}
	x, w, b := in[0], in[1], kernel.Input(in, 2)
	if err := sameDT("ConvTranspose", x, w, b); err != nil {
		return nil, err
	}
	s, err := transposeSetup(n, x.Shape, w.Shape, b)
	if err != nil {
		return nil, err
	}
	g := s.g
	out := s.outShape()
	xf, xd, err := floatIn(x, "ConvTranspose X")
	if err != nil {
		return nil, err
	}
	wf, wd, _ := floatIn(w, "ConvTranspose W")
	if xd != nil {
		y := convGEMM(machineOf(c), s, xd, regroup(s, wd), true, dgemm)
		if b != nil {
			addBias(y, b.Data.([]float64), s.M, prod(g.out))
		}
		return []*tensor.Tensor{tensor.From(y, out...)}, nil
	}
	var bf []float32
	if b != nil {
		bf, _, _ = floatIn(b, "ConvTranspose B")
	}
	if x.DType == tensor.Float32 {
		y := make([]float32, s.N*s.M*prod(g.out))
		if convTransposeTiled(machineOf(c), n, s, xf, wf, bf, y) {
			return []*tensor.Tensor{tensor.From(y, out...)}, nil
		}
	}
	y := convGEMM(machineOf(c), s, xf, regroup(s, wf), true, sgemmP)
	if b != nil {
		addBias(y, bf, s.M, prod(g.out))
	}
	return []*tensor.Tensor{f32As(x.DType, out, y)}, nil
}

// transposeSetup is ConvTranspose's geometry for X and W of shapes x and
// w, checked against the bias b (nil: none).
func transposeSetup(n *ir.Node, x, w []int, b *tensor.Tensor) (*convSetup, error) {
	if len(x) < 3 || len(w) != len(x) {
		return nil, fmt.Errorf("nn: ConvTranspose: X %v and W %v must have the same rank >= 3", x, w)
	}
	s := &convSetup{N: x[0], C: x[1], G: int(n.Int("group", 1))}
	if s.G < 1 || s.C%s.G != 0 || w[0] != s.C {
		return nil, fmt.Errorf("nn: ConvTranspose: W %v must have %d input channels divisible by group %d", w, s.C, s.G)
	}
	s.Cg, s.Mg = s.C/s.G, w[1]
	s.M = s.Mg * s.G
	g, err := transposeGeom(n, x[2:], w[2:])
	if err != nil {
		return nil, err
	}
	s.g = g
	if b != nil && (len(b.Shape) != 1 || b.Shape[0] != s.M) {
		return nil, fmt.Errorf("nn: ConvTranspose: bias shape %v, want [%d]", b.Shape, s.M)
	}
	return s, nil
}

// intoConvTranspose is ConvTranspose's Into: a float32 ConvTranspose
// whose kernel tiles the output (convTransposeTiled) is computed straight
// into the preallocated output, its geometry kept in c's State; every
// other case runs Run and a copy. Run's bits either way (the same
// convTransposeTiled).
func intoConvTranspose(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if err := need(in, 2, "ConvTranspose"); err != nil {
		return err
	}
	x, w, b := in[0], in[1], kernel.Input(in, 2)
	if !allF32(x, w, b, out[0]) {
		return viaRun(runConvTranspose)(c, n, in, out)
	}
	s, err := cached(c, n, in, func() (*convSetup, error) { return transposeSetup(n, x.Shape, w.Shape, b) })
	if err != nil {
		return err
	}
	if err := checkOut("ConvTranspose", out, s.outShape()); err != nil {
		return err
	}
	var bf []float32
	if b != nil {
		bf = b.Data.([]float32)
	}
	if convTransposeTiled(machineOf(c), n, s, x.Data.([]float32), w.Data.([]float32), bf, out[0].Data.([]float32)) {
		return nil
	}
	return viaRun(runConvTranspose)(c, n, in, out)
}

// regroup lays ConvTranspose's W [C, M/group, taps] out as [M, C/group,
// taps] (per group), the layout convGEMM multiplies.
func regroup[F any](s *convSetup, w []F) []F {
	kn := prod(s.g.k)
	out := make([]F, len(w))
	for gi := 0; gi < s.G; gi++ {
		for m := 0; m < s.Mg; m++ {
			for c := 0; c < s.Cg; c++ {
				src := ((gi*s.Cg+c)*s.Mg + m) * kn
				dst := ((gi*s.Mg+m)*s.Cg + c) * kn
				copy(out[dst:dst+kn], w[src:src+kn])
			}
		}
	}
	return out
}

func inferConvTranspose(n *ir.Node, x, w []ir.Dim, k []int, known bool, dt tensor.DType) ([]ir.Type, error) {
	out := append([]ir.Dim{x[0]}, unknownDims(len(x)-1)...)
	g := n.Int("group", 1)
	if w[1].Known() {
		out[1] = ir.Fixed(int(w[1].Value * g))
	}
	sp := make([]int, len(x)-2)
	for i := range sp {
		if !x[i+2].Known() {
			known = false
			break
		}
		sp[i] = int(x[i+2].Value)
	}
	if known {
		gm, err := transposeGeom(n, sp, k)
		if err != nil {
			return nil, err
		}
		for i, o := range gm.out {
			out[i+2] = ir.Fixed(o)
		}
	}
	return []ir.Type{{DType: dt, Shape: out, RankKnown: true}}, nil
}
