package engine

import (
	"fmt"
	"math"
	"strings"

	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/rnn"
	"github.com/vouchml/vouch/tensor"
)

// The recurrent operators (RNN, GRU, LSTM) run kernel/rnn's float32
// chains with cuda/exact's RNN kernels: the chain starts, Rᵀ, the input
// projection of every step at once, one launch per step (two for GRU
// without linear_before_reset), the final states. The compiler keeps
// them as they are (no fused or renamed form), so the family takes the
// three ONNX operators.
func init() { families = append(families, family{place: placeRNN, run: runRNN}) }

func isRNN(n *ir.Node) bool {
	switch n.OpType {
	case "RNN", "GRU", "LSTM":
		return n.Domain == ""
	}
	return false
}

// rnnKernels is the kernel list a recurrent layer's placement records.
func rnnKernels(n *ir.Node) string {
	ks := []string{kernels.RNNStart, kernels.Copy, kernels.RNNProj, kernels.RNNStep}
	if n.OpType == "GRU" && n.Int("linear_before_reset", 0) == 0 {
		ks = append(ks, kernels.RNNGRUHidden)
	}
	return strings.Join(append(ks, kernels.RNNFinal), "+")
}

// placeRNN places float32 recurrent layers whose attributes the kernels
// take (every activation kernel/rnn has, both layouts and all directions,
// clip, linear_before_reset, input_forget, peepholes, sequence_lens read
// on the host).
func placeRNN(n *ir.Node, g *ir.Graph, types map[string]ir.Type) (kernel, reason string, ok bool) {
	if !isRNN(n) {
		return "", "", false
	}
	return rnnPlace(n, types)
}

func rnnPlace(n *ir.Node, types map[string]ir.Type) (string, string, bool) {
	if len(n.Inputs) < 3 || n.Input(0) == "" || n.Input(1) == "" || n.Input(2) == "" {
		return "", fmt.Sprintf("%s without X, W and R", n.OpType), true
	}
	for i, v := range n.Inputs {
		if v == "" {
			continue
		}
		t, known := types[v]
		if i == 4 {
			if known && t.DType != tensor.Int32 {
				return "", fmt.Sprintf("%s sequence_lens of %v (int32 expected)", n.OpType, t.DType), true
			}
			continue
		}
		if !known || t.DType != tensor.Float32 {
			return "", fmt.Sprintf("%s of other than float32 inputs (the GPU kernels are float32)", n.OpType), true
		}
		if i == 0 && t.RankKnown && len(t.Shape) != 3 {
			return "", fmt.Sprintf("%s X of rank %d", n.OpType, len(t.Shape)), true
		}
	}
	acts, err := rnn.Activations(n)
	if err != nil {
		return "", err.Error(), true
	}
	for _, a := range acts {
		if _, ok := exact.RNNActByName(a.Name); !ok {
			return "", fmt.Sprintf("%s activation %s has no GPU kernel", n.OpType, a.Name), true
		}
	}
	if l := n.Int("layout", 0); l != 0 && l != 1 {
		return "", fmt.Sprintf("%s layout %d", n.OpType, l), true
	}
	if n.Has("clip") && !(n.Float("clip", 0) > 0) {
		return "", fmt.Sprintf("%s clip %g is not positive", n.OpType, n.Float("clip", 0)), true
	}
	if h := n.Int("hidden_size", 1); h < 1 || h > 1<<24 {
		return "", fmt.Sprintf("%s hidden_size %d", n.OpType, h), true
	}
	return rnnKernels(n), "", true
}

func runRNN(s *state, n *ir.Node) (bool, error) {
	if !isRNN(n) {
		return false, nil
	}
	return true, s.rnn(n)
}

// rnn runs a recurrent layer: its operands' shapes are validated by
// kernel/rnn's own checks (rnn.Setup), sequence_lens is read on the host
// (an int32 value: a constant, or from a CPU layer or a graph input, so
// the program never captures a graph that would keep a first run's
// lengths) and uploaded, as int32s, into this shape's buffers.
func (s *state) rnn(n *ir.Node) error {
	in := make([]*tensor.Tensor, len(n.Inputs))
	ptr := make([]uint64, len(n.Inputs))
	for i, name := range n.Inputs {
		if name == "" {
			continue
		}
		if i == 4 {
			t, err := s.host(name)
			if err != nil {
				return err
			}
			in[i] = t
			continue
		}
		p, shape, err := s.dev(name)
		if err != nil {
			return err
		}
		in[i], ptr[i] = &tensor.Tensor{DType: tensor.Float32, Shape: shape}, p
	}
	geo, lens, err := rnn.Setup(n, in)
	if err != nil {
		return err
	}
	g, err := exact.RNNGeomOf(geo)
	if err != nil {
		return err
	}
	at := func(i int) uint64 {
		if i < len(ptr) {
			return ptr[i]
		}
		return 0
	}
	b := exact.RNNBuffers{X: at(0), W: at(1), R: at(2), B: at(3), H0: at(5)}
	if g.Kind == exact.CellLSTM {
		b.C0, b.P = at(6), at(7)
	}
	steps := g.Seq
	if in4 := len(in) > 4 && in[4] != nil; in4 {
		steps = 0
		bits := make([]float32, len(lens)) // the int32s' bytes, moved as they are
		for i, L := range lens {
			steps = max(steps, L)
			bits[i] = math.Float32frombits(uint32(int32(L)))
		}
		lb, err := s.alloc(len(lens))
		if err != nil {
			return err
		}
		// A graph capture (a second run of an all-GPU program: its
		// lengths are a constant) keeps the first run's upload.
		if !s.pr.allGPU || s.b.runs == 0 {
			if err := s.l.toDevice(lb.Ptr, bits); err != nil {
				return err
			}
		}
		b.Lens = lb.Ptr
	}
	wb, err := s.alloc(g.WorkLen())
	if err != nil {
		return err
	}
	b.Work = wb.Ptr
	yShape, stShape := rnnShapes(g)
	outs := []*uint64{&b.Y, &b.YH}
	if g.Kind == exact.CellLSTM {
		outs = append(outs, &b.YC)
	}
	for i, o := range outs {
		if i >= len(n.Outputs) || n.Outputs[i] == "" {
			continue
		}
		shape := stShape
		if i == 0 {
			shape = yShape
		}
		if *o, err = s.out(n.Outputs[i], shape); err != nil {
			return err
		}
	}
	return s.pr.e.RNN(s.l.st, g, b, steps)
}

// rnnShapes are the shapes of Y and of the states (kernel/rnn's).
func rnnShapes(g exact.RNNGeom) (y, st []int) {
	if g.Layout == 1 {
		return []int{g.Batch, g.Seq, g.Dirs, g.Hidden}, []int{g.Batch, g.Dirs, g.Hidden}
	}
	return []int{g.Seq, g.Dirs, g.Batch, g.Hidden}, []int{g.Dirs, g.Batch, g.Hidden}
}
