package exec

import (
	"slices"
	"sort"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// Alignment is the byte alignment of every arena slot (and of the arena
// itself): one cache line, and enough for any vector load.
const Alignment = 64

// layout is the memory plan of a graph at static shapes: which nodes run
// their allocation-free kernel, and where each of their outputs lives.
type layout struct {
	arena *plan.Arena
	// into[i] is true when node i runs Into; view[i] when it runs nothing
	// because its output is bound to input 0's storage.
	into, view []bool
	// inPlace maps a value written in place to the input it overwrites.
	inPlace map[string]string
	// parts[i], for a Concat node i whose output holds some of its inputs
	// (concat.go), lists the inputs it still copies: such a node runs
	// those copies instead of its kernel.
	parts map[int][]part
	// concats counts the graph's Concats by what they run.
	concats ConcatStats
}

// PlanArena places the values of g that the executor computes with
// allocation-free kernels in one buffer, as Bind does at run time: a value
// lives from its producer to its last reader (graph outputs to the end), and
// takes the lowest free gap that fits (first fit, in node order, every slot
// 64-byte aligned). Two kinds of value share a slot instead of taking one:
// the output of an op marked kernel.Op.View whose input 0 is in the arena
// (it is that input under another shape), and the output of an op marked
// kernel.Op.InPlace written over an input of the same dtype and shape whose
// storage dies at that op. A Concat whose inputs are contiguous blocks of
// its output holds those of its inputs whose producers can write there
// (concat.go): they are placed inside its slot, and it copies nothing.
// Values of nodes without an Into, with a type that
// is not static at types, or of string type are left out: their kernels
// allocate them. types must hold static types for the graph (ir.Infer at
// fixed input shapes).
//
// PeakBytes is the size of the buffer Bind allocates for these shapes.
func PlanArena(g *ir.Graph, types map[string]ir.Type, reg *kernel.Registry) *plan.Arena {
	return planLayout(g, types, reg, true).arena
}

// storage is one arena region shared by one or more values.
type storage struct {
	off, end int64
	until    int // index of the last node that may read it
}

func planLayout(g *ir.Graph, types map[string]ir.Type, reg *kernel.Registry, concats bool) *layout {
	end := len(g.Nodes)
	last := map[string]int{}
	for i, n := range g.Nodes {
		for _, name := range reads(n) {
			last[name] = i
		}
	}
	for _, o := range g.Outputs {
		last[o.Name] = end
	}
	lastOf := func(name string, i int) int {
		if l, ok := last[name]; ok && l > i {
			return l
		}
		return i
	}
	ops := make([]*kernel.Op, len(g.Nodes))
	if reg != nil {
		for i, n := range g.Nodes {
			ops[i], _ = reg.Lookup(n)
		}
	}
	into := func(i int) bool { return ops[i] != nil && ops[i].Into != nil && staticNode(g.Nodes[i], types) }
	cp := &concatPlan{}
	if concats {
		cp = planConcats(g, types, ops, into)
	}
	lay := &layout{
		arena:   &plan.Arena{Slots: map[string]plan.Slot{}},
		into:    make([]bool, len(g.Nodes)),
		view:    make([]bool, len(g.Nodes)),
		inPlace: map[string]string{},
		parts:   cp.parts,
		concats: cp.stats(g),
	}
	// A root (a Concat's output that holds others, concat.go) is allocated
	// at the first node writing into it, for as long as any value inside it
	// is read: rootsAt[i] lists the roots node i allocates, in node order.
	roots := map[string]bool{}
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			if at, ok := cp.at[o]; ok {
				roots[at.root] = true
			}
		}
	}
	rootsAt := map[int][]string{}
	until := map[string]int{}
	for i, n := range g.Nodes {
		for _, o := range n.Outputs {
			r := o
			if at, ok := cp.at[o]; ok {
				r = at.root
			}
			if o == "" || !roots[r] {
				continue
			}
			if _, seen := until[r]; !seen {
				rootsAt[i] = append(rootsAt[i], r)
			}
			until[r] = max(until[r], lastOf(o, i))
		}
	}
	store := map[string]*storage{}
	// refs[v]: the arena storages value v may share data with. An arena
	// value has its own; the output of an allocating kernel may alias any
	// storage its inputs reference (Reshape's Run shares its input's data).
	refs := map[string][]*storage{}
	var active []*storage
	// alloc places a new storage of size bytes in the lowest free gap.
	alloc := func(size int64, until int) *storage {
		sort.Slice(active, func(a, b int) bool { return active[a].off < active[b].off })
		off := int64(0)
		for _, s := range active {
			if off+size <= s.off {
				break
			}
			off = max(off, s.end)
		}
		s := &storage{off: off, end: off + size, until: until}
		active = append(active, s)
		lay.arena.PeakBytes = max(lay.arena.PeakBytes, off+size)
		return s
	}
	for i, n := range g.Nodes {
		kept := active[:0]
		for _, s := range active {
			if s.until >= i {
				kept = append(kept, s)
			}
		}
		active = kept
		for _, r := range rootsAt[i] {
			size := slotBytes(types[r])
			s := alloc(size, until[r])
			store[r] = s
			refs[r] = []*storage{s}
			lay.arena.Slots[r] = plan.Slot{Offset: s.off, Bytes: size}
		}
		op := ops[i]
		if !into(i) {
			// Allocating kernel: its outputs may alias what it reads, so
			// every storage it reads lives as long as those outputs. Each
			// storage is listed once: a chain of such nodes reading a value
			// twice (x·x, a residual) would double the list at every node.
			var rs []*storage
			for _, name := range reads(n) {
				for _, s := range refs[name] {
					if !slices.Contains(rs, s) {
						rs = append(rs, s)
					}
				}
			}
			for _, o := range n.Outputs {
				if o == "" || len(rs) == 0 {
					continue
				}
				refs[o] = rs
				for _, s := range rs {
					s.until = max(s.until, lastOf(o, i))
				}
			}
			continue
		}
		lay.into[i] = true
		x := n.Input(0)
		if op.View && len(n.Outputs) == 1 && n.Outputs[0] != "" && len(refs[x]) == 1 && ownSlot(lay, x) && constRest(g, n) &&
			types[x].DType == types[n.Outputs[0]].DType {
			o := n.Outputs[0]
			s := refs[x][0]
			refs[o] = refs[x]
			s.until = max(s.until, lastOf(o, i))
			lay.arena.Slots[o] = lay.arena.Slots[x]
			lay.view[i] = true
			continue
		}
		if cp.planned[i] && len(cp.parts[i]) == 0 {
			lay.view[i] = true // a Concat whose inputs are all in place
		}
		for j, o := range n.Outputs {
			if o == "" {
				continue
			}
			t := types[o]
			size := slotBytes(t)
			if at, ok := cp.at[o]; ok {
				s := store[at.root]
				refs[o] = []*storage{s}
				lay.arena.Slots[o] = plan.Slot{Offset: s.off + at.off, Bytes: size}
				continue
			}
			if store[o] != nil {
				continue // a root, allocated at its first writer
			}
			if j == 0 && op.InPlace {
				if k := inPlaceInput(n, t, types, refs, lay, i); k >= 0 {
					x := n.Inputs[k]
					s := refs[x][0]
					refs[o] = refs[x]
					s.until = max(s.until, lastOf(o, i))
					lay.arena.Slots[o] = lay.arena.Slots[x]
					lay.inPlace[o] = x
					continue
				}
			}
			s := alloc(size, lastOf(o, i))
			refs[o] = []*storage{s}
			lay.arena.Slots[o] = plan.Slot{Offset: s.off, Bytes: size}
		}
	}
	return lay
}

// ownSlot reports whether v is a value placed in the arena.
func ownSlot(lay *layout, v string) bool {
	_, ok := lay.arena.Slots[v]
	return ok
}

// inPlaceInput returns the index of an input of n that output type t may
// overwrite (an arena value of t's dtype and shape whose storage nothing
// reads after node i), or -1.
func inPlaceInput(n *ir.Node, t ir.Type, types map[string]ir.Type, refs map[string][]*storage, lay *layout, i int) int {
	shape, _ := t.Static()
	for k, x := range n.Inputs {
		if x == "" || !ownSlot(lay, x) || len(refs[x]) != 1 || refs[x][0].until != i {
			continue
		}
		xt := types[x]
		xs, ok := xt.Static()
		if !ok || xt.DType != t.DType || !sameInts(xs, shape) {
			continue
		}
		shared := false // another input reads the same storage differently
		for kk, y := range n.Inputs {
			if kk != k && y != "" && y != x && slices.Contains(refs[y], refs[x][0]) {
				shared = true
			}
		}
		if !shared {
			return k
		}
	}
	return -1
}

// constRest reports whether every input of n but the first is absent or an
// initializer: a View op's output is then fixed by its input 0 alone.
func constRest(g *ir.Graph, n *ir.Node) bool {
	for _, x := range n.Inputs[1:] {
		if x == "" {
			continue
		}
		if _, ok := g.Initializers[x]; !ok {
			return false
		}
	}
	return true
}

// staticNode reports whether every input and output of n has a static type
// that the arena can hold (strings cannot: the arena holds no pointers).
func staticNode(n *ir.Node, types map[string]ir.Type) bool {
	for _, list := range [][]string{n.Inputs, n.Outputs} {
		for _, v := range list {
			if v == "" {
				continue
			}
			t, ok := types[v]
			if !ok || t.DType == tensor.String || t.DType == tensor.Undefined || !t.DType.Supported() {
				return false
			}
			if _, ok := t.Static(); !ok {
				return false
			}
		}
	}
	return true
}

// slotBytes is the aligned size of a value of static type t.
func slotBytes(t ir.Type) int64 {
	shape, _ := t.Static()
	size := int64(tensor.NumElems(shape) * max(1, t.DType.Size()))
	return (size + Alignment - 1) &^ (Alignment - 1)
}

// reads lists the values node n reads: its inputs and, for control flow,
// the outer values its subgraphs use.
func reads(n *ir.Node) []string {
	out := append([]string{}, n.Inputs...)
	for _, a := range n.Attrs {
		for _, sg := range subgraphs(a) {
			out = append(out, ir.FreeVars(sg)...)
		}
	}
	return out
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
