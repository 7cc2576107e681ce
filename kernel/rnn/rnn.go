// Package rnn implements ONNX's recurrent operators: RNN, GRU and LSTM.
//
// Every batch row is computed on its own: its result never depends on the
// other rows of the batch. Each gate pre-activation is one chain that starts
// from the bias sum Wb[j]+Rb[j] (0 without B) and adds, by fused
// multiply-add in fixed order, x[k]*W[j,k] for k over the input, then
// h[k]*R[j,k] for k over the hidden state. An LSTM peephole term P[j]*c[j]
// is one more FMA after the chain. GRU with linear_before_reset computes
// Wbh+x*Wh and Rbh+h*Rh as two chains and joins them as FMA(r, rh, xh).
// clip clamps every pre-activation; input_forget replaces the forget gate
// by 1-i. The new GRU state is FMA(z, h, (1-z)*h~); the new LSTM cell is
// FMA(f, c, i*c~).
//
// float32 activations use vmath; float16 and bfloat16 are computed in
// float32 and rounded once per output; float64 uses math. Activation alphas
// and betas are consumed in the order of the activations that take them.
//
// Steps past a row's sequence_lens produce zeros in Y; Y_h and Y_c hold the
// state after the row's last step (the initial state for a length of 0).
package rnn

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{
		"RNN":  &kernel.Op{Run: run(cellRNN), Into: into(cellRNN), Prepare: prepare(cellRNN), Infer: infer(cellRNN), Tactics: tactics},
		"GRU":  &kernel.Op{Run: run(cellGRU), Into: into(cellGRU), Prepare: prepare(cellGRU), Infer: infer(cellGRU), Tactics: tactics},
		"LSTM": &kernel.Op{Run: run(cellLSTM), Into: into(cellLSTM), Prepare: prepare(cellLSTM), Infer: infer(cellLSTM), Tactics: tactics},
	}
}

type cellKind int

const (
	cellRNN cellKind = iota
	cellGRU
	cellLSTM
)

// gates is the number of gate blocks stacked in W, R and B.
func (k cellKind) gates() int { return [...]int{1, 3, 4}[k] }

// defaultActs are the per-direction activations when none are given.
func (k cellKind) defaultActs() []string {
	return [...][]string{
		{"Tanh"},
		{"Sigmoid", "Tanh"},
		{"Sigmoid", "Tanh", "Tanh"},
	}[k]
}

// numStates is the number of state outputs after Y: Y_h, and Y_c for LSTM.
func (k cellKind) numStates() int {
	if k == cellLSTM {
		return 2
	}
	return 1
}

func directions(n *ir.Node) (int, bool, error) {
	switch d := n.String("direction", "forward"); d {
	case "forward":
		return 1, false, nil
	case "reverse":
		return 1, true, nil
	case "bidirectional":
		return 2, false, nil
	default:
		return 0, false, fmt.Errorf("rnn: direction %q is not forward, reverse or bidirectional", d)
	}
}

// config is a node's validated geometry and attributes.
type config struct {
	kind                       cellKind
	dirs                       int
	reverse                    bool // the single direction runs backward
	seq, batch, input, hidden  int
	layout                     int64
	clip                       float32 // 0: no clip
	acts                       []actSpec
	linearBeforeReset, coupled bool
}

func newConfig(k cellKind, n *ir.Node, in []*tensor.Tensor) (config, error) {
	c := config{kind: k}
	var err error
	if c.dirs, c.reverse, err = directions(n); err != nil {
		return c, err
	}
	x, w, r := kernel.Input(in, 0), kernel.Input(in, 1), kernel.Input(in, 2)
	if x == nil || w == nil || r == nil {
		return c, fmt.Errorf("rnn: %s needs inputs X, W and R", n.OpType)
	}
	for i, t := range in {
		if t != nil && i != 4 && t.DType != x.DType {
			return c, fmt.Errorf("rnn: %s input %d is %v, X is %v", n.OpType, i, t.DType, x.DType)
		}
	}
	if !x.DType.IsFloat() {
		return c, fmt.Errorf("rnn: %s needs float inputs, got %v", n.OpType, x.DType)
	}
	if len(x.Shape) != 3 {
		return c, fmt.Errorf("rnn: %s X must have rank 3, got shape %v", n.OpType, x.Shape)
	}
	c.layout = n.Int("layout", 0)
	switch c.layout {
	case 0:
		c.seq, c.batch = x.Shape[0], x.Shape[1]
	case 1:
		c.batch, c.seq = x.Shape[0], x.Shape[1]
	default:
		return c, fmt.Errorf("rnn: %s layout %d is not 0 or 1", n.OpType, c.layout)
	}
	c.input = x.Shape[2]
	if len(r.Shape) != 3 {
		return c, fmt.Errorf("rnn: %s R must have rank 3, got shape %v", n.OpType, r.Shape)
	}
	c.hidden = int(n.Int("hidden_size", int64(r.Shape[2])))
	if c.hidden <= 0 {
		return c, fmt.Errorf("rnn: %s hidden_size %d must be positive", n.OpType, c.hidden)
	}
	g := k.gates() * c.hidden
	check := func(name string, t *tensor.Tensor, want ...int) error {
		if t != nil && !sameInts(t.Shape, want) {
			return fmt.Errorf("rnn: %s %s has shape %v, want %v", n.OpType, name, t.Shape, want)
		}
		return nil
	}
	state := []int{c.dirs, c.batch, c.hidden}
	if c.layout == 1 {
		state = []int{c.batch, c.dirs, c.hidden}
	}
	if err := firstErr(
		check("W", w, c.dirs, g, c.input),
		check("R", r, c.dirs, g, c.hidden),
		check("B", kernel.Input(in, 3), c.dirs, 2*g),
		check("sequence_lens", kernel.Input(in, 4), c.batch),
		check("initial_h", kernel.Input(in, 5), state...),
	); err != nil {
		return c, err
	}
	if k == cellLSTM {
		if err := firstErr(
			check("initial_c", kernel.Input(in, 6), state...),
			check("P", kernel.Input(in, 7), c.dirs, 3*c.hidden),
		); err != nil {
			return c, err
		}
	}
	if sl := kernel.Input(in, 4); sl != nil && sl.DType != tensor.Int32 {
		return c, fmt.Errorf("rnn: %s sequence_lens must be int32, got %v", n.OpType, sl.DType)
	}
	if n.Has("clip") {
		c.clip = n.Float("clip", 0)
		if c.clip <= 0 {
			return c, fmt.Errorf("rnn: %s clip %g must be positive", n.OpType, c.clip)
		}
	}
	c.linearBeforeReset = n.Int("linear_before_reset", 0) != 0
	c.coupled = n.Int("input_forget", 0) != 0
	c.acts, err = parseActivations(attrStrings(n, "activations"), n.Floats("activation_alpha", nil), n.Floats("activation_beta", nil), k.defaultActs(), c.dirs)
	return c, err
}

func attrStrings(n *ir.Node, name string) []string {
	if a, ok := n.Attrs[name]; ok {
		return a.Strings
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// setup validates n and its inputs and reads the sequence lengths.
func setup(k cellKind, n *ir.Node, in []*tensor.Tensor) (config, []int, error) {
	c, err := newConfig(k, n, in)
	if err != nil {
		return c, nil, err
	}
	lens := make([]int, c.batch)
	for b := range lens {
		lens[b] = c.seq
	}
	if sl := kernel.Input(in, 4); sl != nil {
		for b, v := range sl.Data.([]int32) {
			if v < 0 || int(v) > c.seq {
				return c, nil, fmt.Errorf("rnn: %s sequence_lens[%d] = %d out of range [0, %d]", n.OpType, b, v, c.seq)
			}
			lens[b] = int(v)
		}
	}
	return c, lens, nil
}

// fusedPath returns the fused path's packed weights for n when it takes
// it (float32 on AVX2 or AVX-512, the configurations fusedOK accepts), with the
// node's pack (nil without the packed tactic).
func fusedPath(kc *kernel.Ctx, n *ir.Node, c config, in []*tensor.Tensor) ([]fusedDir, *pack, bool) {
	if in[0].DType != tensor.Float32 || levelOf(kc) < chainAVX2 || !fusedOK(c) {
		return nil, nil, false
	}
	w, r := in[1].Data.([]float32), in[2].Data.([]float32)
	if kernel.Tactic(n) == TacticPacked {
		pk := packOf(kc, n, c, w, r, true)
		return pk.fused, pk, true
	}
	return packFused(c, w, r), nil, true
}

func run(k cellKind) kernel.RunFunc {
	return func(kc *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		c, lens, err := setup(k, n, in)
		if err != nil {
			return nil, err
		}
		if dirs, pk, ok := fusedPath(kc, n, c, in); ok {
			H := c.hidden
			y := make([]float32, c.seq*c.dirs*c.batch*H)
			yh := make([]float32, c.dirs*c.batch*H)
			yc := make([]float32, c.dirs*c.batch*H)
			computeFused(c, in, lens, dirs, pk, kc, levelOf(kc), y, yh, yc)
			yShape, stShape := c.outShapes()
			out := []*tensor.Tensor{tensor.From(y, yShape...), tensor.From(yh, stShape...)}
			if c.kind == cellLSTM {
				out = append(out, tensor.From(yc, stShape...))
			}
			return out, nil
		}
		switch in[0].DType {
		case tensor.Float32:
			var pk *pack
			if kernel.Tactic(n) == TacticPacked {
				pk = packOf(kc, n, c, in[1].Data.([]float32), in[2].Data.([]float32), false)
			}
			return compute32(c, in, lens, pk, kc)
		case tensor.Float64:
			return compute(c, in, lens, f64, identity64)
		default: // float16 and bfloat16, in float32
			return compute(c, in, lens, f32, narrowTo32)
		}
	}
}

// into is run into the executor's outputs: the fused path writes them in
// place; the others run and copy.
func into(k cellKind) kernel.IntoFunc {
	return func(kc *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
		c, lens, err := setup(k, n, in)
		if err != nil {
			return err
		}
		if dirs, pk, ok := fusedPath(kc, n, c, in); ok {
			data := func(i int) []float32 {
				if i < len(out) && out[i] != nil {
					return out[i].Data.([]float32)
				}
				return nil
			}
			y := data(0)
			if y == nil {
				y = make([]float32, c.seq*c.dirs*c.batch*c.hidden)
			}
			computeFused(c, in, lens, dirs, pk, kc, levelOf(kc), y, data(1), data(2))
			return nil
		}
		res, err := run(k)(kc, n, in)
		if err != nil {
			return err
		}
		for i, o := range out {
			if o == nil || i >= len(res) {
				continue
			}
			switch d := o.Data.(type) {
			case []float32:
				copy(d, res[i].Data.([]float32))
			case []float64:
				copy(d, res[i].Data.([]float64))
			case []tensor.Half:
				copy(d, res[i].Data.([]tensor.Half))
			case []tensor.BHalf:
				copy(d, res[i].Data.([]tensor.BHalf))
			default:
				return fmt.Errorf("rnn: %s output %d of type %v", n.OpType, i, o.DType)
			}
		}
		return nil
	}
}

func infer(k cellKind) kernel.InferFunc {
	return func(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
		if len(in) < 3 || !in[0].Present || !in[1].Present || !in[2].Present {
			return nil, fmt.Errorf("rnn: %s needs inputs X, W and R", n.OpType)
		}
		dirs, _, err := directions(n)
		if err != nil {
			return nil, err
		}
		x := in[0].Type
		dt := x.DType
		if dt != tensor.Undefined && !dt.IsFloat() {
			return nil, fmt.Errorf("rnn: %s needs float inputs, got %v", n.OpType, dt)
		}
		hidden := ir.Unknown
		if n.Has("hidden_size") {
			hidden = ir.Fixed(int(n.Int("hidden_size", 0)))
		} else if r := in[2].Type; r.RankKnown && len(r.Shape) == 3 {
			hidden = r.Shape[2]
		}
		seq, batch := ir.Unknown, ir.Unknown
		layout := n.Int("layout", 0)
		if x.RankKnown {
			if len(x.Shape) != 3 {
				return nil, fmt.Errorf("rnn: %s X must have rank 3, got %v", n.OpType, x)
			}
			seq, batch = x.Shape[0], x.Shape[1]
			if layout == 1 {
				seq, batch = batch, seq
			}
		}
		d := ir.Fixed(dirs)
		y := []ir.Dim{seq, d, batch, hidden}
		st := []ir.Dim{d, batch, hidden}
		if layout == 1 {
			y = []ir.Dim{batch, seq, d, hidden}
			st = []ir.Dim{batch, d, hidden}
		}
		out := []ir.Type{{DType: dt, Shape: y, RankKnown: true}}
		for i := 0; i < k.numStates(); i++ {
			out = append(out, ir.Type{DType: dt, Shape: st, RankKnown: true})
		}
		return out, nil
	}
}
