package gputest

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// The copies the GPU runs for Transpose, Slice, Split, Concat and Gather
// (exact.Copy geometries, performed with the kernel's index arithmetic on
// the host) give the CPU kernels' outputs bit for bit, for many seeds: the
// geometry is right before the GPU machine sees it. The GPU suite then
// checks the kernel against the same CPU outputs.
func TestMoveCopies(t *testing.T) {
	cases := 0
	for seed := int64(0); seed < 30; seed++ {
		s := &suite{cfg: Config{Cases: 12}, r: rand.New(rand.NewSource(seed))}
		cs, err := s.moveCases()
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, c := range cs {
			want, err := cpuMove(c)
			if err != nil {
				t.Fatalf("seed %d: %s: CPU: %v", seed, c.name, err)
			}
			got, err := hostMove(c)
			if err != nil {
				t.Fatalf("seed %d: %s: %v", seed, c.name, err)
			}
			if len(want) != len(got) {
				t.Fatalf("seed %d: %s: %d outputs, the CPU's %d", seed, c.name, len(got), len(want))
			}
			for j := range want {
				if !slices.Equal(want[j].Shape, c.outs[j]) {
					t.Fatalf("seed %d: %s: output %d of shape %v, the CPU's %v", seed, c.name, j, c.outs[j], want[j].Shape)
				}
				w := f32(want[j])
				for i := range w {
					if math.Float32bits(w[i]) != math.Float32bits(got[j][i]) {
						t.Fatalf("seed %d: %s: output %d[%d] %#x, the CPU's %#x", seed, c.name, j, i, math.Float32bits(got[j][i]), math.Float32bits(w[i]))
					}
				}
			}
			cases++
		}
	}
	if cases < 30*12*5 {
		t.Fatalf("%d cases", cases)
	}
}

// vx_add_bcast's geometry (exact.Broadcast, with the kernel's index
// arithmetic on the host) gives the CPU's broadcasting Add, and
// vx_gather's formula over exact.GatherIndices the CPU's Gather, for
// many seeds.
func TestBroadcastAndGather(t *testing.T) {
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	for seed := int64(0); seed < 30; seed++ {
		s := &suite{cfg: Config{Cases: 12}, r: rand.New(rand.NewSource(seed))}
		for _, c := range s.bcastCases() {
			a, b := s.data(tensor.NumElems(c.a), 3, 0.05), s.data(tensor.NumElems(c.b), 3, 0.05)
			want, err := cpuOp("Add", 14, nil, tensor.From(a, c.a...), tensor.From(b, c.b...))
			if err != nil {
				t.Fatalf("seed %d: %v + %v: %v", seed, c.a, c.b, err)
			}
			g, err := exact.Broadcast(c.a, c.b)
			if err != nil || !slices.Equal(g.Dims, want.Shape) {
				t.Fatalf("seed %d: %v + %v: geometry %v, %v; the CPU's shape %v", seed, c.a, c.b, g.Dims, err, want.Shape)
			}
			got := hostAdd(g, a, b)
			for i, w := range f32(want) {
				if !same(got[i], w) {
					t.Fatalf("seed %d: %v + %v: [%d] %v, the CPU's %v", seed, c.a, c.b, i, got[i], w)
				}
			}
		}
		for _, c := range s.gatherCases() {
			x := s.data(tensor.NumElems(c.shape), 2, 0.2)
			want, err := cpuOp("Gather", 13, []*ir.Attr{intAttr("axis", c.axis)}, tensor.From(x, c.shape...), tensor.From(c.idx, c.ishape...))
			if err != nil {
				t.Fatalf("seed %d: %+v: %v", seed, c, err)
			}
			ax := (c.axis + len(c.shape)) % len(c.shape)
			idx, err := exact.GatherIndices(c.idx, c.shape[ax])
			if err != nil {
				t.Fatal(err)
			}
			inner, D := tensor.NumElems(c.shape[ax+1:]), c.shape[ax]
			w := f32(want)
			for i := range w {
				q := i / inner
				j, o := q%len(idx), q/len(idx)
				if v := x[(o*D+int(idx[j]))*inner+i%inner]; math.Float32bits(v) != math.Float32bits(w[i]) {
					t.Fatalf("seed %d: %+v: [%d] %v, the CPU's %v", seed, c, i, v, w[i])
				}
			}
		}
	}
	if _, err := exact.Broadcast([]int{2, 3}, []int{4, 3}); err == nil {
		t.Fatal("[2 3] + [4 3] broadcast")
	}
	if _, err := exact.GatherIndices([]int64{3}, 3); err == nil {
		t.Fatal("index 3 of 3 accepted")
	}
}
