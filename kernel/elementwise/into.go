package elementwise

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// The Into forms (kernel.Op.Into) write into the executor's preallocated
// outputs with the same row kernels as Run, so they give Run's bits. Their
// fast paths (float32, and for arithmetic also float64, int32 and int64)
// allocate nothing: the broadcast is planned in fixed arrays (up to maxRank
// dimensions). Other element types and higher ranks run Run and copy its
// result, which is correct but allocates.
//
// Every Into here is marked InPlace: out[0] may share storage with any
// input of its dtype and shape. That is safe because each output element
// is computed from the input elements at its own offset (an input with the
// output's shape walks with stride 1 in step with the output) and written
// after they are read; nothing reads an input element at another offset.

// maxRank is the largest output rank the fixed-array broadcast plan takes.
const maxRank = 8

// bplan is plan in fixed arrays, for at most three inputs: planning it
// allocates nothing.
type bplan struct {
	n, inner, nd int
	dims         [maxRank]int    // outer dimensions, outermost first
	st           [maxRank][3]int // st[d][k]: input k's stride in outer dimension d
	in           [3]int          // input k's stride within a row (0 or 1)
}

// init plans the broadcast of the k shapes ins[:k] to out, exactly as
// newPlan does. It reports false when out has more than maxRank dimensions.
func (p *bplan) init(out []int, k int, ins *[3][]int) bool {
	r := len(out)
	if r > maxRank {
		return false
	}
	*p = bplan{n: tensor.NumElems(out), inner: 1}
	// Strides of each input over out's dimensions (0 where broadcast).
	var st [maxRank][3]int
	for j := 0; j < k; j++ {
		s := ins[j]
		acc := 1
		for d := r - 1; d >= 0; d-- {
			sd := d - (r - len(s))
			if sd < 0 || s[sd] == 1 {
				st[d][j] = 0
			} else {
				st[d][j] = acc
			}
			if sd >= 0 {
				acc *= s[sd]
			}
		}
	}
	// Merge, innermost first, as newPlan.
	var size [maxRank]int
	var dst [maxRank][3]int
	nd := 0
	for d := r - 1; d >= 0; d-- {
		if out[d] == 1 {
			continue
		}
		if nd > 0 {
			merge := true
			for j := 0; j < k; j++ {
				if st[d][j] != dst[nd-1][j]*size[nd-1] {
					merge = false
					break
				}
			}
			if merge {
				size[nd-1] *= out[d]
				continue
			}
		}
		size[nd], dst[nd] = out[d], st[d]
		nd++
	}
	if nd == 0 {
		return true
	}
	p.inner = size[0]
	p.in = dst[0]
	for i := nd - 1; i >= 1; i-- {
		p.dims[p.nd] = size[i]
		p.st[p.nd] = dst[i]
		p.nd++
	}
	return true
}

// rows2 runs row over every row of the plan for two inputs.
func rows2[A, B, R any](p *bplan, d []R, a []A, b []B, row rowFn[A, B, R]) {
	rowsRange2(p, d, a, b, row, 0, p.n)
}

// viaRun computes with Run and copies the result into out: the path for
// element types and ranks the fast paths do not take.
func viaRun(run kernel.RunFunc, c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if err := kernel.ViaRun(run, c, n, in, out); err != nil {
		return fmt.Errorf("elementwise: %w", err)
	}
	return nil
}

// outOf checks that out[0] exists with dt and the broadcast shape of the
// given inputs' shapes.
func outOf(op string, out []*tensor.Tensor) (*tensor.Tensor, error) {
	if len(out) == 0 || out[0] == nil {
		return nil, fmt.Errorf("elementwise: %s: no output slot", op)
	}
	return out[0], nil
}

// arithInto is the Into form of Add, Sub, Mul and Div.
func arithInto(op string) kernel.IntoFunc {
	run := arith(op)
	return func(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
		if err := need(op, in, 2); err != nil {
			return err
		}
		if err := sameType(op, in[0], in[1]); err != nil {
			return err
		}
		o, err := outOf(op, out)
		if err != nil {
			return err
		}
		a, b := in[0], in[1]
		var p bplan
		if isLegacy(n) || !p.init(o.Shape, 2, &[3][]int{a.Shape, b.Shape}) || !broadcastsTo(o.Shape, a.Shape, b.Shape) {
			return viaRun(run, c, n, in, out)
		}
		switch x := a.Data.(type) {
		case []float32:
			d, y := o.Data.([]float32), b.Data.([]float32)
			if row, cost := arithRow32(c.Vec(), op); row != nil && len(d) == p.n && splits(c.Workers(), p.n) {
				rows2Par(c.Workers(), &p, d, x, y, row, cost)
				return nil
			}
			return arithIntoT(c.Vec(), op, &p, d, x, y)
		case []float64:
			return arithIntoT(c.Vec(), op, &p, o.Data.([]float64), x, b.Data.([]float64))
		case []int32:
			return arithIntoT(c.Vec(), op, &p, o.Data.([]int32), x, b.Data.([]int32))
		case []int64:
			return arithIntoT(c.Vec(), op, &p, o.Data.([]int64), x, b.Data.([]int64))
		}
		return viaRun(run, c, n, in, out)
	}
}

// broadcastsTo reports whether every shape broadcasts to out (so the plan's
// offsets stay inside the inputs).
func broadcastsTo(out []int, shapes ...[]int) bool {
	for _, s := range shapes {
		if len(s) > len(out) {
			return false
		}
		for i, d := range s {
			if o := out[len(out)-len(s)+i]; d != o && d != 1 {
				return false
			}
		}
	}
	return true
}

func arithIntoT[T kernel.Number](v vmath.Vec, op string, p *bplan, d, a, b []T) error {
	if len(d) != p.n {
		return fmt.Errorf("elementwise: %s: output slot holds %d elements, want %d", op, len(d), p.n)
	}
	switch op {
	case "Add":
		rows2(p, d, a, b, rowsFor(v, addRow[T], addRowVec[T]))
	case "Sub":
		rows2(p, d, a, b, subRow[T])
	case "Mul":
		rows2(p, d, a, b, mulRow[T])
	case "Div":
		if !isFloatT[T]() {
			for _, v := range b {
				if v == 0 {
					return fmt.Errorf("elementwise: Div: integer division by zero")
				}
			}
		}
		rows2(p, d, a, b, rowsFor(v, divRow[T], divRowVec[T]))
	default:
		return fmt.Errorf("elementwise: unknown arithmetic op %s", op)
	}
	return nil
}

// powInto is Pow's Into: float32 base and exponent, through float64 as Run.
func powInto(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if err := need("Pow", in, 2); err != nil {
		return err
	}
	o, err := outOf("Pow", out)
	if err != nil {
		return err
	}
	a, b := in[0], in[1]
	x, ok1 := a.Data.([]float32)
	e, ok2 := b.Data.([]float32)
	d, ok3 := o.Data.([]float32)
	var p bplan
	if !ok1 || !ok2 || !ok3 || isLegacy(n) || !p.init(o.Shape, 2, &[3][]int{a.Shape, b.Shape}) || !broadcastsTo(o.Shape, a.Shape, b.Shape) || len(d) != p.n {
		return viaRun(runPow, c, n, in, out)
	}
	if splits(c.Workers(), p.n) {
		rows2Par(c.Workers(), &p, d, x, e, powRow, 16)
		return nil
	}
	rows2(&p, d, x, e, powRow)
	return nil
}

func powRow(d, a, b []float32, sa, sb int) {
	if sb == 0 && b[0] == 2 {
		square32(d, a, sa)
		return
	}
	for i := range d {
		d[i] = float32(math.Pow(float64(a[i*sa]), float64(b[i*sb])))
	}
}

// square32 sets d[i] = float32(math.Pow(float64(a[i*sa]), 2)) as a[i*sa]²
// in float32. For an exponent of 2 math.Pow squares the mantissa exactly
// (a float32's 24 bits squared fit in float64's 53, and its range cannot
// underflow there) and scales by a power of two, so it returns the exact
// square, which the conversion rounds once: float32's own multiply rounds
// the same exact square once, to the same float. Zeros give +0 and
// infinities +Inf either way; a NaN keeps math.Pow's NaN (x*x would keep
// x's payload). (The unfused LayerNorm of PyTorch's exports squares with
// Pow: swin_t's PatchMerging ran 3 Pows in 17 ms.)
func square32(d, a []float32, sa int) {
	for i := range d {
		x := a[i*sa]
		if x != x {
			d[i] = float32(math.Pow(float64(x), 2))
			continue
		}
		d[i] = x * x
	}
}

// unaryInto is the Into form of a unary operator whose float functions mk
// builds without allocating (no captured attributes).
func unaryInto(op string, mk func(*ir.Node) (floatFns, error), run kernel.RunFunc) kernel.IntoFunc {
	return func(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
		if err := need(op, in, 1); err != nil {
			return err
		}
		o, err := outOf(op, out)
		if err != nil {
			return err
		}
		x, ok1 := in[0].Data.([]float32)
		d, ok2 := o.Data.([]float32)
		if !ok1 || !ok2 || len(d) != len(x) {
			return viaRun(run, c, n, in, out)
		}
		fns, err := mk(n)
		if err != nil {
			return fmt.Errorf("elementwise: %s: %w", op, err)
		}
		apply32Par(c.Workers(), c.Vec(), fns, d, x, 4)
		return nil
	}
}

// float32Into wraps a float32 loop with attributes read from the node (for
// the operators whose element functions would capture them).
func float32Into(op string, run kernel.RunFunc, loop func(n *ir.Node, d, x []float32)) kernel.IntoFunc {
	return func(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
		if err := need(op, in, 1); err != nil {
			return err
		}
		o, err := outOf(op, out)
		if err != nil {
			return err
		}
		x, ok1 := in[0].Data.([]float32)
		d, ok2 := o.Data.([]float32)
		if !ok1 || !ok2 || len(d) != len(x) {
			return viaRun(run, c, n, in, out)
		}
		loop(n, d, x)
		return nil
	}
}

func reluLoop(_ *ir.Node, d, x []float32) {
	d = d[:len(x)]
	for i, v := range x {
		if v < 0 {
			v = 0
		}
		d[i] = v
	}
}

func leakyReluLoop(n *ir.Node, d, x []float32) {
	a := n.Float("alpha", 0.01)
	d = d[:len(x)]
	for i, v := range x {
		if v < 0 {
			v = a * v
		}
		d[i] = v
	}
}

func hardSigmoidLoop(n *ir.Node, d, x []float32) {
	a, b := n.Float("alpha", 0.2), n.Float("beta", 0.5)
	d = d[:len(x)]
	for i, v := range x {
		d[i] = max(0, min(1, float32(a*v)+b))
	}
}

// clipInto is Clip's Into for float32: one pass, the lower bound then the
// upper one per element, which is Run's two passes element by element.
func clipInto(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if err := need("Clip", in, 1); err != nil {
		return err
	}
	o, err := outOf("Clip", out)
	if err != nil {
		return err
	}
	x, ok1 := in[0].Data.([]float32)
	d, ok2 := o.Data.([]float32)
	if !ok1 || !ok2 || len(d) != len(x) {
		return viaRun(runClip, c, n, in, out)
	}
	var lo, hi float32
	hasLo, hasHi := false, false
	if n.Version > 0 && n.Version < 11 {
		lo, hi = n.Float("min", float32(math.Inf(-1))), n.Float("max", float32(math.Inf(1)))
		hasLo, hasHi = true, true
	} else {
		for i, p := range [2]*float32{&lo, &hi} {
			b := kernel.Input(in, i+1)
			if b == nil {
				continue
			}
			v, ok := b.Data.([]float32)
			if !ok || len(v) != 1 {
				return viaRun(runClip, c, n, in, out) // Run reports the error
			}
			*p = v[0]
			if i == 0 {
				hasLo = true
			} else {
				hasHi = true
			}
		}
	}
	d = d[:len(x)]
	for i, v := range x {
		if hasLo && v < lo {
			v = lo
		}
		if hasHi && v > hi {
			v = hi
		}
		d[i] = v
	}
	return nil
}

// whereInto is Where's Into for float32, float64, int32 and int64 values.
func whereInto(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if err := need("Where", in, 3); err != nil {
		return err
	}
	o, err := outOf("Where", out)
	if err != nil {
		return err
	}
	cond, ok := in[0].Data.([]bool)
	var p bplan
	if !ok || in[1].DType != in[2].DType || in[1].DType != o.DType ||
		!p.init(o.Shape, 3, &[3][]int{in[0].Shape, in[1].Shape, in[2].Shape}) ||
		!broadcastsTo(o.Shape, in[0].Shape, in[1].Shape, in[2].Shape) || tensor.NumElems(o.Shape) != p.n {
		return viaRun(runWhere, c, n, in, out)
	}
	switch x := in[1].Data.(type) {
	case []float32:
		whereRows(&p, o.Data.([]float32), cond, x, in[2].Data.([]float32))
	case []float64:
		whereRows(&p, o.Data.([]float64), cond, x, in[2].Data.([]float64))
	case []int32:
		whereRows(&p, o.Data.([]int32), cond, x, in[2].Data.([]int32))
	case []int64:
		whereRows(&p, o.Data.([]int64), cond, x, in[2].Data.([]int64))
	case []bool:
		whereRows(&p, o.Data.([]bool), cond, x, in[2].Data.([]bool))
	default:
		return viaRun(runWhere, c, n, in, out)
	}
	return nil
}

func whereRows[T any](p *bplan, d []T, c []bool, x, y []T) {
	if p.n == 0 || p.inner == 0 {
		return
	}
	sc, sx, sy := p.in[0], p.in[1], p.in[2]
	var idx [maxRank]int
	var off [3]int
	for o := 0; o < p.n; o += p.inner {
		row := d[o : o+p.inner]
		cr, xr, yr := c[off[0]:], x[off[1]:], y[off[2]:]
		for i := range row {
			if cr[i*sc] {
				row[i] = xr[i*sx]
			} else {
				row[i] = yr[i*sy]
			}
		}
		for k := p.nd - 1; k >= 0; k-- {
			idx[k]++
			for j := range off {
				off[j] += p.st[k][j]
			}
			if idx[k] < p.dims[k] {
				break
			}
			for j := range off {
				off[j] -= p.st[k][j] * p.dims[k]
			}
			idx[k] = 0
		}
	}
}

// staticUnary lists the unary operators whose float functions capture no
// attribute, so unaryInto runs them without allocating.
var staticUnary = map[string]bool{
	"Abs": true, "Neg": true, "Sign": true, "Ceil": true, "Floor": true, "Round": true,
	"Sqrt": true, "Reciprocal": true, "Exp": true, "Log": true, "Tanh": true, "Sigmoid": true,
	"Erf": true, "Sin": true, "Cos": true, "Tan": true, "Asin": true, "Acos": true, "Atan": true,
	"Sinh": true, "Cosh": true, "Asinh": true, "Acosh": true, "Atanh": true,
	"Softsign": true, "Softplus": true, "Mish": true, "HardSwish": true, "Gelu": true,
}

// addInto gives the table's hot operators their Into forms.
func addInto(t kernel.Table) {
	for _, op := range []string{"Add", "Sub", "Mul", "Div"} {
		t[op].Into, t[op].InPlace = arithInto(op), true
	}
	set := func(op string, f kernel.IntoFunc) { t[op].Into, t[op].InPlace = f, true }
	set("Pow", powInto)
	set("Clip", clipInto)
	set("Where", whereInto)
	set("Relu", float32Into("Relu", t["Relu"].Run, reluLoop))
	set("LeakyRelu", float32Into("LeakyRelu", t["LeakyRelu"].Run, leakyReluLoop))
	set("HardSigmoid", hardSigmoidInto(t["HardSigmoid"].Run))
}
