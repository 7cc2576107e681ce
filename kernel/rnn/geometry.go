package rnn

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Geometry is a recurrent node's geometry and attributes as this
// package's kernels validate and read them, for another backend that
// computes the same chains (cuda/engine's exact GPU kernels).
type Geometry struct {
	Kind                      string // "RNN", "GRU" or "LSTM"
	Dirs                      int
	Reverse                   bool // the single direction runs backward
	Seq, Batch, Input, Hidden int
	Layout                    int
	Clip                      float32 // 0: no clip
	// Acts are the activations: per direction the operator's count
	// (RNN 1, GRU 2, LSTM 3), direction 0's first.
	Acts                       []Activation
	LinearBeforeReset, Coupled bool
}

// Activation is one activation function of a recurrent node, its name in
// lower case, with the alpha and beta it consumed.
type Activation struct {
	Name        string
	Alpha, Beta float32
}

func kindOf(op string) (cellKind, error) {
	switch op {
	case "RNN":
		return cellRNN, nil
	case "GRU":
		return cellGRU, nil
	case "LSTM":
		return cellLSTM, nil
	}
	return 0, fmt.Errorf("rnn: %s is not RNN, GRU or LSTM", op)
}

// Setup validates n and its inputs as the kernels do (only the inputs'
// types and shapes are read, and sequence_lens' values where it has
// data) and returns the geometry and each batch row's length.
func Setup(n *ir.Node, in []*tensor.Tensor) (Geometry, []int, error) {
	k, err := kindOf(n.OpType)
	if err != nil {
		return Geometry{}, nil, err
	}
	var c config
	var lens []int
	if sl := kernel.Input(in, 4); sl != nil && sl.Data == nil {
		if c, err = newConfig(k, n, in); err != nil {
			return Geometry{}, nil, err
		}
	} else if c, lens, err = setup(k, n, in); err != nil {
		return Geometry{}, nil, err
	}
	g := Geometry{Kind: n.OpType, Dirs: c.dirs, Reverse: c.reverse, Seq: c.seq, Batch: c.batch, Input: c.input, Hidden: c.hidden,
		Layout: int(c.layout), Clip: c.clip, LinearBeforeReset: c.linearBeforeReset, Coupled: c.coupled}
	for _, a := range c.acts {
		g.Acts = append(g.Acts, Activation{Name: a.name, Alpha: a.alpha, Beta: a.beta})
	}
	return g, lens, nil
}

// Activations resolves n's activations (attributes only, no shapes) as
// the kernels do: per direction the operator's count, direction 0's first.
func Activations(n *ir.Node) ([]Activation, error) {
	k, err := kindOf(n.OpType)
	if err != nil {
		return nil, err
	}
	dirs, _, err := directions(n)
	if err != nil {
		return nil, err
	}
	acts, err := parseActivations(attrStrings(n, "activations"), n.Floats("activation_alpha", nil), n.Floats("activation_beta", nil), k.defaultActs(), dirs)
	if err != nil {
		return nil, err
	}
	out := make([]Activation, len(acts))
	for i, a := range acts {
		out[i] = Activation{Name: a.name, Alpha: a.alpha, Beta: a.beta}
	}
	return out, nil
}
