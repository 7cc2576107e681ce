package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// Staged integer inputs. A transformer's integer inputs (token ids, an
// attention mask) reach the device through two kinds of layer only: a
// Gather that reads them as indices (the embeddings) and a Cast to
// float32 (the mask), possibly through host(view) layers and beside
// Shapes that read their shape alone. When every reader of every integer
// graph input is one of those, the program stages the inputs: each run,
// before its layers (and before a graph replay), the host converts them
// for their readers (a Gather's indices checked against the table and
// wrapped as kernel/shape does, uploaded as int32s; a Cast's elements
// uploaded as their bytes) into buffers of the run's shape, which the
// readers then read. No layer reads an integer input on the host any
// more, so such a program runs as CUDA graphs like an all-float one.
//
// Integer values computed from shapes (host(shape): Range's positions,
// ConstantOfShape's token types) are the same in every run of a shape: a
// Gather or Cast that reads one uploads it in the first run of the shape
// and reuses that buffer, unchanged, in the later ones (as Resize's maps).

// stage is one upload before the layers: graph input in (its index in the
// graph's inputs) for the reader layer node, a Gather's indices over an
// axis of D entries or a Cast's elements.
type stage struct {
	in     int
	node   *ir.Node
	gather bool
	D      int
}

// planStages returns the uploads that stage every integer graph input of
// g, or ok false when a reader of one cannot take a staged input (the
// program then reads it on the host and runs no graph). kernel is every
// top-level layer's placed kernel ("" for a CPU layer).
func planStages(g *ir.Graph, kernel map[*ir.Node]string) (stages []stage, ok bool) {
	outputs := map[string]bool{}
	for _, o := range g.Outputs {
		outputs[o.Name] = true
	}
	var walk func(i int, v string) bool
	walk = func(i int, v string) bool {
		if outputs[v] {
			return false
		}
		for _, n := range g.Nodes {
			if hasSubgraph(n) && slices.Contains(ir.Captures(n), v) {
				return false
			}
			for j, in := range n.Inputs {
				if in != v {
					continue
				}
				k := kernel[n]
				switch {
				case k == hostShape && (n.OpType == "Shape" || n.OpType == "Size") && j == 0:
				case k == hostView && j == 0:
					for _, o := range n.Outputs {
						if o != "" && !walk(i, o) {
							return false
						}
					}
				case k == kernels.Gather && n.OpType == "Gather" && j == 1:
					t := g.Initializers[n.Input(0)]
					ax := int(n.Int("axis", 0))
					if t == nil || t.DType != tensor.Float32 {
						return false
					}
					if ax < 0 {
						ax += t.Rank()
					}
					if ax < 0 || ax >= t.Rank() {
						return false
					}
					stages = append(stages, stage{in: i, node: n, gather: true, D: t.Shape[ax]})
				case strings.HasPrefix(k, kernels.Cast+"(") && n.OpType == "Cast" && j == 0:
					stages = append(stages, stage{in: i, node: n})
				default:
					return false
				}
			}
		}
		return true
	}
	for i, in := range g.Inputs {
		switch in.Type.DType {
		case tensor.Float32:
			continue
		case tensor.Int64, tensor.Int32, tensor.Bool:
		default:
			return nil, false
		}
		if !walk(i, in.Name) {
			return nil, false
		}
		for _, st := range stages {
			if st.in == i && st.gather && in.Type.DType == tensor.Bool {
				return nil, false // bools are no indices
			}
		}
	}
	return stages, true
}

// hostOutputs reports whether a graph output of g is computed on the host
// (a host(shape) or host(view) layer's): a graph replay hands out the
// outputs' device buffers, which such a value does not have, so the
// program then runs its layers directly on every run.
func hostOutputs(g *ir.Graph, kernel map[*ir.Node]string) bool {
	for _, n := range g.Nodes {
		if k := kernel[n]; k != hostShape && k != hostView {
			continue
		}
		for _, o := range g.Outputs {
			if slices.Contains(n.Outputs, o.Name) {
				return true
			}
		}
	}
	return false
}

// stageInputs uploads the staged inputs of this run (Program.stages) into
// the run's next buffers, recording each reader's buffer in s.staged.
func (s *state) stageInputs(inputs []*tensor.Tensor) error {
	for _, st := range s.pr.stages {
		t := inputs[st.in]
		var words []float32
		if st.gather {
			var err error
			if words, err = gatherWords(t, st.D); err != nil {
				return fmt.Errorf("engine: input %s for layer %s: %w", s.g.Inputs[st.in].Name, st.node.Name, err)
			}
		} else {
			var err error
			if words, err = CastWords(t); err != nil {
				return fmt.Errorf("engine: input %s: %w", s.g.Inputs[st.in].Name, err)
			}
		}
		b, err := s.alloc(len(words))
		if err != nil {
			return err
		}
		if err := s.l.toDevice(b.Ptr, words); err != nil {
			return err
		}
		if s.staged == nil {
			s.staged = map[*ir.Node]uint64{}
		}
		s.staged[st.node] = b.Ptr
	}
	return nil
}

// runStaged runs a Gather or Cast that reads a staged input or a
// shape-derived integer value (see the comment at the top); ok is false
// for any other layer.
func (s *state) runStaged(n *ir.Node) (ok bool, err error) {
	k := s.pr.kernel[n]
	var src string
	switch {
	case n.OpType == "Gather" && k == kernels.Gather:
		src = n.Input(1)
	case n.OpType == "Cast" && strings.HasPrefix(k, kernels.Cast+"("):
		src = n.Input(0)
	default:
		return false, nil
	}
	ptr, staged := s.staged[n]
	if !staged && !s.pr.shapeDerived(src) {
		return false, nil
	}
	t, err := s.host(src)
	if err != nil {
		return true, err
	}
	if !staged {
		if ptr, err = s.shapeUpload(n, t); err != nil {
			return true, err
		}
	}
	if n.OpType == "Cast" {
		from, ok := castSource(t.DType)
		if !ok || from == exact.FromFloat32 || !castToFloat(n) {
			return true, fmt.Errorf("Cast of %v to other than float32 from a staged input", t.DType)
		}
		y, err := s.out(n.Outputs[0], t.Shape)
		if err != nil {
			return true, err
		}
		return true, s.pr.e.Cast(s.l.st, from, ptr, y, int64(t.Len()))
	}
	x, sh, err := s.dev(n.Inputs[0])
	if err != nil {
		return true, err
	}
	ax := int(n.Int("axis", 0))
	if ax < 0 {
		ax += len(sh)
	}
	if ax < 0 || ax >= len(sh) {
		return true, fmt.Errorf("Gather axis %d of a rank-%d value", ax, len(sh))
	}
	if staged && sh[ax] != s.stagedD(n) {
		return true, fmt.Errorf("Gather over an axis of %d, its indices were checked for %d", sh[ax], s.stagedD(n))
	}
	out := append(append(slices.Clone(sh[:ax]), t.Shape...), sh[ax+1:]...)
	y, err := s.out(n.Outputs[0], out)
	if err != nil {
		return true, err
	}
	return true, s.pr.e.Gather(s.l.st, x, ptr, y, tensor.NumElems(sh[:ax]), t.Len(), sh[ax], tensor.NumElems(sh[ax+1:]))
}

// gatherWords is integer tensor t as a Gather's indices over an axis of D
// entries: checked and wrapped as kernel/shape does (exact.GatherIndices),
// as the words of their int32s.
func gatherWords(t *tensor.Tensor, D int) ([]float32, error) {
	iv, err := t.Int64s()
	if err != nil {
		return nil, err
	}
	idx, err := exact.GatherIndices(iv, D)
	if err != nil {
		return nil, err
	}
	return int32Words(idx), nil
}

// int32Words is idx's bytes as float32 words, for an upload that moves
// them as they are.
func int32Words(idx []int32) []float32 {
	w := make([]float32, len(idx))
	for i, v := range idx {
		w[i] = math.Float32frombits(uint32(v))
	}
	return w
}

// stagedD is the axis length a staged Gather's indices were checked for.
func (s *state) stagedD(n *ir.Node) int {
	for _, st := range s.pr.stages {
		if st.node == n {
			return st.D
		}
	}
	return -1
}

// shapeUpload puts a shape-derived integer value t, read by layer n, in
// the run's next buffer: uploaded by the first run of this shape, reused
// as it is by the later ones (a captured graph reads it there).
func (s *state) shapeUpload(n *ir.Node, t *tensor.Tensor) (uint64, error) {
	var words []float32
	if n.OpType == "Gather" {
		sh, err := s.shapeOf(n.Input(0))
		if err != nil {
			return 0, err
		}
		ax := int(n.Int("axis", 0))
		if ax < 0 {
			ax += len(sh)
		}
		if ax < 0 || ax >= len(sh) {
			return 0, fmt.Errorf("Gather axis %d of a rank-%d value", ax, len(sh))
		}
		if words, err = gatherWords(t, sh[ax]); err != nil {
			return 0, err
		}
	} else {
		var err error
		if words, err = CastWords(t); err != nil {
			return 0, err
		}
	}
	b, err := s.alloc(len(words))
	if err != nil {
		return 0, err
	}
	if _, done := s.b.maps[n]; done {
		return b.Ptr, nil
	}
	if err := s.l.toDevice(b.Ptr, words); err != nil {
		return 0, err
	}
	if s.b.maps == nil {
		s.b.maps = map[*ir.Node][]int{}
	}
	s.b.maps[n] = t.Shape
	return b.Ptr, nil
}

// shapeDerived reports whether value v of the program's graph is an
// integer constant or the output of a host(shape) layer: the same in every
// run of a shape. (A float constant is a weight, on the device already.)
func (pr *Program) shapeDerived(v string) bool {
	if t, ok := pr.g.Initializers[v]; ok {
		return t.DType.IsInt() || t.DType == tensor.Bool
	}
	for _, n := range pr.g.Nodes {
		if slices.Contains(n.Outputs, v) {
			return pr.kernel[n] == hostShape
		}
	}
	return false
}

// DeviceFault reports whether err, from a run, is a failed driver call
// (cuda.Error) rather than the model's own refusal of its inputs (an
// index out of range, a shape its layers do not take), which the CPU
// gives as well. exec's warm-up skips a shape on the latter: with integer
// inputs staged, a BERT's program runs as graphs and is warmed at the
// profile's opt shapes, which a default profile may choose past the
// model's position table.
func (pr *Program) DeviceFault(err error) bool {
	var e *cuda.Error
	return errors.As(err, &e)
}
