package compile

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// foldShapes replaces shape computations that static dimensions decide:
// a Shape whose selected dimensions are all known becomes a constant, and
// so does a Gather of one known dimension out of a Shape (batch and
// sequence stay dynamic; hidden sizes and head counts become constants).
// The next fold-constants pass then folds what depended on them.
func foldShapes(s *state) error {
	g := s.g
	g.Types = map[string]ir.Type{}
	if err := ir.Infer(g, s.reg, nil); err != nil {
		return err
	}
	shapeOf := map[string]ir.Type{} // Shape output -> its input's type, when the Shape takes all dims
	var keep []*ir.Node
	for _, n := range g.Nodes {
		if n.Domain != "" {
			keep = append(keep, n)
			continue
		}
		switch n.OpType {
		case "Shape":
			t := g.Types[n.Input(0)]
			if !t.RankKnown {
				break
			}
			start, end := normRange(n.Int("start", 0), n.Int("end", int64(len(t.Shape))), len(t.Shape))
			if n.Version < 15 {
				start, end = 0, len(t.Shape)
			}
			if start == 0 && end == len(t.Shape) {
				shapeOf[n.Outputs[0]] = t
			}
			dims := make([]int64, 0, end-start)
			known := true
			for _, d := range t.Shape[start:end] {
				known = known && d.Known()
				dims = append(dims, d.Value)
			}
			if !known || isGraphOutput(g, n.Outputs[0]) {
				break
			}
			g.Initializers[n.Outputs[0]] = tensor.From(dims, len(dims))
			s.foldedConst(map[string]any{"node": n.Name, "op": "Shape", "value": dims})
			continue
		case "Gather":
			t, ok := shapeOf[n.Input(0)]
			idx, isConst := g.Initializers[n.Input(1)]
			if !ok || !isConst || idx.Len() != 1 || n.Int("axis", 0) != 0 || isGraphOutput(g, n.Outputs[0]) {
				break
			}
			iv, err := idx.Int64s()
			if err != nil {
				break
			}
			i := int(iv[0])
			if i < 0 {
				i += len(t.Shape)
			}
			if i < 0 || i >= len(t.Shape) || !t.Shape[i].Known() {
				break
			}
			v := t.Shape[i].Value
			var out *tensor.Tensor
			if len(idx.Shape) == 0 {
				out = tensor.Scalar(v)
			} else {
				out = tensor.From([]int64{v}, idx.Shape...)
			}
			g.Initializers[n.Outputs[0]] = out
			s.foldedConst(map[string]any{"node": n.Name, "op": "Gather(Shape)", "dimension": i, "value": v})
			continue
		}
		keep = append(keep, n)
	}
	g.Nodes = keep
	return nil
}

func normRange(start, end int64, rank int) (int, int) {
	clamp := func(v int64) int {
		if v < 0 {
			v += int64(rank)
		}
		return int(min(max(v, 0), int64(rank)))
	}
	s, e := clamp(start), clamp(end)
	if e < s {
		e = s
	}
	return s, e
}
