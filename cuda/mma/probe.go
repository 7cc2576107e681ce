package mma

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
)

// ProbeSource is the CUDA C of the probe: each warp runs one m16n8k16
// instruction on its problem, loading the fragments in the PTX ISA's
// layout (A row major, B column major, C and D row major) from plain
// arrays, so the hardware's output can be compared element by element with
// a model. Kernels: probe_fp16, probe_bf16 (a, b: 16-bit elements, P
// problems of 256 and 128; c, d: P×128 float32).
const ProbeSource = `
#define PROBE(NAME, TY) \
extern "C" __global__ void NAME(const unsigned short* A, const unsigned short* B, const float* C, float* D, int P) { \
	int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31; \
	if (w >= P) return; \
	const unsigned short* a = A + (long)w * 256; \
	const unsigned short* b = B + (long)w * 128; \
	const float* c = C + (long)w * 128; \
	float* d = D + (long)w * 128; \
	int g = lane >> 2, t = lane & 3; \
	unsigned a0 = a[g*16 + 2*t] | (unsigned)a[g*16 + 2*t + 1] << 16; \
	unsigned a1 = a[(g+8)*16 + 2*t] | (unsigned)a[(g+8)*16 + 2*t + 1] << 16; \
	unsigned a2 = a[g*16 + 2*t + 8] | (unsigned)a[g*16 + 2*t + 9] << 16; \
	unsigned a3 = a[(g+8)*16 + 2*t + 8] | (unsigned)a[(g+8)*16 + 2*t + 9] << 16; \
	unsigned b0 = b[(2*t)*8 + g] | (unsigned)b[(2*t+1)*8 + g] << 16; \
	unsigned b1 = b[(2*t+8)*8 + g] | (unsigned)b[(2*t+9)*8 + g] << 16; \
	float c0 = c[g*8 + 2*t], c1 = c[g*8 + 2*t + 1], c2 = c[(g+8)*8 + 2*t], c3 = c[(g+8)*8 + 2*t + 1]; \
	float d0, d1, d2, d3; \
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TY "." TY ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};" \
		: "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3) \
		: "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c0), "f"(c1), "f"(c2), "f"(c3)); \
	d[g*8 + 2*t] = d0; d[g*8 + 2*t + 1] = d1; d[(g+8)*8 + 2*t] = d2; d[(g+8)*8 + 2*t + 1] = d3; \
}
PROBE(probe_fp16, "f16")
PROBE(probe_bf16, "bf16")
`

// Problems are P seeded m16n8k16 problems: A (P×256), B (P×128, k major)
// and C (P×128). A third are uniform in a narrow exponent range, a third
// spread over a wide one (many products far below the largest, which the
// alignment drops), and a third cancel: C is minus the row's exact sum
// rounded to float32, so the result lives in the bits the models differ
// in. A few problems of small integers (exact in every model) check the
// fragment layout.
type Problems struct {
	F    Format
	P    int
	A, B []uint16
	C    []float32
}

// NewProblems draws P problems of format f from seed.
func NewProblems(f Format, p int, seed uint64) *Problems {
	r := rand.New(rand.NewPCG(seed, uint64(f)+1))
	pr := &Problems{F: f, P: p, A: make([]uint16, p*256), B: make([]uint16, p*128), C: make([]float32, p*128)}
	elem := func(lo, hi int) uint16 {
		for {
			v := float32(math.Ldexp(1+r.Float64(), lo+r.IntN(hi-lo+1)))
			if r.IntN(2) == 0 {
				v = -v
			}
			h := FromFloat32(f, v)
			if Value(f, h) != 0 && !math.IsInf(Value(f, h), 0) {
				return h
			}
		}
	}
	for q := 0; q < p; q++ {
		a, b, c := pr.A[q*256:q*256+256], pr.B[q*128:q*128+128], pr.C[q*128:q*128+128]
		kind := q % 3
		if q < 8 {
			kind = 3
		}
		lo, hi := -6, 6
		if kind == 1 {
			lo, hi = -14, 7
			if f == BF16 {
				lo, hi = -40, 20
			}
		}
		for i := range a {
			if kind == 3 {
				a[i] = FromFloat32(f, float32(r.IntN(9)-4))
			} else {
				a[i] = elem(lo, hi)
			}
		}
		for i := range b {
			if kind == 3 {
				b[i] = FromFloat32(f, float32(r.IntN(9)-4))
			} else {
				b[i] = elem(lo, hi)
			}
		}
		for i := 0; i < 16; i++ {
			for n := 0; n < 8; n++ {
				switch kind {
				case 2:
					s := 0.0
					for k := 0; k < 16; k++ {
						s += Value(f, a[i*16+k]) * Value(f, b[k*8+n])
					}
					c[i*8+n] = -float32(s) // float64 sum of 16 exact products: exact here
				case 3:
					c[i*8+n] = float32(r.IntN(101) - 50)
				default:
					c[i*8+n] = float32(math.Ldexp(2*r.Float64()-1, r.IntN(16)))
				}
			}
		}
	}
	return pr
}

// Emulate returns model m's d for every problem (P×128).
func (pr *Problems) Emulate(m Model) ([]float32, error) {
	d := make([]float32, pr.P*128)
	errs := make([]error, pr.P)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for q := w; q < pr.P; q += workers {
				out, err := m.MMA16816(pr.F, pr.A[q*256:q*256+256], pr.B[q*128:q*128+128], pr.C[q*128:q*128+128])
				if err != nil {
					errs[q] = fmt.Errorf("problem %d: %w", q, err)
					continue
				}
				copy(d[q*128:], out)
			}
		}(w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Fit is one model's agreement with the hardware's outputs.
type Fit struct {
	Model  Model
	Differ int // outputs whose bits differ
	Layout int // differing outputs among the integer problems (exact in every model)
}

// FitModels compares every candidate with the hardware's d, best first.
func (pr *Problems) FitModels(d []float32, cands []Model) ([]Fit, error) {
	if len(d) != pr.P*128 {
		return nil, fmt.Errorf("mma: %d outputs for %d problems", len(d), pr.P)
	}
	var fits []Fit
	for _, m := range cands {
		e, err := pr.Emulate(m)
		if err != nil {
			return nil, err
		}
		f := Fit{Model: m}
		for i := range e {
			if math.Float32bits(e[i]) != math.Float32bits(d[i]) {
				f.Differ++
				if i < 8*128 {
					f.Layout++
				}
			}
		}
		fits = append(fits, f)
	}
	sort.SliceStable(fits, func(i, j int) bool { return fits[i].Differ < fits[j].Differ })
	return fits, nil
}

// NewEdgeProblems draws P problems of format f from seed whose operands
// reach the edges the uniform problems avoid: subnormal inputs, zeros,
// signed-zero accumulators and products whose exponent sums lie far below
// the accumulator's.
func NewEdgeProblems(f Format, p int, seed uint64) *Problems {
	r := rand.New(rand.NewPCG(seed, uint64(f)+101))
	pr := &Problems{F: f, P: p, A: make([]uint16, p*256), B: make([]uint16, p*128), C: make([]float32, p*128)}
	mbits, emin := 10, -14
	if f == BF16 {
		mbits, emin = 7, -126
	}
	elem := func() uint16 {
		switch r.IntN(6) {
		case 0:
			return uint16(r.IntN(1<<mbits)) | uint16(r.IntN(2))<<15 // subnormal or zero
		case 1:
			return 0
		}
		e := emin + r.IntN(12)
		if r.IntN(3) == 0 {
			e = r.IntN(9) - 4
		}
		v := float32(math.Ldexp(1+r.Float64(), e))
		if r.IntN(2) == 0 {
			v = -v
		}
		return FromFloat32(f, v)
	}
	for i := range pr.A {
		pr.A[i] = elem()
	}
	for i := range pr.B {
		pr.B[i] = elem()
	}
	for i := range pr.C {
		switch r.IntN(4) {
		case 0:
			pr.C[i] = 0
		case 1:
			pr.C[i] = float32(math.Copysign(0, -1))
		default:
			pr.C[i] = float32(math.Ldexp(2*r.Float64()-1, r.IntN(40)-30))
		}
	}
	return pr
}
