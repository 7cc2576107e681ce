package shape

import (
	"math"
	"math/rand"
	"testing"
)

// TestStridedF32MatchesGeneric moves random float32 tensors through
// stridedF32 and the generic stridedInto, for random shapes, permutations
// (as Transpose builds them) and slices (negative and large steps, size-1
// dimensions), and requires the same bits everywhere.
func TestStridedF32MatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 3000; trial++ {
		r := 1 + rng.Intn(5)
		in := make([]int, r)
		for i := range in {
			in[i] = 1 + rng.Intn(11)
			if rng.Intn(4) == 0 {
				in[i] = 1
			}
		}
		var xs [maxRank]int
		rowStrides(in, &xs)
		n := 1
		for _, v := range in {
			n *= v
		}
		src := make([]float32, n)
		for i := range src {
			src[i] = math.Float32frombits(rng.Uint32())
		}
		shape := make([]int, r)
		st := make([]int, r)
		base := 0
		if trial%2 == 0 {
			// Transpose: a random permutation.
			for i, p := range rng.Perm(r) {
				shape[i], st[i] = in[p], xs[p]
			}
		} else {
			// Slice: a random start and step per axis.
			for i := range in {
				step := 1 + rng.Intn(3)
				if rng.Intn(3) == 0 {
					step = -step
				}
				cnt := 1 + rng.Intn(in[i])
				start := rng.Intn(in[i])
				if step > 0 {
					cnt = min(cnt, (in[i]-start+step-1)/step)
				} else {
					cnt = min(cnt, start/(-step)+1)
				}
				shape[i], st[i] = cnt, xs[i]*step
				base += start * xs[i]
			}
		}
		m := 1
		for _, v := range shape {
			m *= v
		}
		want := make([]float32, m)
		got := make([]float32, m)
		stridedInto(want, src, shape, st, base)
		stridedF32(got, src, shape, st, base)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("shape %v strides %v base %d: element %d is %08x, want %08x", shape, st, base, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
		}
	}
}

// BenchmarkTransposeBert is tiny_bert's attention transposes: [1,64,4,32]
// by [0,2,1,3] and [0,2,3,1].
func BenchmarkTransposeBert(b *testing.B) {
	in := []int{1, 64, 4, 32}
	var xs [maxRank]int
	rowStrides(in, &xs)
	src := make([]float32, 64*128)
	dst := make([]float32, 64*128)
	for _, perm := range [][]int{{0, 2, 1, 3}, {0, 2, 3, 1}} {
		shape := make([]int, 4)
		st := make([]int, 4)
		for i, p := range perm {
			shape[i], st[i] = in[p], xs[p]
		}
		b.Run("generic", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				stridedInto(dst, src, shape, st, 0)
			}
		})
		b.Run("fast", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				stridedF32(dst, src, shape, st, 0)
			}
		})
	}
}
