package compile

import (
	"fmt"
	"slices"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// foldChannelShuffle rewrites ShuffleNet's channel shuffle of a
// concatenation,
//
//	x = Concat(x_1..x_g, axis 1)          [N, g·c, S...] (each x_j [N, c, S...])
//	r = Reshape(x, [N, g, c, S'...])
//	t = Transpose(r, perm [0, 2, 1, 3, ...])  [N, c, g, S'...]
//
// as one concatenation in the transposed layout: each x_j viewed as
// [N, c, 1, S'...] (a Reshape, which the executor binds to x_j's storage)
// and concatenated on axis 2 gives t's elements in t's order. Two copies of
// every element (the Concat, then the Transpose) become one; the elements
// and their order are t's, so the bits are unchanged. (shufflenet_v2: 16
// channel shuffles, each a Concat and a Transpose of the whole feature
// map; the Transposes took 8% of the model at batch 1.)
func foldChannelShuffle(s *state) error {
	g := s.g
	g.Types = map[string]ir.Type{}
	if err := ir.Infer(g, s.reg, nil); err != nil {
		return err
	}
	m := newMatcher(g)
	removed := map[*ir.Node]bool{}
	added := map[*ir.Node][]*ir.Node{} // a removed Concat -> the nodes that replace it
	for _, c := range g.Nodes {
		if removed[c] || c.Domain != "" || c.OpType != "Concat" || len(c.Inputs) < 2 || len(c.Outputs) != 1 {
			continue
		}
		r := m.only(c.Outputs[0], "Reshape")
		if r == nil {
			continue
		}
		t := m.only(r.Outputs[0], "Transpose")
		if t == nil || isGraphOutput(g, t.Outputs[0]) {
			continue
		}
		nodes, ok := shuffleConcat(g, c, r, t)
		if !ok {
			continue
		}
		removed[c], removed[r], removed[t] = true, true, true
		added[c] = nodes
		var origin []string
		for _, p := range []*ir.Node{c, r, t} {
			origin = append(origin, s.origin[p.Name]...)
		}
		for _, n := range nodes {
			s.origin[n.Name] = origin
		}
		s.fused("folded", map[string]any{"layer": nodes[len(nodes)-1].Name, "from": origin, "kind": "channel-shuffle", "groups": len(c.Inputs)})
	}
	var out []*ir.Node
	for _, n := range g.Nodes {
		if nodes, ok := added[n]; ok {
			out = append(out, nodes...)
			continue
		}
		if !removed[n] {
			out = append(out, n)
		}
	}
	g.Nodes = out
	return nil
}

// shuffleConcat checks that Concat c, Reshape r and Transpose t are a
// channel shuffle of c's g inputs (each c channels) and returns the
// Reshapes and the axis-2 Concat that compute t's output instead.
func shuffleConcat(g *ir.Graph, c, r, t *ir.Node) ([]*ir.Node, bool) {
	xt, ok := batchStatic(g.Types[c.Outputs[0]])
	if !ok || len(xt) < 2 || g.Types[c.Outputs[0]].DType == tensor.String {
		return nil, false
	}
	batch := g.Types[c.Outputs[0]].Shape[0]
	axis := c.Int("axis", 0)
	if axis < 0 {
		axis += int64(len(xt))
	}
	if axis != 1 {
		return nil, false
	}
	gr := len(c.Inputs)
	if xt[1]%gr != 0 {
		return nil, false
	}
	ch := xt[1] / gr
	for i, x := range c.Inputs {
		st, ok := batchStatic(g.Types[x])
		if !ok || len(st) != len(xt) || st[1] != ch || g.Types[x].Shape[0] != batch || slices.Index(c.Inputs, x) != i {
			return nil, false // inputs of c channels each, none twice
		}
	}
	rt, ok := batchStatic(g.Types[r.Outputs[0]])
	if !ok || len(rt) < 3 || g.Types[r.Outputs[0]].Shape[0] != batch || rt[1] != gr || rt[2] != ch {
		return nil, false
	}
	perm := t.Ints("perm", nil)
	if len(perm) != len(rt) || perm[0] != 0 || perm[1] != 2 || perm[2] != 1 {
		return nil, false
	}
	for i := 3; i < len(perm); i++ {
		if perm[i] != int64(i) {
			return nil, false
		}
	}
	// x_j viewed as [N, c, 1, S'...] (N copied: 0), concatenated on axis 2.
	view := make([]int64, len(rt))
	view[0], view[1], view[2] = 0, int64(ch), 1
	for i := 3; i < len(rt); i++ {
		view[i] = int64(rt[i])
	}
	shapeName := fresh(g, c.Name+"/shuffle_shape")
	g.Initializers[shapeName] = tensor.From(view, len(view))
	var nodes []*ir.Node
	cat := &ir.Node{Name: c.Name, OpType: "Concat", Version: c.Version, Outputs: []string{t.Outputs[0]},
		Attrs: map[string]*ir.Attr{"axis": {Name: "axis", Kind: ir.AttrInt, I: 2}}}
	for j, x := range c.Inputs {
		v := fresh(g, fmt.Sprintf("%s/shuffle_view_%d", c.Name, j))
		nodes = append(nodes, &ir.Node{Name: v, OpType: "Reshape", Version: 14, Inputs: []string{x, shapeName}, Outputs: []string{v}, Attrs: map[string]*ir.Attr{}})
		cat.Inputs = append(cat.Inputs, v)
	}
	return append(nodes, cat), true
}

// batchStatic returns t's dimensions when all but the first (the batch,
// which may be symbolic; it is returned as 0) are known.
func batchStatic(t ir.Type) ([]int, bool) {
	if !t.RankKnown || len(t.Shape) == 0 {
		return nil, false
	}
	out := make([]int, len(t.Shape))
	for i, d := range t.Shape {
		switch {
		case d.Known():
			out[i] = int(d.Value)
		case i == 0 && d.Param != "":
		default:
			return nil, false
		}
	}
	return out, true
}

// fresh returns name, or name with underscores added, such that no value
// or node of g has it.
func fresh(g *ir.Graph, name string) string {
	taken := func(v string) bool {
		if _, ok := g.Initializers[v]; ok {
			return true
		}
		if _, ok := g.Types[v]; ok {
			return true
		}
		for _, n := range g.Nodes {
			if n.Name == v {
				return true
			}
		}
		return false
	}
	for taken(name) {
		name += "_"
	}
	return name
}
