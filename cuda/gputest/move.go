package gputest

import (
	"fmt"
	"math"
	"slices"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

// moveCase is one data-movement operator (Transpose, Slice, Split, Concat,
// Gather by constant indices) on random data: the CPU twin's node and
// inputs, and the copies the GPU engine runs for it (copies[j] reads the
// float input src[j] and writes the output dst[j]; the outputs have the
// shapes outs).
type moveCase struct {
	name    string
	op      string
	version int64
	attrs   []*ir.Attr
	ins     []*tensor.Tensor
	copies  []exact.Copy
	src     []int
	dst     []int
	outs    [][]int
}

// randShape draws a shape of rank r with odd edges (sizes 1 to 7).
func (s *suite) randShape(r int) []int {
	sh := make([]int, r)
	for d := range sh {
		sh[d] = 1 + s.r.Intn(7)
	}
	return sh
}

func i64s(v ...int) *tensor.Tensor {
	d := make([]int64, len(v))
	for i, x := range v {
		d[i] = int64(x)
	}
	return tensor.From(d, len(d))
}

// moveCases draws the suite's data-movement cases: every rank 1 to
// exact.MaxCopyRank, random permutations, slices with negative starts,
// out-of-range ends and negative steps, uneven splits, concats, gathers
// with negative and repeated indices; the data holds NaN, ±Inf, ±0 and
// subnormals (copies keep every bit, NaN payloads included).
func (s *suite) moveCases() ([]moveCase, error) {
	var cs []moveCase
	n := max(s.cfg.Cases, 1)
	for i := range n {
		r := 1 + i%exact.MaxCopyRank
		sh := s.randShape(r)
		x := tensor.From(s.data(tensor.NumElems(sh), 2, 0.2), sh...)

		perm := s.r.Perm(r)
		c, out, err := exact.TransposeCopy(sh, perm)
		if err != nil {
			return nil, err
		}
		cs = append(cs, moveCase{name: fmt.Sprintf("Transpose %v perm %v", sh, perm), op: "Transpose", version: 13,
			attrs: []*ir.Attr{ints("perm", perm...)}, ins: []*tensor.Tensor{x}, copies: []exact.Copy{c}, src: []int{0}, dst: []int{0}, outs: [][]int{out}})

		var st, en, ax, sp []int
		for _, a := range s.r.Perm(r)[:1+s.r.Intn(r)] {
			d := sh[a]
			b, e, step := s.r.Intn(2*d+1)-d, s.r.Intn(2*d+3)-d-1, 1+s.r.Intn(3)
			if s.r.Intn(3) == 0 {
				step = -step
			}
			if s.r.Intn(5) == 0 {
				e = 1 << 30 // past the end: clamped
			}
			st, en, ax, sp = append(st, b), append(en, e), append(ax, a-r*s.r.Intn(2)), append(sp, step)
		}
		toI64 := func(v []int) []int64 {
			o := make([]int64, len(v))
			for i, x := range v {
				o[i] = int64(x)
			}
			return o
		}
		c, out, err = exact.SliceCopy(sh, toI64(st), toI64(en), toI64(ax), toI64(sp))
		if err != nil {
			return nil, err
		}
		cs = append(cs, moveCase{name: fmt.Sprintf("Slice %v starts %v ends %v axes %v steps %v", sh, st, en, ax, sp), op: "Slice", version: 13,
			ins: []*tensor.Tensor{x, i64s(st...), i64s(en...), i64s(ax...), i64s(sp...)}, copies: []exact.Copy{c}, src: []int{0}, dst: []int{0}, outs: [][]int{out}})

		axis := s.r.Intn(r)
		var sizes []int
		for left := sh[axis]; left > 0; {
			k := 1 + s.r.Intn(left)
			sizes, left = append(sizes, k), left-k
		}
		split, outs, err := exact.SplitCopies(sh, axis, sizes)
		if err != nil {
			return nil, err
		}
		mc := moveCase{name: fmt.Sprintf("Split %v axis %d sizes %v", sh, axis, sizes), op: "Split", version: 13,
			attrs: []*ir.Attr{intAttr("axis", axis)}, ins: []*tensor.Tensor{x, i64s(sizes...)}, copies: split, outs: outs}
		for j := range split {
			mc.src, mc.dst = append(mc.src, 0), append(mc.dst, j)
		}
		cs = append(cs, mc)

		k := 1 + s.r.Intn(3)
		shapes := [][]int{sh}
		ins := []*tensor.Tensor{x}
		for range k {
			o := slices.Clone(sh)
			o[axis] = 1 + s.r.Intn(5)
			shapes = append(shapes, o)
			ins = append(ins, tensor.From(s.data(tensor.NumElems(o), 2, 0.2), o...))
		}
		cat, out, err := exact.ConcatCopies(shapes, axis-r*s.r.Intn(2))
		if err != nil {
			return nil, err
		}
		mc = moveCase{name: fmt.Sprintf("Concat %v axis %d", shapes, axis), op: "Concat", version: 13,
			attrs: []*ir.Attr{intAttr("axis", axis)}, ins: ins, copies: cat, outs: [][]int{out}}
		for j := range cat {
			mc.src, mc.dst = append(mc.src, j), append(mc.dst, 0)
		}
		cs = append(cs, mc)

		ishape := s.randShape(s.r.Intn(3))
		idx := make([]int, tensor.NumElems(ishape))
		for j := range idx {
			idx[j] = s.r.Intn(2*sh[axis]) - sh[axis]
		}
		id := make([]int64, len(idx))
		for j, v := range idx {
			id[j] = int64(v)
		}
		gat, out, err := exact.GatherCopies(sh, axis, id, ishape)
		if err != nil {
			return nil, err
		}
		mc = moveCase{name: fmt.Sprintf("Gather %v axis %d indices %v %v", sh, axis, ishape, idx), op: "Gather", version: 13,
			attrs: []*ir.Attr{intAttr("axis", axis)}, ins: []*tensor.Tensor{x, tensor.From(id, ishape...)}, copies: gat, outs: [][]int{out}}
		for range gat {
			mc.src, mc.dst = append(mc.src, 0), append(mc.dst, 0)
		}
		cs = append(cs, mc)
	}
	return cs, nil
}

// cpuMove runs a case's CPU twin: its outputs.
func cpuMove(c moveCase) ([]*tensor.Tensor, error) {
	n := &ir.Node{OpType: c.op, Version: c.version, Attrs: map[string]*ir.Attr{}}
	for _, a := range c.attrs {
		n.Attrs[a.Name] = a
	}
	for i := range c.outs {
		n.Outputs = append(n.Outputs, fmt.Sprintf("y%d", i))
	}
	return runNode(n, c.ins)
}

// hostMove runs a case's copies on the host (exact.Copy.Host, the GPU
// kernel's index arithmetic).
func hostMove(c moveCase) ([][]float32, error) {
	outs := make([][]float32, len(c.outs))
	for j, o := range c.outs {
		outs[j] = make([]float32, tensor.NumElems(o))
	}
	for j, cp := range c.copies {
		if err := cp.Host(f32(c.ins[c.src[j]]), outs[c.dst[j]]); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// moves checks the copy kernel against the CPU's Transpose, Slice, Split,
// Concat and Gather: every bit, NaN payloads included.
func (s *suite) moves() error {
	cases, err := s.moveCases()
	if err != nil {
		return err
	}
	for _, c := range cases {
		want, err := cpuMove(c)
		if err != nil {
			return fmt.Errorf("gputest: %s: %w", c.name, err)
		}
		srcs := make([]uint64, len(c.ins))
		for i, t := range c.ins {
			if t.DType != tensor.Float32 {
				continue
			}
			b, err := s.dev(f32(t))
			if err != nil {
				return err
			}
			defer b.Free()
			srcs[i] = b.Ptr
		}
		for j, o := range c.outs {
			nout := tensor.NumElems(o)
			y, err := s.out(nout)
			if err != nil {
				return err
			}
			for k, cp := range c.copies {
				if c.dst[k] != j {
					continue
				}
				if err := s.e.Copy(nil, cp, srcs[c.src[k]], c.ins[c.src[k]].Len(), y.Ptr, nout); err != nil {
					y.Free()
					return fmt.Errorf("gputest: %s: %w", c.name, err)
				}
			}
			got, err := s.fetch(y, nout)
			y.Free()
			if err != nil {
				return err
			}
			if !slices.Equal(want[j].Shape, o) {
				return fmt.Errorf("gputest: %s: output %d of shape %v, the CPU's %v", c.name, j, o, want[j].Shape)
			}
			s.record(fmt.Sprintf("%s [%d]", c.name, j), got, f32(want[j]), true)
		}
	}
	return nil
}

// runNode runs n through vouch's CPU kernel registry: all its outputs.
func runNode(n *ir.Node, ins []*tensor.Tensor) ([]*tensor.Tensor, error) {
	k, err := builtin.Registry().Lookup(n)
	if err != nil {
		return nil, err
	}
	return k.Run(&kernel.Ctx{}, n, ins)
}

// hostAdd is vx_add_bcast's index arithmetic on the host: y = a + b over
// a Broadcast geometry.
func hostAdd(c exact.Copy, a, b []float32) []float32 {
	y := make([]float32, c.N())
	for i := range y {
		ao, bo := c.Offsets(i)
		y[i] = a[ao] + b[bo]
	}
	return y
}

// bcastCase is a broadcasting Add: operand shapes a and b of one rank or
// two, some axes 1.
type bcastCase struct{ a, b []int }

func (s *suite) bcastCases() []bcastCase {
	cs := []bcastCase{{[]int{1, 5, 128}, []int{3, 5, 128}}, {[]int{2, 3, 4}, []int{4}}, {[]int{1}, []int{2, 3}}, {[]int{3, 1, 5}, []int{1, 4, 1}}}
	for range max(s.cfg.Cases, 1) {
		r := 1 + s.r.Intn(exact.MaxCopyRank)
		out := s.randShape(r)
		a, b := slices.Clone(out), slices.Clone(out)
		for d := range out {
			switch s.r.Intn(4) {
			case 0:
				a[d] = 1
			case 1:
				b[d] = 1
			}
		}
		cs = append(cs, bcastCase{a[s.r.Intn(r):], b})
	}
	return cs
}

// gatherCase is a Gather by run-time indices: data shape, axis, indices.
type gatherCase struct {
	shape  []int
	axis   int
	idx    []int64
	ishape []int
}

func (s *suite) gatherCases() []gatherCase {
	var cs []gatherCase
	for range max(s.cfg.Cases, 1) {
		sh := s.randShape(1 + s.r.Intn(4))
		ax := s.r.Intn(len(sh))
		ish := s.randShape(s.r.Intn(3))
		idx := make([]int64, tensor.NumElems(ish))
		for j := range idx {
			idx[j] = int64(s.r.Intn(2*sh[ax]) - sh[ax])
		}
		cs = append(cs, gatherCase{sh, ax - len(sh)*s.r.Intn(2), idx, ish})
	}
	// An embedding: 1000 rows of 128, 77 token ids.
	idx := make([]int64, 77)
	for j := range idx {
		idx[j] = int64(s.r.Intn(1000))
	}
	return append(cs, gatherCase{[]int{1000, 128}, 0, idx, []int{1, 77}})
}

// binTwin checks a broadcasting kernel against the CPU's op on one case.
func (s *suite) binTwin(op string, c bcastCase, f func(*cuda.Stream, exact.Copy, uint64, int, uint64, int, uint64) error) error {
	a, b := s.data(tensor.NumElems(c.a), 3, 0.05), s.data(tensor.NumElems(c.b), 3, 0.05)
	want, err := cpuOp(op, 14, nil, tensor.From(a, c.a...), tensor.From(b, c.b...))
	if err != nil {
		return err
	}
	g, err := exact.Broadcast(c.a, c.b)
	if err != nil {
		return err
	}
	got, err := s.run(g.N(), [][]float32{a, b}, func(in []uint64, out uint64) error {
		return f(nil, g, in[0], len(a), in[1], len(b), out)
	})
	if err != nil {
		return err
	}
	s.record(fmt.Sprintf("%s %v, %v", op, c.a, c.b), got, f32(want), false)
	return nil
}

// bcasts checks vx_add_bcast against the CPU's broadcasting Add and
// vx_gather against its Gather.
func (s *suite) bcasts() error {
	for _, c := range s.bcastCases() {
		if err := s.binTwin("Add", c, s.e.AddBroadcast); err != nil {
			return err
		}
	}
	// Batched MatMul (attention's products): one product per batch,
	// SGEMMGeneral's batch strides.
	for _, sh := range [][4]int{{2, 3, 5, 7}, {1, 4, 17, 64}, {3, 2, 33, 9}} {
		B, M, K, N := sh[0]*sh[1], sh[2], sh[3], 1+s.r.Intn(40)
		a, b := s.data(B*M*K, 1, 0.02), s.data(B*K*N, 1, 0.02)
		want, err := cpuOp("MatMul", 13, nil, tensor.From(a, sh[0], sh[1], M, K), tensor.From(b, sh[0], sh[1], K, N))
		if err != nil {
			return err
		}
		got, err := s.run(B*M*N, [][]float32{a, b}, func(in []uint64, out uint64) error {
			return s.e.SGEMMGeneral(nil, M, N, K, exact.Mat{Ptr: in[0], RS: int64(K), CS: 1}, exact.Mat{Ptr: in[1], RS: int64(N), CS: 1},
				out, int64(N), B, int64(M*K), int64(K*N), int64(M*N))
		})
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("MatMul batched %dx%d x [%d %d]x[%d %d]", sh[0], sh[1], M, K, K, N), got, f32(want), true)
	}
	// Div by a scalar and by a broadcast operand (attention's scale).
	for _, c := range []bcastCase{{[]int{2, 4, 9, 9}, []int{}}, {[]int{3, 5, 7}, []int{1, 7}}} {
		if err := s.binTwin("Div", c, s.e.DivBroadcast); err != nil {
			return err
		}
	}
	for _, c := range s.gatherCases() {
		x := s.data(tensor.NumElems(c.shape), 2, 0.2)
		want, err := cpuOp("Gather", 13, []*ir.Attr{intAttr("axis", c.axis)}, tensor.From(x, c.shape...), tensor.From(c.idx, c.ishape...))
		if err != nil {
			return err
		}
		ax := c.axis
		if ax < 0 {
			ax += len(c.shape)
		}
		idx, err := exact.GatherIndices(c.idx, c.shape[ax])
		if err != nil {
			return err
		}
		bits := make([]float32, len(idx))
		for i, v := range idx {
			bits[i] = math.Float32frombits(uint32(v))
		}
		got, err := s.run(want.Len(), [][]float32{x, bits}, func(in []uint64, out uint64) error {
			return s.e.Gather(nil, in[0], in[1], out, tensor.NumElems(c.shape[:ax]), len(idx), c.shape[ax], tensor.NumElems(c.shape[ax+1:]))
		})
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("Gather %v axis %d by %d run-time indices", c.shape, c.axis, len(idx)), got, f32(want), true)
	}
	return nil
}

// resizes checks the nearest Resize (engine.ResizeMap, then vx_gather by
// the map) against the CPU's Resize: up and down, every coordinate
// transformation the GPU takes, every nearest_mode.
func (s *suite) resizes() error {
	ctms := []string{"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"}
	modes := []string{"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}
	for i := range max(s.cfg.Cases, 1) {
		sh := []int{1 + s.r.Intn(3), 1 + s.r.Intn(8), 1 + s.r.Intn(40), 1 + s.r.Intn(40)}
		n := &ir.Node{Name: "resize", OpType: "Resize", Version: 19, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{
			"mode":                           {Name: "mode", Kind: ir.AttrString, S: "nearest"},
			"coordinate_transformation_mode": {Name: "coordinate_transformation_mode", Kind: ir.AttrString, S: ctms[i%len(ctms)]},
			"nearest_mode":                   {Name: "nearest_mode", Kind: ir.AttrString, S: modes[s.r.Intn(len(modes))]},
		}}
		consts := []*tensor.Tensor{nil, tensor.From([]float32{1, 1, []float32{0.5, 2, 3, 0.7}[s.r.Intn(4)], []float32{0.5, 2, 1.25}[s.r.Intn(3)]}, 4)}
		x := s.data(tensor.NumElems(sh), 2, 0.2)
		want, err := runNode(n, append([]*tensor.Tensor{tensor.From(x, sh...)}, consts...))
		if err != nil {
			return err
		}
		m, out, err := engine.ResizeMap(n, sh, consts, runNode)
		if err != nil {
			return err
		}
		bits := make([]float32, len(m))
		for j, v := range m {
			bits[j] = math.Float32frombits(uint32(v))
		}
		got, err := s.run(tensor.NumElems(out), [][]float32{x, bits}, func(in []uint64, o uint64) error {
			return s.e.Gather(nil, in[0], in[1], o, 1, len(m), len(x), 1)
		})
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("Resize nearest %v -> %v %s", sh, out, ctms[i%len(ctms)]), got, f32(want[0]), true)
	}
	return nil
}
