// Package attn is fast mode's fused attention (issue 19): which Attention
// layers (kernel/fused's chain of compile.fuseAttention) it takes, and its
// arithmetic, which cuda/kernels' fast_attn.cu performs on the GPU and
// Reference on the CPU with cuda/mma's model of the tensor cores, so that
// a fast plan's attention replays bit for bit without a GPU.
//
// For each (batch, head) and query row i, with S keys and head size D:
//
//	s[i][j] = the chain of m16n8k16 steps over d = 0, 16, ... of
//	          q[i][d]·kt[d][j] (16-bit operands rounded to nearest even,
//	          FP32 accumulation from +0), a NaN canonical;
//	s /= scale or s *= scale (the body's Div or Mul), s += mask (its Add),
//	          one rounded FP32 operation each;
//	p[i][j] = the exact Softmax of row i (kernel/reduce's: the first NaN or
//	          else the first maximum m, e = exp(s − m) with vmath.Exp32, the
//	          sum of the e in key order, e / sum);
//	y[i][d] = the chain of steps over j = 0, 16, ... of p[i][j]·v[j][d],
//	          a NaN canonical.
//
// Every reduction order is fixed by S and D alone: a row's bits never
// depend on the batch it shares, the launch or the run.
package attn

import (
	"fmt"

	"github.com/vouchml/vouch/cuda/mma"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// Scale ops between the scores and the mask.
const (
	NoScale  = 0
	DivScale = 1
	MulScale = 2
)

// Spec is an Attention layer as the fused kernel reads it: the layer's
// input indices of q, kt (the keys transposed), v and the additive mask
// (-1: none), and the scaling.
type Spec struct {
	Q, Kt, V, Mask int
	Op             int
	ScaleInput     int // the layer input holding the scale (-1: none)
}

// Parse reads an Attention layer's body: MatMul(q, kt), then at most one
// Div or Mul by a value the caller checks is a one-element float32
// constant, at most one Add, a Softmax over the last axis (opset 13 or
// later), then MatMul(p, v); every operand but the chain's own values an
// input of the layer. Anything else (a Reshape between the Adds, two
// masks) is refused with the reason.
func Parse(n *ir.Node) (Spec, error) {
	sp := Spec{Mask: -1, ScaleInput: -1}
	a := n.Attrs["body"]
	if n.OpType != "Attention" || a == nil || a.G == nil {
		return sp, fmt.Errorf("not an Attention layer with a body")
	}
	body := a.G
	if len(body.Inputs) != len(n.Inputs) || len(body.Outputs) != 1 {
		return sp, fmt.Errorf("Attention body of %d inputs and %d outputs for %d inputs", len(body.Inputs), len(body.Outputs), len(n.Inputs))
	}
	input := map[string]int{}
	for i, v := range body.Inputs {
		input[v.Name] = i
	}
	in := func(name string) (int, bool) { i, ok := input[name]; return i, ok }
	nodes := body.Nodes
	if len(nodes) < 3 {
		return sp, fmt.Errorf("Attention body of %d layers", len(nodes))
	}
	for _, b := range nodes {
		if b.Domain != "" || len(b.Outputs) != 1 {
			return sp, fmt.Errorf("Attention body layer %s (%s, domain %q)", b.Name, b.OpType, b.Domain)
		}
	}
	qk := nodes[0]
	var ok1, ok2 bool
	if sp.Q, ok1 = in(qk.Input(0)); qk.OpType != "MatMul" || len(qk.Inputs) != 2 || !ok1 {
		return sp, fmt.Errorf("Attention body starts with %s, not a MatMul of the layer's inputs", qk.OpType)
	}
	if sp.Kt, ok2 = in(qk.Input(1)); !ok2 {
		return sp, fmt.Errorf("Attention body's first MatMul reads a computed value")
	}
	cur := qk.Outputs[0]
	i := 1
	if b := nodes[i]; (b.OpType == "Div" || b.OpType == "Mul") && len(b.Inputs) == 2 && b.Input(0) == cur {
		k, ok := in(b.Input(1))
		if !ok {
			return sp, fmt.Errorf("Attention body's %s by a computed value", b.OpType)
		}
		sp.ScaleInput, sp.Op = k, map[string]int{"Div": DivScale, "Mul": MulScale}[b.OpType]
		cur = b.Outputs[0]
		i++
	}
	if b := nodes[i]; b.OpType == "Add" && len(b.Inputs) == 2 {
		other := b.Input(1)
		if b.Input(1) == cur {
			other = b.Input(0)
		} else if b.Input(0) != cur {
			return sp, fmt.Errorf("Attention body's Add does not read the scores")
		}
		k, ok := in(other)
		if !ok {
			return sp, fmt.Errorf("Attention body's Add of a computed value")
		}
		sp.Mask = k
		cur = b.Outputs[0]
		i++
	}
	if i+2 != len(nodes) {
		return sp, fmt.Errorf("Attention body of %d layers (the fused kernel takes MatMul, [Div|Mul], [one Add], Softmax, MatMul)", len(nodes))
	}
	sm, pv := nodes[i], nodes[i+1]
	if sm.OpType != "Softmax" || sm.Input(0) != cur || sm.Version < 13 || sm.Int("axis", -1) != -1 {
		return sp, fmt.Errorf("Attention body's %s (opset %d, axis %d) is not a Softmax over the last axis", sm.OpType, sm.Version, sm.Int("axis", -1))
	}
	k, ok := in(pv.Input(1))
	if pv.OpType != "MatMul" || len(pv.Inputs) != 2 || pv.Input(0) != sm.Outputs[0] || !ok {
		return sp, fmt.Errorf("Attention body ends with %s, not a MatMul of the Softmax by a layer input", pv.OpType)
	}
	sp.V = k
	if pv.Outputs[0] != body.Outputs[0].Name {
		return sp, fmt.Errorf("Attention body's output is not its last MatMul's")
	}
	return sp, nil
}

// ScaleOf returns a one-element float32 constant's value.
func ScaleOf(t *tensor.Tensor) (float32, error) {
	if t == nil || t.DType != tensor.Float32 || t.Len() != 1 {
		return 0, fmt.Errorf("the attention scale is not a one-element float32 constant")
	}
	return t.Data.([]float32)[0], nil
}

// Shape is one launch's geometry: B x H heads of S rows of D values, the
// mask's element (b, h, i, j) at MB*b + MH*h + MI*i + MJ*j.
type Shape struct {
	B, H, S, D     int
	MB, MH, MI, MJ int
}

// MaxS is the longest sequence the kernels hold; Dims the head sizes.
const MaxS = 128

// Dims are the head sizes the kernels take.
var Dims = []int{32, 64}

// Fits says why a head size and sequence have no fused kernel ("" when
// they have one).
func Fits(S, D int) string {
	if D != 32 && D != 64 {
		return fmt.Sprintf("head size %d (the fused attention takes 32 or 64)", D)
	}
	if S < 1 || S > MaxS {
		return fmt.Sprintf("sequence of %d (the fused attention takes 1 to %d)", S, MaxS)
	}
	return ""
}

// SMax is the kernel's longest sequence for S (0: unknown at build time,
// the longest): 64 or 128. It changes where a block's keys sit, never a
// chain: every SMAX that holds S gives the same bits.
func SMax(S int) int {
	if S >= 1 && S <= 64 {
		return 64
	}
	return 128
}

// Geometry checks the run-time shapes of q [.., S, D], kt [.., D, S], v
// [.., S, D] (the same leading dimensions, at most two) and the mask
// (nil: none; it broadcasts to the scores [.., S, S]) and returns the
// launch's shape.
func Geometry(qs, kts, vs, ms []int, hasMask bool) (Shape, error) {
	var g Shape
	r := len(qs)
	if r < 2 || r > 4 || len(kts) != r || len(vs) != r {
		return g, fmt.Errorf("attention of q %v, kt %v, v %v (equal ranks 2 to 4)", qs, kts, vs)
	}
	S, D := qs[r-2], qs[r-1]
	for i := 0; i < r-2; i++ {
		if kts[i] != qs[i] || vs[i] != qs[i] {
			return g, fmt.Errorf("attention of q %v, kt %v, v %v (the same leading dimensions, no broadcast)", qs, kts, vs)
		}
	}
	if kts[r-2] != D || kts[r-1] != S || vs[r-2] != S || vs[r-1] != D {
		return g, fmt.Errorf("attention of q %v, kt %v, v %v (kt [.., D, S], v [.., S, D])", qs, kts, vs)
	}
	if why := Fits(S, D); why != "" {
		return g, fmt.Errorf("attention of q %v: %s", qs, why)
	}
	q4 := append(make([]int, 0, 4), []int{1, 1, 1, 1}[:4-r]...)
	q4 = append(q4, qs...)
	g = Shape{B: q4[0], H: q4[1], S: S, D: D}
	if !hasMask {
		return g, nil
	}
	if len(ms) > 4 {
		return g, fmt.Errorf("attention mask %v of rank over 4", ms)
	}
	sc := []int{g.B, g.H, S, S}
	m4 := append([]int{1, 1, 1, 1}[:4-len(ms)], ms...)
	st := make([]int, 4)
	acc := 1
	for d := 3; d >= 0; d-- {
		switch {
		case m4[d] == sc[d] && sc[d] != 1:
			st[d] = acc
		case m4[d] == 1:
			st[d] = 0
		default:
			return g, fmt.Errorf("attention mask %v does not broadcast to the scores %v", ms, sc)
		}
		acc *= m4[d]
	}
	g.MB, g.MH, g.MI, g.MJ = st[0], st[1], st[2], st[3]
	return g, nil
}

// Reference computes on the CPU what fast_attn.cu computes on a GPU whose
// tensor cores m models (format f): y [B][H][S][D] from q, kt, v (the
// Geometry's layouts, float32) and the mask (nil: none), op and scale as
// in Spec.
func Reference(m mma.Model, f mma.Format, g Shape, q, kt, v, mask []float32, op int, scale float32) ([]float32, error) {
	S, D := g.S, g.D
	n := g.B * g.H * S * D
	if len(q) != n || len(kt) != n || len(v) != n {
		return nil, fmt.Errorf("attn: q, kt, v of %d, %d, %d values for %+v", len(q), len(kt), len(v), g)
	}
	y := make([]float32, n)
	kr := make([]float32, S*D) // the keys as rows [j][d]
	vt := make([]float32, D*S) // the values as rows [d][j]
	sc := make([]float32, S*S)
	out := make([]float32, S*D)
	for bh := 0; bh < g.B*g.H; bh++ {
		b, h := bh/g.H, bh%g.H
		o := bh * S * D
		for d := 0; d < D; d++ {
			for j := 0; j < S; j++ {
				kr[j*D+d] = kt[o+d*S+j]
				vt[d*S+j] = v[o+j*D+d]
			}
		}
		// Rows of q by rows of kr: the 1x1 convolution of S images of D
		// channels by S filters, y[i][j].
		gq := mma.ConvGeom{N: S, C: D, H: 1, W: 1, M: S, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
		if err := m.Conv2D(f, gq, q[o:o+S*D], kr, mma.Epilogue{}, sc); err != nil {
			return nil, err
		}
		for i := 0; i < S; i++ {
			row := sc[i*S : i*S+S]
			for j := range row {
				s := row[j]
				switch op {
				case DivScale:
					s = s / scale
				case MulScale:
					s = float32(s * scale)
				}
				if mask != nil {
					s = s + mask[g.MB*b+g.MH*h+g.MI*i+g.MJ*j]
				}
				row[j] = s
			}
			Softmax(row)
		}
		gp := mma.ConvGeom{N: S, C: S, H: 1, W: 1, M: D, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
		if err := m.Conv2D(f, gp, sc, vt, mma.Epilogue{}, out); err != nil {
			return nil, err
		}
		copy(y[o:o+S*D], out)
	}
	return y, nil
}

// Softmax is the exact kernels' softmax of one row in place (vx_softmax,
// kernel/reduce's over the last axis): the first NaN or else the first
// maximum m, e = Exp32(x − m), the sum of the e in order, e / sum.
func Softmax(x []float32) {
	mx := x[0]
	for _, v := range x[1:] {
		if v > mx || (v != v && mx == mx) {
			mx = v
		}
	}
	var s float32
	for j, v := range x {
		e := vmath.Exp32(v - mx)
		x[j] = e
		s += e
	}
	for j := range x {
		x[j] /= s
	}
}

// Layout is where the fused kernel reads q, kt, v and writes y: each
// operand's strides (b, h, row, column) in elements, q, v and y by
// (b, h, i, d), kt by (b, h, d, j). It changes where a value is, never an
// operation on it: every layout gives the same bits.
type Layout struct {
	Q, Kt, V, Y [4]int
}

// Contiguous is the layout of contiguous operands of g: q, v, y
// [B][H][S][D], kt [B][H][D][S].
func Contiguous(g Shape) Layout {
	r := [4]int{g.H * g.S * g.D, g.S * g.D, g.D, 1}
	return Layout{Q: r, Kt: [4]int{g.H * g.D * g.S, g.D * g.S, g.S, 1}, V: r, Y: r}
}

// Words is the layout as the kernels' va_lay struct of 16 long longs, in
// 32-bit words (low first).
func (l Layout) Words() []int32 {
	var w []int32
	for _, a := range [][4]int{l.Q, l.Kt, l.V, l.Y} {
		for _, v := range a {
			w = append(w, int32(uint32(uint64(v))), int32(uint32(uint64(v)>>32)))
		}
	}
	return w
}
