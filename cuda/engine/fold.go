package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vouchml/vouch/cuda/attn"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/plan"
)

// Folded layout moves (issue 19, BERT): in a fast plan, the Split of the
// QKV product, the Reshapes and the Transposes between it and a fused
// attention's q, kt and v, and the Transpose of the attention's output,
// copy nothing. They are placed as foldKernel and make strided views
// (val.strides): the Split's parts are column ranges of its input, a
// Reshape splits the last axis, a Transpose permutes the strides; the
// attention kernel reads its operands and writes its output through those
// strides (attn.Layout). The values a view stands for are the ones the
// copies would have made, element for element: no operation changes.
// Only the fused attention reads a view (PlaceFast folds a chain only
// when each value in it has that one reader); any other reader of one
// fails the run, naming the value.

// foldKernel is a folded move's placement.
const foldKernel = FoldKernel

// FoldKernel is the placement kernel of a folded move.
const FoldKernel = "view(attention)"

// consumers counts each value's readers in g (a graph output counts as
// one more).
func consumers(g *ir.Graph) map[string][]*ir.Node {
	c := map[string][]*ir.Node{}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in != "" {
				c[in] = append(c[in], n)
			}
		}
	}
	for _, o := range g.Outputs {
		c[o.Name] = append(c[o.Name], nil)
	}
	return c
}

// foldAttention places as foldKernel the moves around each fused
// attention of out (PlaceFast's placement of g) that its addressing can
// take instead.
func foldAttention(g *ir.Graph, types map[string]ir.Type, out []plan.Placement) {
	idx := map[*ir.Node]int{}
	prod := map[string]*ir.Node{}
	for i, n := range g.Nodes {
		idx[n] = i
		for _, o := range n.Outputs {
			prod[o] = n
		}
	}
	cons := consumers(g)
	only := func(v string, n *ir.Node) bool { return len(cons[v]) == 1 && cons[v][0] == n }
	isPerm := func(n *ir.Node, perm []int) bool {
		return n != nil && n.OpType == "Transpose" && len(n.Inputs) == 1 && out[idx[n]].Backend == plan.BackendCUDA &&
			out[idx[n]].Kernel == "vx_copy" && slices.Equal(ints(n, "perm"), perm)
	}
	var split = map[*ir.Node]int{} // Splits and how many of their outputs fold
	for i, n := range g.Nodes {
		if !strings.Contains(out[i].Kernel, ".attention(") || out[i].Backend != plan.BackendCUDA {
			continue
		}
		sp, err := attn.Parse(n)
		if err != nil {
			continue
		}
		for _, op := range []struct {
			in   int
			perm []int
		}{{sp.Q, []int{0, 2, 1, 3}}, {sp.Kt, []int{0, 2, 3, 1}}, {sp.V, []int{0, 2, 1, 3}}} {
			t := prod[n.Input(op.in)]
			if !isPerm(t, op.perm) || !only(t.Outputs[0], n) {
				continue
			}
			out[idx[t]].Kernel = foldKernel
			r := prod[t.Input(0)]
			if r == nil || r.OpType != "Reshape" || out[idx[r]].Kernel != "view" || !only(r.Outputs[0], t) || !splitsLast(types, r) {
				continue
			}
			if sn := prod[r.Input(0)]; sn != nil && sn.OpType == "Split" && out[idx[sn]].Kernel == "vx_copy" && only(r.Input(0), r) && lastAxis(types, sn) {
				split[sn]++
			}
		}
		// The output: its one reader a Transpose back to [B][S][H][D].
		if c := cons[n.Outputs[0]]; len(c) == 1 && isPerm(c[0], []int{0, 2, 1, 3}) {
			out[idx[c[0]]].Kernel = foldKernel
		}
	}
	// A Split folds when each of its outputs is a folded chain's.
	for sn, k := range split {
		if k == len(sn.Outputs) {
			out[idx[sn]].Kernel = foldKernel
		}
	}
	// A folded Transpose whose input stays a contiguous copy is a view of
	// a contiguous value: it still copies nothing. A Reshape left between
	// a Split that copies and a folded Transpose reads a contiguous value.
}

// splitsLast reports whether Reshape r may split its input's last axis
// in two and keep the others: rank r to r+1 (the target is often computed,
// so its dimensions are unknown at build time); when the output's
// dimensions are known they must do that. The run checks the shapes
// (reshapeView) and fails, naming the layer, where they do not.
func splitsLast(types map[string]ir.Type, r *ir.Node) bool {
	a, ok1 := types[r.Input(0)]
	b, ok2 := types[r.Outputs[0]]
	if !ok1 || !ok2 || !a.RankKnown || !b.RankKnown || len(b.Shape) != len(a.Shape)+1 || len(a.Shape) < 1 {
		return false
	}
	n := len(a.Shape)
	for i := 0; i < n-1; i++ {
		if a.Shape[i].Known() && b.Shape[i].Known() && a.Shape[i].Value != b.Shape[i].Value {
			return false
		}
	}
	l, h, d := a.Shape[n-1], b.Shape[n-1], b.Shape[n]
	return !l.Known() || !h.Known() || !d.Known() || l.Value == h.Value*d.Value
}

// lastAxis reports whether Split sn splits its input's last axis.
func lastAxis(types map[string]ir.Type, sn *ir.Node) bool {
	t, ok := types[sn.Input(0)]
	if !ok || !t.RankKnown {
		return false
	}
	ax := int(sn.Int("axis", 0))
	return ax == -1 || ax == len(t.Shape)-1
}

// contiguous is the element strides of a contiguous value of shape sh.
func contiguous(sh []int) []int {
	st := make([]int, len(sh))
	acc := 1
	for i := len(sh) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= sh[i]
	}
	return st
}

// view returns a value's device address, shape and strides (a contiguous
// value's own).
func (s *state) view(name string) (uint64, []int, []int, error) {
	if v := s.vals[name]; v != nil && v.strides != nil {
		return v.ptr, v.shape, v.strides, nil
	}
	p, sh, err := s.dev(name)
	if err != nil {
		return 0, nil, nil, err
	}
	return p, sh, contiguous(sh), nil
}

// setView records a view of a value (nil strides when they are a
// contiguous value's).
func (s *state) setView(name string, ptr uint64, shape, strides []int) {
	v := &val{ptr: ptr, shape: shape}
	if !slices.Equal(strides, contiguous(shape)) {
		v.strides = strides
	}
	s.vals[name] = v
}

// fold runs a layer placed as foldKernel: a view, no copy.
func (s *state) fold(n *ir.Node) error {
	p, sh, st, err := s.view(n.Input(0))
	if err != nil {
		return err
	}
	switch n.OpType {
	case "Transpose":
		perm := ints(n, "perm")
		if len(perm) != len(sh) {
			return fmt.Errorf("folded Transpose of perm %v for a rank-%d value", perm, len(sh))
		}
		ns, nt := make([]int, len(sh)), make([]int, len(sh))
		for i, a := range perm {
			if a < 0 || a >= len(sh) {
				return fmt.Errorf("folded Transpose of perm %v", perm)
			}
			ns[i], nt[i] = sh[a], st[a]
		}
		s.setView(n.Outputs[0], p, ns, nt)
	case "Split":
		ax := int(n.Int("axis", 0))
		if ax < 0 {
			ax += len(sh)
		}
		if ax != len(sh)-1 {
			return fmt.Errorf("folded Split along axis %d of a rank-%d value (the last axis only)", ax, len(sh))
		}
		sizes, err := s.splitSizes(n, sh)
		if err != nil {
			return err
		}
		if len(sizes) != len(n.Outputs) {
			return fmt.Errorf("folded Split into %d parts for %d outputs", len(sizes), len(n.Outputs))
		}
		off := 0
		for j, k := range sizes {
			ns := slices.Clone(sh)
			ns[ax] = k
			s.setView(n.Outputs[j], p+uint64(off*st[ax]*4), ns, st)
			off += k
		}
		if off != sh[ax] {
			return fmt.Errorf("folded Split of %d into %v", sh[ax], sizes)
		}
	default:
		return fmt.Errorf("%s placed as %s", n.OpType, foldKernel)
	}
	return nil
}

// reshapeView is Reshape of a strided view to out: the last axis split in
// two (a folded chain's [B][S][H*D] to [B][S][H][D]), the others kept.
func (s *state) reshapeView(n *ir.Node, v *val, out []int) error {
	sh, st := v.shape, v.strides
	r := len(sh)
	if len(out) != r+1 || !slices.Equal(out[:r-1], sh[:r-1]) || out[r-1]*out[r] != sh[r-1] {
		return fmt.Errorf("Reshape of a folded view %v to %v (the last axis split in two only)", sh, out)
	}
	nt := append(slices.Clone(st[:r-1]), out[r]*st[r-1], st[r-1])
	s.setView(n.Outputs[0], v.ptr, out, nt)
	return nil
}

// attnOperands reads a fused attention's operands as views: their addresses
// and their part of the kernel's layout.
func (s *state) attnOperands(n *ir.Node, sp attn.Spec) (q, kt, v uint64, qs, kts, vs []int, lay attn.Layout, err error) {
	one := func(i int, dst *[4]int) (uint64, []int, error) {
		if i < 0 || i >= len(n.Inputs) {
			return 0, nil, fmt.Errorf("attention input %d of %d", i, len(n.Inputs))
		}
		p, sh, st, err := s.view(n.Input(i))
		if err != nil {
			return 0, nil, err
		}
		if len(sh) < 2 || len(sh) > 4 {
			return p, sh, nil // Geometry refuses it
		}
		s4 := append([]int{0, 0, 0, 0}[:4-len(st)], st...)
		copy(dst[:], s4)
		return p, sh, nil
	}
	if q, qs, err = one(sp.Q, &lay.Q); err != nil {
		return
	}
	if kt, kts, err = one(sp.Kt, &lay.Kt); err != nil {
		return
	}
	v, vs, err = one(sp.V, &lay.V)
	return
}

// attnOut allocates a fused attention's output y of shape qs (B, H, S, D)
// and returns its address and strides: contiguous, or, when its one
// reader is a folded Transpose to (B, S, H, D), laid out as that reader's
// contiguous output.
func (s *state) attnOut(n *ir.Node, qs []int) (uint64, [4]int, error) {
	y, err := s.out(n.Outputs[0], qs)
	if err != nil {
		return 0, [4]int{}, err
	}
	st := contiguous(qs)
	if s.pr.foldedOut[n] && len(qs) == 4 {
		H, S, D := qs[1], qs[2], qs[3]
		st = []int{S * H * D, D, H * D, 1}
		s.setView(n.Outputs[0], y, qs, st)
	}
	var r [4]int
	copy(r[:], append([]int{0, 0, 0, 0}[:4-len(st)], st...))
	return y, r, nil
}

// foldedOutputs marks the layers whose output's one reader is a folded
// Transpose (the fused attentions that write in its output's layout).
func foldedOutputs(g *ir.Graph, kernel map[*ir.Node]string) map[*ir.Node]bool {
	prod := map[string]*ir.Node{}
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			prod[o] = n
		}
	}
	m := map[*ir.Node]bool{}
	for _, n := range g.Nodes {
		if kernel[n] == foldKernel && n.OpType == "Transpose" {
			if p := prod[n.Input(0)]; p != nil && p.OpType == "Attention" {
				m[p] = true
			}
		}
	}
	return m
}
