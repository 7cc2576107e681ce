package rnn

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// TacticPacked runs a float32 RNN, GRU or LSTM with its W and R (inputs 1
// and 2, which must be initializers) transposed once per node and kept,
// rather than on every run: the transposes cost more than the 32 steps of
// a zoo LSTM (hidden 128). The arithmetic is the default path's (fast32),
// so the bits are the same.
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

// pack is a node's transposed weights, one entry per direction.
type pack struct {
	w, r   unsafe.Pointer // the W and R they were transposed from
	nw, nr int
	wt, rt [][]float32
}

// packs keeps each node's pack, weakly keyed: it goes when the node's
// graph does.
var packs sync.Map // weak.Pointer[ir.Node] -> *atomic.Pointer[pack]

// packOf returns n's transposed W and R, transposing them on first use
// (or when n now runs on other weights).
func packOf(n *ir.Node, c config, w, r []float32) *pack {
	key := weak.Make(n)
	v, ok := packs.Load(key)
	if !ok {
		var loaded bool
		v, loaded = packs.LoadOrStore(key, new(atomic.Pointer[pack]))
		if !loaded {
			runtime.AddCleanup(n, func(k weak.Pointer[ir.Node]) { packs.Delete(k) }, key)
		}
	}
	ap := v.(*atomic.Pointer[pack])
	if p := ap.Load(); p != nil && p.w == unsafe.Pointer(&w[0]) && p.r == unsafe.Pointer(&r[0]) && p.nw == len(w) && p.nr == len(r) {
		return p
	}
	p := transposeAll(c, w, r)
	p.w, p.r, p.nw, p.nr = unsafe.Pointer(&w[0]), unsafe.Pointer(&r[0]), len(w), len(r)
	ap.Store(p)
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
