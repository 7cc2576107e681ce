package exec

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// A Concat whose inputs are contiguous blocks of its output (every
// dimension before the axis is 1: axis 1 of NCHW at batch 1, or axis 0)
// need not copy anything: the memory plan can put each input where the
// Concat would copy it, so that its producer writes its output there, and
// the Concat runs nothing. The producers' kernels do not change: the arena
// hands them a slice of the Concat's output as their output, and every
// reader of an input reads that slice. Only a copy is removed, so no bit of
// any value changes.
//
// The plan (planConcats) runs over the Concats last to first, so that a
// Concat that feeds another one is placed inside it before its own inputs
// are placed: a Concat's output that another Concat already placed is its
// base, else it owns a storage (a root). Each input then goes to the base
// plus the bytes of the inputs before it, when it is a value that can live
// there:
//   - its producer runs an allocation-free kernel (Into) that is not a View
//     (a view shares its input's storage and writes nothing of its own), so
//     that it writes its output where the arena says; and it is not written
//     in place over one of its producer's inputs (planLayout skips that for
//     a placed value);
//   - it is not a graph input, output or initializer (their storage is not
//     the arena's);
//   - it is not placed already (an input read twice by one Concat, or by two
//     Concats at different offsets, is placed once; the other reads copy
//     it);
//   - its offset is Alignment-aligned, as every arena slot is (the kernels'
//     vector stores may rely on it).
//
// An input that cannot be placed is copied by the Concat into its block
// (the Concat then runs a copy of those inputs only). A Concat whose output
// is no other Concat's input, and whose inputs are all placed already, back
// to back and in order, in one root (densenet's layers concatenate the
// first k features of the block's final Concat), becomes a view of those
// bytes: it is placed there too, and runs nothing.
//
// Every placed value lies inside its Concat's block, blocks of one Concat
// are disjoint, and a view covers bytes that placed values fill, so each
// byte of a root is written by at most one producer (or one Concat's copy)
// per run. A root's storage is allocated at the first node that writes into
// it and lives until the last reader of any value inside it (planLayout), so
// nothing else is planned over those bytes meanwhile, and a later node may
// write in place over a value inside it only where nothing reads the root
// afterwards (inPlaceInput's rule, unchanged).
//
// At batch > 1 (a dimension before the axis above 1) the inputs are strided
// in the output: a producer would have to write rows at a stride, which no
// kernel does, so such a Concat keeps its copy.

// concatPlan is where planConcats puts values: at[v] is the storage value v
// lives in (a root) and v's byte offset there; parts[i], for a Concat node
// i planned in place (in planned), lists the inputs it still copies.
type concatPlan struct {
	at      map[string]place
	planned map[int]bool
	parts   map[int][]part
}

// place is a value's position inside a root's storage.
type place struct {
	root string
	off  int64
}

// part is one input a Concat planned in place still copies: node input in,
// at byte offset off of the Concat's output.
type part struct {
	in  int
	off int64
}

// ConcatStats counts the Concats of a memory plan by what they run.
type ConcatStats struct {
	// InPlace Concats run nothing: every input is written in its place by
	// its producer.
	InPlace int
	// Partial Concats copy only the inputs that could not be placed.
	Partial int
	// Copied Concats copy every input (strided inputs at batch > 1, or no
	// input could be placed).
	Copied int
}

// concatGeom returns the byte offset of each input of Concat node n in its
// output, when the inputs are contiguous
// blocks of the output (every dimension before the axis is 1) of one
// numeric dtype at static shapes; ok is false otherwise.
func concatGeom(n *ir.Node, types map[string]ir.Type) (offs []int64, ok bool) {
	if n.OpType != "Concat" || (n.Domain != "" && n.Domain != "ai.onnx") || len(n.Outputs) != 1 || n.Outputs[0] == "" || len(n.Inputs) == 0 || !n.Has("axis") {
		return nil, false
	}
	ot := types[n.Outputs[0]]
	shape, static := ot.Static()
	if !static || ot.DType.Size() == 0 {
		return nil, false
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), len(shape))
	if err != nil || tensor.NumElems(shape[:axis]) != 1 {
		return nil, false
	}
	var off int64
	for _, x := range n.Inputs {
		xt := types[x]
		xs, static := xt.Static()
		if x == "" || !static || xt.DType != ot.DType || len(xs) != len(shape) {
			return nil, false
		}
		size := int64(tensor.NumElems(xs) * ot.DType.Size())
		if size == 0 {
			return nil, false
		}
		offs = append(offs, off)
		off += size
	}
	if off != int64(tensor.NumElems(shape)*ot.DType.Size()) {
		return nil, false
	}
	return offs, true
}

// planConcats places the inputs of g's Concats in their outputs (see the
// comment above). ops[i] is node i's kernel (nil: none); a node runs its
// allocation-free kernel when into reports so.
func planConcats(g *ir.Graph, types map[string]ir.Type, ops []*kernel.Op, into func(i int) bool) *concatPlan {
	cp := &concatPlan{at: map[string]place{}, planned: map[int]bool{}, parts: map[int][]part{}}
	prod := map[string]int{}
	for i, n := range g.Nodes {
		for _, o := range n.Outputs {
			if o != "" {
				prod[o] = i
			}
		}
	}
	outside := map[string]bool{}
	for _, v := range g.Inputs {
		outside[v.Name] = true
	}
	for _, v := range g.Outputs {
		outside[v.Name] = true
	}
	// placeable reports whether value x, read by node i, may be written in
	// place by its producer.
	placeable := func(x string, i int) bool {
		if _, init := g.Initializers[x]; init || outside[x] {
			return false
		}
		p, ok := prod[x]
		return ok && p < i && into(p) && !ops[p].View
	}
	for i := len(g.Nodes) - 1; i >= 0; i-- {
		n := g.Nodes[i]
		if !into(i) {
			continue
		}
		offs, ok := concatGeom(n, types)
		if !ok {
			continue
		}
		o := n.Outputs[0]
		base, placed := cp.at[o]
		if !placed && !outside[o] {
			if v, ok := cp.view(n, offs); ok {
				cp.at[o] = v
				cp.planned[i] = true
				continue
			}
		}
		if !placed {
			base = place{root: o}
		}
		var parts []part
		some := false
		for j, x := range n.Inputs {
			want := place{root: base.root, off: base.off + offs[j]}
			if at, ok := cp.at[x]; ok {
				if at == want {
					some = true
				} else {
					parts = append(parts, part{in: j, off: offs[j]})
				}
				continue
			}
			if want.off%Alignment == 0 && placeable(x, i) {
				cp.at[x] = want
				some = true
				continue
			}
			parts = append(parts, part{in: j, off: offs[j]})
		}
		if some {
			cp.planned[i] = true
			cp.parts[i] = parts
		}
	}
	return cp
}

// view returns where Concat n's output lies when its inputs are placed
// already, back to back and in order, in one root.
func (cp *concatPlan) view(n *ir.Node, offs []int64) (place, bool) {
	first, ok := cp.at[n.Inputs[0]]
	if !ok {
		return place{}, false
	}
	for j, x := range n.Inputs {
		if at, ok := cp.at[x]; !ok || at != (place{root: first.root, off: first.off + offs[j]}) {
			return place{}, false
		}
	}
	return first, true
}

// stats counts the Concats of g (those with contiguous inputs or not) by
// what the plan makes them run.
func (cp *concatPlan) stats(g *ir.Graph) ConcatStats {
	var s ConcatStats
	for i, n := range g.Nodes {
		if n.OpType != "Concat" || (n.Domain != "" && n.Domain != "ai.onnx") {
			continue
		}
		switch {
		case !cp.planned[i]:
			s.Copied++
		case len(cp.parts[i]) == 0:
			s.InPlace++
		default:
			s.Partial++
		}
	}
	return s
}

// Memory is a memory plan: the arena PlanArena places, and what it made of
// the graph's Concats.
type Memory struct {
	Arena   *plan.Arena
	Concats ConcatStats
}

// PlanMemory is PlanArena with the count of the Concats it planned in
// place, for the build report.
func PlanMemory(g *ir.Graph, types map[string]ir.Type, reg *kernel.Registry) Memory {
	lay := planLayout(g, types, reg, true)
	return Memory{Arena: lay.arena, Concats: lay.concats}
}

// SetCopyConcats makes Bind copy every Concat's inputs into its output, as
// before Concats were planned in place (on: a test and measurement knob;
// the outputs' bits are the same either way). It must not be called while
// the executor runs; Bounds bound before keep their plan.
func (e *Executor) SetCopyConcats(on bool) { e.copyConcats = on }

// Concats counts the bound graph's Concats by what they run: nothing (their
// inputs are written in place), a copy of some inputs, or of all.
func (b *Bound) Concats() ConcatStats { return b.concats }
