package attn

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand"

	"github.com/vouchml/vouch/cuda/kernels"
)

// Case is one launch of the fused kernel with its operands: the cases the
// CPU test runs the kernel's source on (under g++) and the device test
// runs on the GPU, both against Reference; the GPU's output digests are
// recorded (testdata/) and replayed by a CPU test.
type Case struct {
	BF      bool
	SMax    int // the kernel's (0: SMax's)
	G       Shape
	Op      int
	Scale   float32
	Q, Kt   []float32
	V, M    []float32 // M nil: no mask
	Special bool      // NaN and infinite operands (see Cases)
}

// Kernel is the case's entry point.
func (c Case) Kernel() string {
	p := kernels.FastF16
	if c.BF {
		p = kernels.FastBF16
	}
	sm := c.SMax
	if sm == 0 {
		sm = SMax(c.G.S)
	}
	return kernels.FastAttnKernel(p, c.G.D, sm)
}

func (c Case) String() string {
	return fmt.Sprintf("%s B%d H%d S%d D%d op %d mask %v", c.Kernel(), c.G.B, c.G.H, c.G.S, c.G.D, c.Op, c.M != nil)
}

// Random draws a case: q, kt of scale 1.5, v of 1, the mask of shape
// mshape (nil: none) with a padded tail (longer for later batches) or a
// causal pattern of -10000.
func Random(r *rand.Rand, bf bool, B, H, S, D, op int, scale float32, mshape []int, causal bool) Case {
	n := B * H * S * D
	c := Case{BF: bf, Op: op, Scale: scale, Q: make([]float32, n), Kt: make([]float32, n), V: make([]float32, n)}
	for i := range c.Q {
		c.Q[i] = float32(r.NormFloat64() * 1.5)
		c.Kt[i] = float32(r.NormFloat64() * 1.5)
		c.V[i] = float32(r.NormFloat64())
	}
	qs, ks := []int{B, H, S, D}, []int{B, H, D, S}
	var err error
	if c.G, err = Geometry(qs, ks, qs, mshape, mshape != nil); err != nil {
		panic(err)
	}
	if mshape != nil {
		m4 := append([]int{1, 1, 1, 1}[:4-len(mshape)], mshape...)
		c.M = make([]float32, m4[0]*m4[1]*m4[2]*m4[3])
		for b := 0; b < m4[0]; b++ {
			for h := 0; h < m4[1]; h++ {
				for i := 0; i < m4[2]; i++ {
					for j := 0; j < m4[3]; j++ {
						o := ((b*m4[1]+h)*m4[2]+i)*m4[3] + j
						switch {
						case causal && j > i:
							c.M[o] = -10000
						case !causal && j >= S-S/4-b*16:
							c.M[o] = -10000
						}
					}
				}
			}
		}
	}
	return c
}

// Cases are the checked launches, drawn from seed: BERT-base's shape
// (12 heads of 64, 128 tokens, a padding mask, ÷8), both kernels, both
// formats, Mul and no scaling, causal and full masks, sequences that are
// no multiple of 16, one sequence on both kernels that hold it, and a case
// of specials (head 0: a NaN in q row 5, every key of row 9 masked with
// -Inf; head 1: an infinite key; a v of 60000).
func Cases(seed int64) []Case {
	r := rand.New(rand.NewSource(seed))
	cases := []Case{
		Random(r, false, 2, 12, 128, 64, DivScale, 8, []int{2, 1, 1, 128}, false),
		Random(r, false, 1, 2, 64, 64, MulScale, 0.125, nil, false),
		Random(r, true, 2, 2, 96, 32, NoScale, 0, []int{96, 96}, true),
		Random(r, false, 3, 1, 48, 32, DivScale, 5.656854, []int{3, 1, 1, 48}, false),
		Random(r, true, 1, 3, 128, 64, DivScale, 8, []int{1, 3, 128, 128}, true),
		Random(r, false, 2, 1, 16, 64, DivScale, 8, []int{2, 1, 1, 16}, false),
		Random(r, false, 2, 2, 37, 64, DivScale, 8, []int{2, 1, 1, 37}, false),
		Random(r, true, 1, 2, 100, 32, MulScale, 0.17677669, []int{100, 100}, true),
	}
	s20 := Random(r, false, 2, 1, 20, 64, DivScale, 8, []int{2, 1, 1, 20}, false)
	s20on128 := s20
	s20on128.SMax = 128
	sp := Random(r, false, 1, 2, 64, 64, DivScale, 8, []int{1, 1, 64, 64}, false)
	sp.Special = true
	sp.Q[5*64+3] = float32(math.NaN())
	sp.Kt[1*64*64+7*64+20] = float32(math.Inf(1))
	for j := 0; j < 64; j++ {
		sp.M[9*64+j] = float32(math.Inf(-1))
	}
	sp.V[100] = 60000
	return append(cases, s20, s20on128, sp)
}

// Digest is the SHA-256 of float32 values' little-endian bits, hex: how
// the device check records a case's output.
func Digest(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		u := math.Float32bits(x)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
