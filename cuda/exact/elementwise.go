package exact

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/kernel/vmath"
)

// Arith is a binary arithmetic operation (elementwise.cu's AR_ codes):
// one rounded float32 operation, the first operand first, as
// kernel/elementwise's Add, Sub, Mul and Div.
type Arith int32

// The arithmetic operations.
const (
	ArithAdd Arith = iota
	ArithSub
	ArithMul
	ArithDiv
)

var arithNames = [...]string{"Add", "Sub", "Mul", "Div"}

func (a Arith) String() string {
	if a >= 0 && int(a) < len(arithNames) {
		return arithNames[a]
	}
	return fmt.Sprintf("Arith(%d)", int32(a))
}

// ArithOf returns the operation of an ONNX op type.
func ArithOf(op string) (Arith, bool) {
	for i, n := range arithNames {
		if n == op {
			return Arith(i), true
		}
	}
	return 0, false
}

// Arith sets y[i] = a[i] op b[i] for n floats (y may be a or b).
func (e *Engine) Arith(s *cuda.Stream, op Arith, a, b, y uint64, n int64) error {
	if op < 0 || int(op) >= len(arithNames) {
		return fmt.Errorf("exact: unknown arithmetic operation %d", int32(op))
	}
	if n == 0 {
		return nil
	}
	args := new(cuda.Args).I32(int32(op)).Ptr(a).Ptr(b).Ptr(y).I64(n)
	return e.fn[kernels.Arith].Launch(s, cuda.D3(e.grid(n, 256), 1, 1), cuda.D3(256, 1, 1), 0, args)
}

// ArithBroadcast sets y (c.N() floats) to a op b broadcast as c says
// (Broadcast of a's an and b's bn floats), as AddBroadcast does for Add.
func (e *Engine) ArithBroadcast(s *cuda.Stream, op Arith, c Copy, a uint64, an int, b uint64, bn int, y uint64) error {
	if op < 0 || int(op) >= len(arithNames) {
		return fmt.Errorf("exact: unknown arithmetic operation %d", int32(op))
	}
	if err := c.check(an, bn); err != nil {
		return err
	}
	n := c.N()
	if n == 0 {
		return nil
	}
	args := new(cuda.Args).Struct(c.geom()...).I32(int32(op)).Ptr(a).Ptr(b).Ptr(y).I64(int64(n))
	return e.fn[kernels.ArithBcast].Launch(s, cuda.D3(e.grid(int64(n), 256), 1, 1), cuda.D3(256, 1, 1), 0, args)
}

// CastFrom is the element type Cast converts to float32 (elementwise.cu's
// CAST_ codes).
type CastFrom int32

// The source types of Cast.
const (
	FromFloat32 CastFrom = iota // bits unchanged
	FromInt64                   // rounded to nearest, ties to even
	FromInt32
	FromBool // one byte each: 0 -> 0, else 1
)

// CastBytes is the size of one element of from.
func CastBytes(from CastFrom) int {
	switch from {
	case FromInt64:
		return 8
	case FromBool:
		return 1
	}
	return 4
}

// Cast sets y[i] to kernel/elementwise's Cast of element i of x (n
// elements of from) to float32.
func (e *Engine) Cast(s *cuda.Stream, from CastFrom, x, y uint64, n int64) error {
	if from < FromFloat32 || from > FromBool {
		return fmt.Errorf("exact: Cast from unknown type %d", int32(from))
	}
	if n == 0 {
		return nil
	}
	args := new(cuda.Args).I32(int32(from)).Ptr(x).Ptr(y).I64(n)
	return e.fn[kernels.Cast].Launch(s, cuda.D3(e.grid(n, 256), 1, 1), cuda.D3(256, 1, 1), 0, args)
}

// ActOp is one of vx_act's activations (elementwise.cu's ACT_ codes), each
// its CPU twin's float32 expression; P0 and P1 are its parameters.
type ActOp int32

// The activations of vx_act.
const (
	EwLeakyRelu        ActOp = iota // x < 0 ? P0*x : x
	EwHardSigmoid                   // max(0, min(1, float32(P0*x)+P1))
	EwHardSwish                     // x * max(0, min(1, float32(x*(1/6))+0.5))
	EwSiLU                          // x * Sigmoid32(x)
	EwSiLUSigmoidFirst              // Sigmoid32(x) * x
	EwHardSigmoidMul                // x * HardSigmoid(x; P0, P1)
	EwHardSigmoidMulSF              // HardSigmoid(x; P0, P1) * x
	EwNeg                           // the sign bit flipped
	EwAbs                           // the sign bit cleared
	EwSqrt                          // correctly rounded
	EwReciprocal                    // 1 / x
	EwElu                           // x < 0 ? P0*(Exp32(x)-1) : x
	EwSoftplus                      // elementwise's softplus32
	EwSoftsign                      // x / (1 + |x|)
	EwMish                          // x * Tanh32(softplus32(x))
	EwSelu                          // x <= 0 ? P1*(float32(P0*Exp32(x))-P0) : P1*x
	EwCelu                          // x < 0 ? P0*(Exp32(x/P0)-1) : x
	EwThresholdedRelu               // x > P0 ? x : 0
	EwSign                          // ±1, or x for ±0 and NaN
	EwFloor
	EwCeil
	EwRound   // to nearest, ties to even
	EwReluMax // v < 0 ? 0 : v (Relu's comparison)
)

var actNames = [...]string{"LeakyRelu", "HardSigmoid", "HardSwish", "SiLU", "SiLU(sigmoid first)", "HardSigmoidMul", "HardSigmoidMul(gate first)",
	"Neg", "Abs", "Sqrt", "Reciprocal", "Elu", "Softplus", "Softsign", "Mish", "Selu", "Celu", "ThresholdedRelu", "Sign", "Floor", "Ceil", "Round", "Relu"}

func (a ActOp) String() string {
	if a >= 0 && int(a) < len(actNames) {
		return actNames[a]
	}
	return fmt.Sprintf("ActOp(%d)", int32(a))
}

// Activation sets y[i] = op(x[i]; p0, p1) for n floats (y may be x).
func (e *Engine) Activation(s *cuda.Stream, op ActOp, x, y uint64, n int64, p0, p1 float32) error {
	if op < 0 || int(op) >= len(actNames) {
		return fmt.Errorf("exact: unknown activation %d", int32(op))
	}
	if n == 0 {
		return nil
	}
	args := new(cuda.Args).I32(int32(op)).Ptr(x).Ptr(y).I64(n).F32(p0).F32(p1)
	return e.fn[kernels.Act].Launch(s, cuda.D3(e.grid(n, 256), 1, 1), cuda.D3(256, 1, 1), 0, args)
}

// ScaleShift is kernel/nn's ScaleShift layer: y = float32(x*a[c]) + b[c]
// over planes of S floats (c = plane % C), then, with relu, y < 0 -> 0.
// y may be x.
func (e *Engine) ScaleShift(s *cuda.Stream, x, a, b, y uint64, planes int64, S, C int, relu bool) error {
	if S < 0 || C < 1 || planes < 0 {
		return fmt.Errorf("exact: ScaleShift of %d planes of %d over %d channels", planes, S, C)
	}
	n := planes * int64(S)
	if n == 0 {
		return nil
	}
	r := int32(0)
	if relu {
		r = 1
	}
	args := new(cuda.Args).Ptr(x).Ptr(a).Ptr(b).Ptr(y).I64(planes).I32(int32(S)).I32(int32(C)).I32(r)
	return e.fn[kernels.ScaleShift].Launch(s, cuda.D3(e.grid(n, 256), 1, 1), cuda.D3(256, 1, 1), 0, args)
}

// ResizeRank is the rank of the tensors vx_resize interpolates.
const ResizeRank = 4

// Taps is one axis' interpolation stencils (kernel/image.Stencil): output
// index o reads input indices Idx[Off[o]:Off[o+1]] with weights W.
type Taps struct {
	Off, Idx []int
	W        []float32
}

// ResizeGeom is elementwise.cu's resize_geom: the shapes and, per axis,
// the positions in the stencil table of its offsets, indices and weights.
type ResizeGeom struct {
	In, Out     [ResizeRank]int
	Off, Idx, W [ResizeRank]int
	Canon       bool
	TableLen    int
}

// maxResizeTable bounds a stencil table (int32s).
const maxResizeTable = 1 << 28

// ResizeTable packs a rank-4 Resize's stencils into one int32 table (per
// axis its Out+1 offsets, its indices, its weights' bits) and its
// geometry. canon: the NaNs of the result are made canonical (the CPU's
// separable path). Every offset and index is checked.
func ResizeTable(in, out []int, taps []Taps, canon bool) (ResizeGeom, []int32, error) {
	var g ResizeGeom
	if len(in) != ResizeRank || len(out) != ResizeRank || len(taps) != ResizeRank {
		return g, nil, fmt.Errorf("exact: Resize of rank %d to rank %d with %d stencils (the GPU takes rank %d)", len(in), len(out), len(taps), ResizeRank)
	}
	inN, outN := int64(1), int64(1)
	total := 0
	for d := range ResizeRank {
		if in[d] < 1 || out[d] < 1 || in[d] > math.MaxInt32 || out[d] > math.MaxInt32 {
			return g, nil, fmt.Errorf("exact: Resize of %v to %v", in, out)
		}
		inN *= int64(in[d])
		outN *= int64(out[d])
		t := taps[d]
		if len(t.Off) != out[d]+1 || len(t.Idx) != len(t.W) || t.Off[0] != 0 || t.Off[out[d]] != len(t.Idx) {
			return g, nil, fmt.Errorf("exact: Resize axis %d: %d offsets, %d indices, %d weights for %d outputs", d, len(t.Off), len(t.Idx), len(t.W), out[d])
		}
		for o := range out[d] {
			if t.Off[o+1] < t.Off[o] {
				return g, nil, fmt.Errorf("exact: Resize axis %d: offsets decrease at %d", d, o)
			}
		}
		for _, i := range t.Idx {
			if i < 0 || i >= in[d] {
				return g, nil, fmt.Errorf("exact: Resize axis %d: index %d outside %d", d, i, in[d])
			}
		}
		total += len(t.Off) + 2*len(t.Idx)
		if total > maxResizeTable {
			return g, nil, fmt.Errorf("exact: Resize stencils of more than %d entries", maxResizeTable)
		}
	}
	if inN >= 1<<40 || outN >= 1<<40 {
		return g, nil, fmt.Errorf("exact: Resize of %v to %v too large", in, out)
	}
	tab := make([]int32, 0, total)
	for d := range ResizeRank {
		t := taps[d]
		g.In[d], g.Out[d] = in[d], out[d]
		g.Off[d] = len(tab)
		for _, v := range t.Off {
			tab = append(tab, int32(v))
		}
		g.Idx[d] = len(tab)
		for _, v := range t.Idx {
			tab = append(tab, int32(v))
		}
		g.W[d] = len(tab)
		for _, v := range t.W {
			tab = append(tab, int32(math.Float32bits(v)))
		}
	}
	g.Canon, g.TableLen = canon, len(tab)
	return g, tab, nil
}

// OutLen is the number of output floats.
func (g ResizeGeom) OutLen() int { return g.Out[0] * g.Out[1] * g.Out[2] * g.Out[3] }

// InLen is the number of input floats.
func (g ResizeGeom) InLen() int { return g.In[0] * g.In[1] * g.In[2] * g.In[3] }

func (g ResizeGeom) fields() []int32 {
	f := make([]int32, 0, 5*ResizeRank+1)
	for _, a := range [][ResizeRank]int{g.In, g.Out, g.Off, g.Idx, g.W} {
		for _, v := range a {
			f = append(f, int32(v))
		}
	}
	c := int32(0)
	if g.Canon {
		c = 1
	}
	return append(f, c)
}

// HostResize runs vx_resize's arithmetic on the host over the packed
// table (the CPU-side tests' check of the packing and the kernel's loop
// order against kernel/image).
func HostResize(g ResizeGeom, tab []int32, x, y []float32) error {
	if len(x) != g.InLen() || len(y) != g.OutLen() || len(tab) != g.TableLen {
		return fmt.Errorf("exact: HostResize of %d into %d floats with %d table entries", len(x), len(y), len(tab))
	}
	w := func(i int32) float32 { return math.Float32frombits(uint32(i)) }
	s2 := g.In[3]
	s1 := s2 * g.In[2]
	s0 := s1 * g.In[1]
	i := 0
	for o0 := range g.Out[0] {
		for o1 := range g.Out[1] {
			for o2 := range g.Out[2] {
				for o3 := range g.Out[3] {
					var acc0 float32
					for j0 := tab[g.Off[0]+o0]; j0 < tab[g.Off[0]+o0+1]; j0++ {
						x0 := int(tab[g.Idx[0]+int(j0)]) * s0
						var acc1 float32
						for j1 := tab[g.Off[1]+o1]; j1 < tab[g.Off[1]+o1+1]; j1++ {
							x1 := x0 + int(tab[g.Idx[1]+int(j1)])*s1
							var acc2 float32
							for j2 := tab[g.Off[2]+o2]; j2 < tab[g.Off[2]+o2+1]; j2++ {
								x2 := x1 + int(tab[g.Idx[2]+int(j2)])*s2
								var acc3 float32
								for j3 := tab[g.Off[3]+o3]; j3 < tab[g.Off[3]+o3+1]; j3++ {
									acc3 = vmath.FMA32(w(tab[g.W[3]+int(j3)]), x[x2+int(tab[g.Idx[3]+int(j3)])], acc3)
								}
								acc2 = vmath.FMA32(w(tab[g.W[2]+int(j2)]), acc3, acc2)
							}
							acc1 = vmath.FMA32(w(tab[g.W[1]+int(j1)]), acc2, acc1)
						}
						acc0 = vmath.FMA32(w(tab[g.W[0]+int(j0)]), acc1, acc0)
					}
					if g.Canon && acc0 != acc0 {
						acc0 = math.Float32frombits(0x7fc00000)
					}
					y[i] = acc0
					i++
				}
			}
		}
	}
	return nil
}

// Resize runs vx_resize: y (g.OutLen() floats) from x (g.InLen()) with
// the stencil table tab (g.TableLen int32s on the device).
func (e *Engine) Resize(s *cuda.Stream, g ResizeGeom, tab, x, y uint64) error {
	n := int64(g.OutLen())
	if n == 0 {
		return nil
	}
	args := new(cuda.Args).Struct(g.fields()...).Ptr(tab).Ptr(x).Ptr(y)
	return e.fn[kernels.Resize].Launch(s, cuda.D3(e.grid(n, 256), 1, 1), cuda.D3(256, 1, 1), 0, args)
}
