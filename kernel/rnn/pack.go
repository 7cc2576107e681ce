package rnn

import (
	"sync"
	"unsafe"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// TacticPacked runs a float32 RNN, GRU or LSTM with its W and R (inputs 1
// and 2, which must be initializers) transposed once per node and kept in
// the node's kernel.State, rather than on every run: the transposes cost
// more than the 32 steps of a zoo LSTM (hidden 128). The arithmetic is the
// default path's (fast32), so the bits are the same.
const TacticPacked = "rnn.packed"

func init() { kernel.RegisterConstInputs(TacticPacked, 1, 2) }

// tactics offers TacticPacked for float32 nodes (the compiler drops it
// where W or R is not an initializer).
func tactics(n *ir.Node, in []ir.Type) []string {
	if len(in) < 3 || in[0].DType != tensor.Float32 {
		return nil
	}
	return []string{TacticPacked}
}

// pack is a node's transposed weights, one entry per direction: in
// fast32's layout (wt, rt) or, where fused, in the fused path's panels.
type pack struct {
	w, r   unsafe.Pointer // the W and R they were transposed from
	nw, nr int
	wt, rt [][]float32
	fused  []fusedDir
	// scratch holds *fusedScratch between calls (concurrent runs of a
	// plan take their own).
	scratch sync.Pool
}

// packKey keys a node's pack in its kernel.State.
type packKey struct{ n *ir.Node }

// packOf returns n's transposed W and R from kc's State, in the fused
// layout where fused, transposing them on first use (or when n now runs on
// other weights or the other path; every call without a State).
func packOf(kc *kernel.Ctx, n *ir.Node, c config, w, r []float32, fused bool) *pack {
	p, _ := kernel.Prepared(kc, packKey{n}, func(p *pack) bool {
		return p.w == unsafe.Pointer(unsafe.SliceData(w)) && p.r == unsafe.Pointer(unsafe.SliceData(r)) && p.nw == len(w) && p.nr == len(r) && (p.fused != nil) == fused
	}, func() (*pack, error) {
		var p *pack
		if fused {
			p = &pack{fused: packFused(c, w, r)}
		} else {
			p = transposeAll(c, w, r)
		}
		p.w, p.r, p.nw, p.nr = unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(r)), len(w), len(r)
		return p, nil
	})
	return p
}

// transposeAll transposes every direction's W and R.
func transposeAll(c config, w, r []float32) *pack {
	H, I, G := c.hidden, c.input, c.kind.gates()*c.hidden
	p := &pack{}
	for d := 0; d < c.dirs; d++ {
		p.wt = append(p.wt, transpose32(w[d*G*I:(d+1)*G*I], G, I))
		p.rt = append(p.rt, transpose32(r[d*G*H:(d+1)*G*H], G, H))
	}
	return p
}

// prepare is the ops' Op.Prepare: under TacticPacked, a float32 node's W
// and R (initializers) are packed at bind time, in the layout its runs
// take at the bound context's instruction set.
func prepare(k cellKind) func(*kernel.Ctx, *ir.Node, []*tensor.Tensor) error {
	return func(kc *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) error {
		if kernel.Tactic(n) != TacticPacked || len(in) < 3 || in[0] == nil || in[0].DType != tensor.Float32 ||
			in[1] == nil || in[2] == nil || in[1].Data == nil || in[2].Data == nil {
			return nil
		}
		c, err := newConfig(k, n, in)
		if err != nil {
			return err
		}
		packOf(kc, n, c, in[1].Data.([]float32), in[2].Data.([]float32), levelOf(kc) >= chainAVX2 && fusedOK(c))
		return nil
	}
}
