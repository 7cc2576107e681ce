package gputest

import (
	"math/rand"
	"testing"
)

// The random cases are valid operators for the CPU twin (a generator bug
// would fail on the GPU machine, where time is scarce): every Conv case
// the suite draws runs through the CPU registry, for many seeds.
func TestConvCasesValid(t *testing.T) {
	for seed := int64(0); seed < 40; seed++ {
		s := &suite{cfg: Config{Cases: 48}, r: rand.New(rand.NewSource(seed))}
		for _, c := range s.convCases() {
			if c.H*c.W*c.C*c.N > 1<<16 {
				continue // the fixed resnet18 shapes: valid by construction, slow on this CPU
			}
			c.OH = (c.H+2*c.PH-((c.KH-1)*c.DH+1))/c.SH + 1
			c.OW = (c.W+2*c.PW-((c.KW-1)*c.DW+1))/c.SW + 1
			x := make([]float32, c.N*c.C*c.H*c.W)
			w := make([]float32, c.M*c.C/c.G*c.KH*c.KW)
			_, shape, err := cpuConv(c, x, w, nil, nil)
			if err != nil {
				t.Fatalf("seed %d: case %+v: %v", seed, c, err)
			}
			if shape[2] != c.OH || shape[3] != c.OW {
				t.Fatalf("seed %d: case %+v: CPU output %v, suite geometry %dx%d", seed, c, shape, c.OH, c.OW)
			}
		}
	}
}
