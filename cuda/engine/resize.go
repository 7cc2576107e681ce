package engine

import (
	"fmt"
	"math"
	"slices"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// ResizeMap is a nearest-mode Resize's gather map for an input of shape:
// for every output element the flat index of the input element it copies.
// It runs the CPU kernel itself (run: kernel/image's Resize) on the
// input's indices as int64 values: nearest mode copies values, so it
// copies the indices, and the GPU's gather by the map moves the very
// elements the CPU copies (exact by construction, whatever the coordinate
// arithmetic). consts are the node's other inputs (roi, scales, sizes).
func ResizeMap(n *ir.Node, shape []int, consts []*tensor.Tensor, run func(*ir.Node, []*tensor.Tensor) ([]*tensor.Tensor, error)) ([]int32, []int, error) {
	total := tensor.NumElems(shape)
	if total > math.MaxInt32 {
		return nil, nil, fmt.Errorf("Resize of %d elements (the GPU map takes int32 indices)", total)
	}
	ids := make([]int64, total)
	for i := range ids {
		ids[i] = int64(i)
	}
	in := append([]*tensor.Tensor{tensor.From(ids, slices.Clone(shape)...)}, consts...)
	outs, err := run(n, in)
	if err != nil {
		return nil, nil, err
	}
	if len(outs) == 0 || outs[0] == nil {
		return nil, nil, fmt.Errorf("Resize gave no output")
	}
	got, ok := outs[0].Data.([]int64)
	if !ok {
		return nil, nil, fmt.Errorf("Resize of int64 indices gave %v", outs[0].DType)
	}
	m := make([]int32, len(got))
	for i, v := range got {
		if v < 0 || v >= int64(total) {
			return nil, nil, fmt.Errorf("Resize output %d reads no input element (%d)", i, v)
		}
		m[i] = int32(v)
	}
	return m, outs[0].Shape, nil
}

// resize runs a nearest-mode Resize: its map (ResizeMap, computed on the
// host once per input shape and lane, kept in the shape's buffers) and
// the gather kernel over the flat input.
func (s *state) resize(n *ir.Node) error {
	x, sh, err := s.dev(n.Inputs[0])
	if err != nil {
		return err
	}
	out, cached := s.b.maps[n]
	var m []int32
	if !cached {
		consts := make([]*tensor.Tensor, len(n.Inputs)-1)
		for i, name := range n.Inputs[1:] {
			if name == "" {
				continue
			}
			if consts[i], err = s.host(name); err != nil {
				return err
			}
		}
		run := func(n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) { return s.pr.cpu(s.ctx, n, in, nil) }
		if m, out, err = ResizeMap(n, sh, consts, run); err != nil {
			return err
		}
	}
	nm := tensor.NumElems(out)
	mb, err := s.alloc(nm)
	if err != nil {
		return err
	}
	if !cached {
		bits := int32Words(m)
		if err := s.l.toDevice(mb.Ptr, bits); err != nil {
			return err
		}
		if s.b.maps == nil {
			s.b.maps = map[*ir.Node][]int{}
		}
		s.b.maps[n] = out
	}
	y, err := s.out(n.Outputs[0], out)
	if err != nil {
		return err
	}
	return s.pr.e.Gather(s.l.st, x, mb.Ptr, y, 1, nm, tensor.NumElems(sh), 1)
}
