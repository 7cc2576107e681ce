package gputest

import (
	"math"
	"math/rand"
	"slices"
	"testing"
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
