package exact

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/kernel/rnn"
	"github.com/vouchml/vouch/kernel/vmath"
)

// The recurrent operators (RNN, GRU, LSTM) run kernel/rnn's float32 chains
// (see that package's doc): every gate pre-activation is one chain from
// the bias sum Wb[j]+Rb[j] (+0 without B; Wbh alone for GRU's h~ block
// with linear_before_reset) over x[k]·W[j,k], k ascending, then on over
// h[k]·R[j,k], k ascending. On the GPU:
//
//   - vx_rnn_start writes the chain starts and the initial states;
//   - R is transposed to Rᵀ [dirs][hidden][gates·hidden] (Copy), so a
//     step's threads read consecutive gate rows;
//   - vx_rnn_proj computes the input chains of every (time, row) pair at
//     once, in 64x64 tiles (the chain starts from its bias, k ascending);
//   - one vx_rnn_step launch per step: a thread per (direction, batch row,
//     hidden unit, gate chain) continues the chain over h, k ascending;
//     the unit's first thread then does the cell's element operations in
//     kernel/rnn's order (peepholes, clip, activations, the cell and state
//     updates); GRU without
//     linear_before_reset takes a second launch (vx_rnn_gru_hh) for the h~
//     chain over r⊙h, which needs every unit's r;
//   - vx_rnn_final writes Y_h and Y_c.
//
// A row past its sequence length carries its state; its Y steps are zeros.

// The cell kinds (rnn.cu's kind field).
const (
	CellRNN  = 0
	CellGRU  = 1
	CellLSTM = 2
)

// RNNActOp is a recurrent activation function (rnn.cu's RA_ codes).
type RNNActOp int32

// The activations of ONNX's recurrent operators, computed as kernel/rnn
// does in float32.
const (
	ActSigmoid RNNActOp = iota
	ActTanh
	ActRelu
	ActAffine
	ActLeakyRelu
	ActThresholdedRelu
	ActScaledTanh
	ActHardSigmoid
	ActElu
	ActSoftsign
	ActSoftplus
)

var rnnActNames = map[string]RNNActOp{"sigmoid": ActSigmoid, "tanh": ActTanh, "relu": ActRelu, "affine": ActAffine,
	"leakyrelu": ActLeakyRelu, "thresholdedrelu": ActThresholdedRelu, "scaledtanh": ActScaledTanh,
	"hardsigmoid": ActHardSigmoid, "elu": ActElu, "softsign": ActSoftsign, "softplus": ActSoftplus}

// RNNActByName returns the activation of a lower-case ONNX name.
func RNNActByName(name string) (RNNActOp, bool) {
	op, ok := rnnActNames[name]
	return op, ok
}

// RNNAct is one activation with its alpha and beta.
type RNNAct struct {
	Op          RNNActOp
	Alpha, Beta float32
}

// RNNGeom is a recurrent node: kernel/rnn.Geometry with its activations
// resolved.
type RNNGeom struct {
	Kind                      int // CellRNN, CellGRU, CellLSTM
	Dirs                      int // 1 or 2
	Reverse                   bool
	Seq, Batch, Input, Hidden int
	Layout                    int     // 0: X [seq, batch, input]; 1: [batch, seq, input]
	Clip                      float32 // 0: none
	LinearBeforeReset         bool    // GRU
	Coupled                   bool    // LSTM input_forget
	Acts                      []RNNAct
}

// RNNGeomOf converts kernel/rnn's geometry of a node; an activation the
// kernels do not have is an error.
func RNNGeomOf(r rnn.Geometry) (RNNGeom, error) {
	g := RNNGeom{Dirs: r.Dirs, Reverse: r.Reverse, Seq: r.Seq, Batch: r.Batch, Input: r.Input, Hidden: r.Hidden,
		Layout: r.Layout, Clip: r.Clip, LinearBeforeReset: r.LinearBeforeReset, Coupled: r.Coupled}
	switch r.Kind {
	case "RNN":
		g.Kind = CellRNN
	case "GRU":
		g.Kind = CellGRU
	case "LSTM":
		g.Kind = CellLSTM
	default:
		return g, fmt.Errorf("exact: %s is not a recurrent operator", r.Kind)
	}
	for _, a := range r.Acts {
		op, ok := RNNActByName(a.Name)
		if !ok {
			return g, fmt.Errorf("exact: recurrent activation %q has no GPU kernel", a.Name)
		}
		g.Acts = append(g.Acts, RNNAct{Op: op, Alpha: a.Alpha, Beta: a.Beta})
	}
	return g, g.Check()
}

// Gates is the number of gate blocks in W and R (1, 3, 4).
func (g RNNGeom) Gates() int { return [...]int{1, 3, 4}[g.Kind] }

// PerDir is the number of activations per direction (1, 2, 3).
func (g RNNGeom) PerDir() int { return [...]int{1, 2, 3}[g.Kind] }

// maxRNN bounds every buffer of a recurrent node (floats).
const maxRNN = 1 << 36

// Check bounds g to what the kernels take.
func (g RNNGeom) Check() error {
	if g.Kind < CellRNN || g.Kind > CellLSTM {
		return fmt.Errorf("exact: RNN kind %d", g.Kind)
	}
	if g.Dirs != 1 && g.Dirs != 2 || g.Layout != 0 && g.Layout != 1 {
		return fmt.Errorf("exact: RNN of %d directions, layout %d", g.Dirs, g.Layout)
	}
	if g.Hidden < 1 || g.Seq < 0 || g.Batch < 0 || g.Input < 0 {
		return fmt.Errorf("exact: RNN seq %d, batch %d, input %d, hidden %d", g.Seq, g.Batch, g.Input, g.Hidden)
	}
	if g.Hidden > 1<<24 || g.Input > 1<<28 || g.Seq > 1<<24 || g.Batch > 65535 {
		return fmt.Errorf("exact: RNN seq %d, batch %d, input %d, hidden %d too large", g.Seq, g.Batch, g.Input, g.Hidden)
	}
	if len(g.Acts) != g.Dirs*g.PerDir() {
		return fmt.Errorf("exact: RNN of %d activations, want %d", len(g.Acts), g.Dirs*g.PerDir())
	}
	for _, a := range g.Acts {
		if a.Op < ActSigmoid || a.Op > ActSoftplus {
			return fmt.Errorf("exact: RNN activation %d", a.Op)
		}
	}
	if g.Clip < 0 || g.Clip != g.Clip {
		return fmt.Errorf("exact: RNN clip %g", g.Clip)
	}
	G, rows := int64(g.Gates()*g.Hidden), int64(g.Seq)*int64(g.Batch)
	if (rows+63)/64 > 65535 {
		return fmt.Errorf("exact: RNN of %d (step, row) pairs (at most %d)", rows, 65535*64)
	}
	for _, n := range []int64{rows * G * int64(g.Dirs), G * int64(g.Input) * int64(g.Dirs), G * int64(g.Hidden) * int64(g.Dirs), rows * int64(g.Input)} {
		if n > maxRNN {
			return fmt.Errorf("exact: RNN seq %d, batch %d, input %d, hidden %d too large", g.Seq, g.Batch, g.Input, g.Hidden)
		}
	}
	return nil
}

// rnnWork is the layout of a node's scratch: offsets in floats.
type rnnWork struct {
	pre  int // [dirs][seq·batch][G]: the input chains, by X's row
	rt   int // [dirs][hidden][G]: Rᵀ
	init int // [dirs][G]: the chains' starts
	rbh  int // [dirs][hidden]: GRU linear_before_reset's Rbh
	hs   int // [2][dirs][batch][hidden]: the state, double-buffered
	cs   int // [dirs][batch][hidden]: LSTM's cell state
	zb   int // [dirs][batch][hidden]: GRU's z (two-launch steps)
	rh   int // [dirs][batch][hidden]: GRU's r⊙h
	n    int
}

func (g RNNGeom) work() rnnWork {
	G, H, D := g.Gates()*g.Hidden, g.Hidden, g.Dirs
	st := D * g.Batch * H
	var w rnnWork
	w.rt = D * g.Seq * g.Batch * G
	w.init = w.rt + D*H*G
	w.rbh = w.init + D*G
	w.hs = w.rbh + D*H
	w.cs = w.hs + 2*st
	w.zb = w.cs + st
	w.rh = w.zb + st
	w.n = w.rh + st
	return w
}

// WorkLen is the scratch a run of g needs (floats).
func (g RNNGeom) WorkLen() int { return g.work().n }

// YLen and StateLen are the sizes of Y and of Y_h (and Y_c).
func (g RNNGeom) YLen() int     { return g.Seq * g.Dirs * g.Batch * g.Hidden }
func (g RNNGeom) StateLen() int { return g.Dirs * g.Batch * g.Hidden }

// xrow, yoff and stoff are the kernels' index arithmetic (rnn.cu's
// rnn_xrow, rnn_yoff, rnn_stoff): X's row of step t, batch row b; Y's
// offset of step t, direction d, row b; a state's of direction d, row b.
func (g RNNGeom) xrow(t, b int) int {
	if g.Layout == 1 {
		return b*g.Seq + t
	}
	return t*g.Batch + b
}

func (g RNNGeom) yoff(t, d, b int) int {
	if g.Layout == 1 {
		return ((b*g.Seq+t)*g.Dirs + d) * g.Hidden
	}
	return ((t*g.Dirs+d)*g.Batch + b) * g.Hidden
}

func (g RNNGeom) stoff(d, b int) int {
	if g.Layout == 1 {
		return (b*g.Dirs + d) * g.Hidden
	}
	return (d*g.Batch + b) * g.Hidden
}

// rtCopy is the transpose of R [dirs][G][hidden] into Rᵀ [dirs][hidden][G].
func (g RNNGeom) rtCopy() Copy {
	G, H := g.Gates()*g.Hidden, g.Hidden
	return Copy{Dims: []int{g.Dirs, H, G}, XS: []int{G * H, 1, H}, YS: []int{H * G, G, 1}}
}

func b2i(v bool) int32 {
	if v {
		return 1
	}
	return 0
}

// fields is rnn.cu's rnn_geom.
func (g RNNGeom) fields() []int32 {
	f := []int32{int32(g.Kind), int32(g.Dirs), b2i(g.Reverse), int32(g.Seq), int32(g.Batch), int32(g.Input), int32(g.Hidden),
		int32(g.Layout), b2i(g.LinearBeforeReset), b2i(g.Coupled), int32(math.Float32bits(g.Clip))}
	var act, al, be [6]int32
	for i, a := range g.Acts {
		act[i], al[i], be[i] = int32(a.Op), int32(math.Float32bits(a.Alpha)), int32(math.Float32bits(a.Beta))
	}
	f = append(f, act[:]...)
	f = append(f, al[:]...)
	return append(f, be[:]...)
}

// RNNBuffers are a node's device operands: X, W, R (required), B, H0,
// C0, P (0: absent), Lens (int32 [batch]; 0: every row runs Seq steps),
// the outputs Y, YH, YC (0: not wanted) and Work (WorkLen floats).
type RNNBuffers struct {
	X, W, R, B, H0, C0, P, Lens uint64
	Y, YH, YC                   uint64
	Work                        uint64
}

// stepChains is the chains per hidden unit vx_rnn_step computes, one
// thread each (its block's threadIdx.y): RNN 1, GRU 3 (z, r, h~'s
// recurrent chain with linear_before_reset; 2 without: vx_rnn_gru_hh
// runs h~), LSTM 4.
func (g RNNGeom) stepChains() int {
	switch {
	case g.Kind == CellLSTM:
		return 4
	case g.Kind == CellGRU && g.LinearBeforeReset:
		return 3
	case g.Kind == CellGRU:
		return 2
	}
	return 1
}

// rnnBlock is the threads of vx_rnn_gru_hh's block (hidden units).
const rnnBlock = 128

// RNN runs a recurrent node: steps is the longest row's length (Seq
// without Lens).
func (e *Engine) RNN(s *cuda.Stream, g RNNGeom, b RNNBuffers, steps int) error {
	if err := g.Check(); err != nil {
		return err
	}
	if steps < 0 || steps > g.Seq || b.Lens == 0 && steps != g.Seq {
		return fmt.Errorf("exact: RNN of %d steps over a sequence of %d", steps, g.Seq)
	}
	if b.W == 0 || b.R == 0 || b.Work == 0 || b.X == 0 && g.Seq*g.Batch*g.Input > 0 {
		return fmt.Errorf("exact: RNN without X, W, R or its scratch")
	}
	if g.Batch == 0 {
		return nil
	}
	w := g.work()
	at := func(o int) uint64 { return b.Work + 4*uint64(o) }
	G, H, D := g.Gates()*g.Hidden, g.Hidden, g.Dirs
	geom := g.fields()
	cs := uint64(0)
	if g.Kind == CellLSTM {
		cs = at(w.cs)
	}
	n := int64(D*G + D*H + D*g.Batch*H)
	a := new(cuda.Args).Struct(geom...).Ptr(b.B).Ptr(b.H0).Ptr(b.C0).Ptr(at(w.init)).Ptr(at(w.rbh)).Ptr(at(w.hs)).Ptr(cs)
	if err := e.fn[kernels.RNNStart].Launch(s, cuda.D3(e.grid(n, 256), 1, 1), cuda.D3(256, 1, 1), 0, a); err != nil {
		return err
	}
	if err := e.Copy(s, g.rtCopy(), b.R, D*G*H, at(w.rt), D*H*G); err != nil {
		return err
	}
	if rows := g.Seq * g.Batch; rows > 0 {
		a := new(cuda.Args).I32(int32(rows)).I32(int32(G)).I32(int32(g.Input)).Ptr(b.X).Ptr(b.W).Ptr(at(w.init)).Ptr(at(w.pre))
		grid := cuda.D3(uint32((G+63)/64), uint32((rows+63)/64), uint32(D))
		if err := e.fn[kernels.RNNProj].Launch(s, grid, cuda.D3(256, 1, 1), 0, a); err != nil {
			return err
		}
	}
	if b.Lens != 0 && b.Y != 0 && g.YLen() > 0 {
		// The steps past a row's length are zeros.
		if err := e.C.Fill32(s, b.Y, 0, uint64(g.YLen())); err != nil {
			return err
		}
	}
	st := D * g.Batch * H
	stepGrid := cuda.D3(uint32((H+31)/32), uint32(g.Batch), uint32(D))
	stepBlock := cuda.D3(32, uint32(g.stepChains()), 1)
	hhGrid := cuda.D3(uint32((H+rnnBlock-1)/rnnBlock), uint32(g.Batch), uint32(D))
	for t := 0; t < steps; t++ {
		hin, hout := at(w.hs+(t%2)*st), at(w.hs+((t+1)%2)*st)
		a := new(cuda.Args).Struct(geom...).I32(int32(t)).Ptr(b.Lens).Ptr(at(w.pre)).Ptr(at(w.rt)).Ptr(at(w.rbh)).Ptr(b.P).
			Ptr(hin).Ptr(hout).Ptr(cs).Ptr(at(w.zb)).Ptr(at(w.rh)).Ptr(b.Y)
		if err := e.fn[kernels.RNNStep].Launch(s, stepGrid, stepBlock, 0, a); err != nil {
			return err
		}
		if g.Kind == CellGRU && !g.LinearBeforeReset {
			a := new(cuda.Args).Struct(geom...).I32(int32(t)).Ptr(b.Lens).Ptr(at(w.pre)).Ptr(at(w.rt)).
				Ptr(hin).Ptr(hout).Ptr(at(w.zb)).Ptr(at(w.rh)).Ptr(b.Y)
			if err := e.fn[kernels.RNNGRUHidden].Launch(s, hhGrid, cuda.D3(rnnBlock, 1, 1), 0, a); err != nil {
				return err
			}
		}
	}
	if b.YH == 0 && b.YC == 0 {
		return nil
	}
	a = new(cuda.Args).Struct(geom...).Ptr(at(w.hs + (steps%2)*st)).Ptr(cs).Ptr(b.YH).Ptr(b.YC)
	return e.fn[kernels.RNNFinal].Launch(s, cuda.D3(e.grid(int64(st), 256), 1, 1), cuda.D3(256, 1, 1), 0, a)
}

// RNNHostInputs are a node's operands on the host (nil: absent).
type RNNHostInputs struct {
	X, W, R, B, H0, C0, P []float32
	Lens                  []int // nil: every row runs Seq steps
}

// Host runs the kernels' arithmetic on the host, launch by launch and
// thread by thread in the kernels' order (vmath's functions in place of
// exact.cu's, which the GPU suite checks bit for bit): the CPU-side
// model of what RNN computes. It returns Y, Y_h and Y_c (nil for RNN and
// GRU).
func (g RNNGeom) Host(in RNNHostInputs) (y, yh, yc []float32, err error) {
	if err := g.Check(); err != nil {
		return nil, nil, nil, err
	}
	G, H, D, I := g.Gates()*g.Hidden, g.Hidden, g.Dirs, g.Input
	rows := g.Seq * g.Batch
	for _, c := range []struct {
		name string
		v    []float32
		n    int
		opt  bool
	}{{"X", in.X, rows * I, false}, {"W", in.W, D * G * I, false}, {"R", in.R, D * G * H, false}, {"B", in.B, D * 2 * G, true},
		{"initial_h", in.H0, g.StateLen(), true}, {"initial_c", in.C0, g.StateLen(), true}, {"P", in.P, D * 3 * H, true}} {
		if (c.v != nil || !c.opt) && len(c.v) != c.n {
			return nil, nil, nil, fmt.Errorf("exact: RNN %s of %d floats, want %d", c.name, len(c.v), c.n)
		}
	}
	steps := g.Seq
	if in.Lens != nil {
		if len(in.Lens) != g.Batch {
			return nil, nil, nil, fmt.Errorf("exact: RNN of %d lengths for %d rows", len(in.Lens), g.Batch)
		}
		steps = 0
		for _, L := range in.Lens {
			if L < 0 || L > g.Seq {
				return nil, nil, nil, fmt.Errorf("exact: RNN length %d out of [0, %d]", L, g.Seq)
			}
			steps = max(steps, L)
		}
	}
	w := g.work()
	work := make([]float32, w.n)
	y = make([]float32, g.YLen())
	yh, yc = make([]float32, g.StateLen()), make([]float32, g.StateLen())
	// vx_rnn_start.
	for d := 0; d < D; d++ {
		for row := 0; row < G; row++ {
			v := float32(0)
			if in.B != nil {
				wb, rb := in.B[d*2*G+row], in.B[d*2*G+G+row]
				if g.Kind == CellGRU && g.LinearBeforeReset && row >= 2*H {
					v = wb
				} else {
					v = wb + rb
				}
			}
			work[w.init+d*G+row] = v
		}
		for j := 0; j < H; j++ {
			v := float32(0)
			if in.B != nil && g.Kind == CellGRU && g.LinearBeforeReset {
				v = in.B[d*2*G+G+2*H+j]
			}
			work[w.rbh+d*H+j] = v
		}
		for b := 0; b < g.Batch; b++ {
			so := (d*g.Batch + b) * H
			for j := 0; j < H; j++ {
				if in.H0 != nil {
					work[w.hs+so+j] = in.H0[g.stoff(d, b)+j]
				}
				if in.C0 != nil && g.Kind == CellLSTM {
					work[w.cs+so+j] = in.C0[g.stoff(d, b)+j]
				}
			}
		}
	}
	// Rᵀ.
	if err := g.rtCopy().Host(in.R, work[w.rt:w.rt+D*H*G]); err != nil {
		return nil, nil, nil, err
	}
	// vx_rnn_proj.
	for d := 0; d < D; d++ {
		for r := 0; r < rows; r++ {
			for j := 0; j < G; j++ {
				acc := work[w.init+d*G+j]
				for k := 0; k < I; k++ {
					acc = vmath.FMA32(in.X[r*I+k], in.W[(d*G+j)*I+k], acc)
				}
				work[w.pre+(d*rows+r)*G+j] = canon(acc)
			}
		}
	}
	st := D * g.Batch * H
	for t := 0; t < steps; t++ {
		hin, hout := w.hs+(t%2)*st, w.hs+((t+1)%2)*st
		for d := 0; d < D; d++ {
			for b := 0; b < g.Batch; b++ {
				for j := 0; j < H; j++ {
					g.hostStep(work, w, in, y, t, d, b, j, hin, hout)
				}
			}
		}
		if g.Kind == CellGRU && !g.LinearBeforeReset {
			for d := 0; d < D; d++ {
				for b := 0; b < g.Batch; b++ {
					for j := 0; j < H; j++ {
						g.hostGRUHidden(work, w, in, y, t, d, b, j, hin, hout)
					}
				}
			}
		}
	}
	// vx_rnn_final.
	hf := w.hs + (steps%2)*st
	for d := 0; d < D; d++ {
		for b := 0; b < g.Batch; b++ {
			so := (d*g.Batch + b) * H
			copy(yh[g.stoff(d, b):g.stoff(d, b)+H], work[hf+so:hf+so+H])
			if g.Kind == CellLSTM {
				copy(yc[g.stoff(d, b):g.stoff(d, b)+H], work[w.cs+so:w.cs+so+H])
			}
		}
	}
	if g.Kind != CellLSTM {
		yc = nil
	}
	return y, yh, yc, nil
}

func canon(v float32) float32 {
	if v != v {
		return math.Float32frombits(0x7fc00000)
	}
	return v
}

// rnnClip is rnn.cu's rnn_clip: kernel/rnn's max(-l, min(l, v)), NaN
// passing.
func rnnClip(v, l float32) float32 {
	if l > 0 && v == v {
		if v > l {
			return l
		}
		if v < -l {
			return -l
		}
	}
	return v
}

// Act is rnn.cu's rnn_act: kernel/rnn's activation functions in float32,
// Go's min and max semantics (NaN passes; max(-0, 0) is +0).
func (a RNNAct) Act(x float32) float32 {
	switch a.Op {
	case ActSigmoid:
		return vmath.Sigmoid32(x)
	case ActTanh:
		return vmath.Tanh32(x)
	case ActRelu:
		if x != x || x > 0 {
			return x
		}
		return 0
	case ActAffine:
		return vmath.FMA32(a.Alpha, x, a.Beta)
	case ActLeakyRelu:
		if x >= 0 {
			return x
		}
		return a.Alpha * x
	case ActThresholdedRelu:
		if x >= a.Alpha {
			return x
		}
		return 0
	case ActScaledTanh:
		return a.Alpha * vmath.Tanh32(a.Beta*x)
	case ActHardSigmoid:
		v := vmath.FMA32(a.Alpha, x, a.Beta)
		if v != v {
			return v
		}
		if v >= 1 {
			v = 1
		}
		if v > 0 {
			return v
		}
		return 0
	case ActElu:
		if x >= 0 {
			return x
		}
		return a.Alpha * (vmath.Exp32(x) - 1)
	case ActSoftsign:
		return x / (1 + float32(math.Abs(float64(x))))
	default: // ActSoftplus
		m := x
		if x == x && !(x > 0) {
			m = 0
		}
		return m + vmath.Log32(1+vmath.Exp32(-float32(math.Abs(float64(x)))))
	}
}

// hostThread is the start of a step thread (unit j of row b, direction
// d): the time t of step s and the state's offset so; ok is false for a
// row past its length, whose state the thread copies when carry.
func (g RNNGeom) hostThread(work []float32, in RNNHostInputs, s, d, b, j, hin, hout int, carry bool) (t, so int, ok bool) {
	L := g.Seq
	if in.Lens != nil {
		L = in.Lens[b]
	}
	so = (d*g.Batch + b) * g.Hidden
	if s >= L {
		if carry {
			work[hout+so+j] = work[hin+so+j]
		}
		return 0, so, false
	}
	t = s
	if g.Reverse || d == 1 {
		t = L - 1 - s
	}
	return t, so, true
}

// hostStep is one thread of vx_rnn_step.
func (g RNNGeom) hostStep(work []float32, w rnnWork, in RNNHostInputs, y []float32, s, d, b, j, hin, hout int) {
	H := g.Hidden
	G := g.Gates() * H
	twoPhase := g.Kind == CellGRU && !g.LinearBeforeReset
	t, so, ok := g.hostThread(work, in, s, d, b, j, hin, hout, !twoPhase)
	if !ok {
		return
	}
	h := work[hin+so : hin+so+H]
	p := work[w.pre+(d*g.Seq*g.Batch+g.xrow(t, b))*G:]
	rt := work[w.rt+d*H*G:]
	acts := g.Acts[d*g.PerDir():]
	chain := func(row int, acc float32) float32 {
		for k := 0; k < H; k++ {
			acc = vmath.FMA32(h[k], rt[k*G+row], acc)
		}
		return canon(acc)
	}
	var hn float32
	switch g.Kind {
	case CellRNN:
		hn = acts[0].Act(rnnClip(chain(j, p[j]), g.Clip))
	case CellGRU:
		z := acts[0].Act(rnnClip(chain(j, p[j]), g.Clip))
		r := acts[0].Act(rnnClip(chain(H+j, p[H+j]), g.Clip))
		if twoPhase {
			work[w.zb+so+j] = z
			work[w.rh+so+j] = r * h[j]
			return
		}
		ah := chain(2*H+j, work[w.rbh+d*H+j])
		hh := acts[1].Act(rnnClip(vmath.FMA32(r, ah, p[2*H+j]), g.Clip))
		hn = vmath.FMA32(z, h[j], (1-z)*hh)
	case CellLSTM:
		ai, ao, af, ac := chain(j, p[j]), chain(H+j, p[H+j]), chain(2*H+j, p[2*H+j]), chain(3*H+j, p[3*H+j])
		c := work[w.cs+so+j]
		var pp []float32
		if in.P != nil {
			pp = in.P[d*3*H:]
			ai = vmath.FMA32(pp[j], c, ai)
			af = vmath.FMA32(pp[2*H+j], c, af)
		}
		ai, af, ac = rnnClip(ai, g.Clip), rnnClip(af, g.Clip), rnnClip(ac, g.Clip)
		ig, fg := acts[0].Act(ai), acts[0].Act(af)
		if g.Coupled {
			fg = 1 - ig
		}
		cc := acts[1].Act(ac)
		nc := vmath.FMA32(fg, c, ig*cc)
		if pp != nil {
			ao = vmath.FMA32(pp[H+j], nc, ao)
		}
		og := acts[0].Act(rnnClip(ao, g.Clip))
		hn = og * acts[2].Act(nc)
		work[w.cs+so+j] = nc
	}
	work[hout+so+j] = hn
	if y != nil {
		y[g.yoff(t, d, b)+j] = hn
	}
}

// hostGRUHidden is one thread of vx_rnn_gru_hh.
func (g RNNGeom) hostGRUHidden(work []float32, w rnnWork, in RNNHostInputs, y []float32, s, d, b, j, hin, hout int) {
	H := g.Hidden
	G := 3 * H
	t, so, ok := g.hostThread(work, in, s, d, b, j, hin, hout, true)
	if !ok {
		return
	}
	h := work[hin+so : hin+so+H]
	p := work[w.pre+(d*g.Seq*g.Batch+g.xrow(t, b))*G:]
	rt := work[w.rt+d*H*G:]
	rh := work[w.rh+so : w.rh+so+H]
	acc := p[2*H+j]
	for k := 0; k < H; k++ {
		acc = vmath.FMA32(rh[k], rt[k*G+2*H+j], acc)
	}
	hh := g.Acts[d*2+1].Act(rnnClip(canon(acc), g.Clip))
	z := work[w.zb+so+j]
	hn := vmath.FMA32(z, h[j], (1-z)*hh)
	work[hout+so+j] = hn
	if y != nil {
		y[g.yoff(t, d, b)+j] = hn
	}
}
