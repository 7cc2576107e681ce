package kerneltest_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/kerneltest"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// opCase is one operator call: a node and the shapes of its float32
// inputs (a nil shape is an omitted input); consts are inputs given
// instead of random data (shape attributes, bounds).
type opCase struct {
	op     string
	domain string
	ver    int64
	attrs  map[string]*ir.Attr
	shapes [][]int
	consts map[int]*tensor.Tensor
}

func ints(name string, v ...int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInts, Ints: v} }
func i1(name string, v int64) *ir.Attr      { return &ir.Attr{Name: name, Kind: ir.AttrInt, I: v} }
func str(name, v string) *ir.Attr           { return &ir.Attr{Name: name, Kind: ir.AttrString, S: v} }

func attrs(a ...*ir.Attr) map[string]*ir.Attr {
	m := map[string]*ir.Attr{}
	for _, x := range a {
		m[x.Name] = x
	}
	return m
}

// families lists, per kernel family with vector twins, calls that reach
// its vectorised paths: whole vectors and tails, the GEMM's tiles and its
// few-row forms, every convolution kernel (direct, depthwise rows and flat
// planes, im2col, pointwise), pooling rows, normalisation rows, softmax
// lines, the slice functions.
func families() map[string][]opCase {
	conv := func(x, w []int, a ...*ir.Attr) opCase {
		return opCase{op: "Conv", ver: 11, attrs: attrs(a...), shapes: [][]int{x, w, {w[0]}}}
	}
	return map[string][]opCase{
		"elementwise": {
			{op: "Exp", ver: 13, shapes: [][]int{{3, 37}}},
			{op: "Tanh", ver: 13, shapes: [][]int{{5, 19}}},
			{op: "Sigmoid", ver: 13, shapes: [][]int{{67}}},
			{op: "Erf", ver: 13, shapes: [][]int{{2, 41}}},
			{op: "Gelu", ver: 20, shapes: [][]int{{4, 33}}},
			{op: "Gelu", ver: 20, attrs: attrs(str("approximate", "tanh")), shapes: [][]int{{4, 33}}},
			{op: "Add", ver: 14, shapes: [][]int{{3, 45}, {3, 45}}},
			{op: "Add", ver: 14, shapes: [][]int{{3, 45}, {45}}},
			{op: "Div", ver: 14, shapes: [][]int{{2, 53}, {1}}},
			{op: "Sum", ver: 13, shapes: [][]int{{29}, {29}, {29}}},
		},
		"reduce": {
			{op: "Softmax", ver: 13, shapes: [][]int{{9, 70}}},
			{op: "Softmax", ver: 13, attrs: attrs(i1("axis", 1)), shapes: [][]int{{2, 13, 5}}},
			{op: "LogSoftmax", ver: 13, shapes: [][]int{{5, 130}}},
		},
		"gemm": {
			{op: "MatMul", ver: 13, shapes: [][]int{{37, 53}, {53, 41}}},
			{op: "MatMul", ver: 13, shapes: [][]int{{3, 300}, {300, 129}}},
			{op: "MatMul", ver: 13, shapes: [][]int{{2, 13, 64}, {64, 96}}},
			{op: "MatMul", ver: 13, shapes: [][]int{{2, 7, 16}, {2, 16, 9}}},
			{op: "Gemm", ver: 13, attrs: attrs(i1("transB", 1)), shapes: [][]int{{4, 70}, {33, 70}, {33}}},
			{op: "Gemm", ver: 13, shapes: [][]int{{64, 128}, {128, 96}, {96}}},
		},
		"conv": {
			conv([]int{1, 5, 17, 19}, []int{7, 5, 3, 3}, ints("pads", 1, 1, 1, 1)),
			conv([]int{2, 16, 12, 12}, []int{32, 16, 3, 3}, ints("pads", 1, 1, 1, 1), ints("strides", 2, 2)),
			conv([]int{1, 16, 9, 9}, []int{24, 16, 1, 1}),
			conv([]int{1, 3, 32, 32}, []int{16, 3, 7, 7}, ints("pads", 3, 3, 3, 3), ints("strides", 2, 2)),
			conv([]int{1, 32, 20, 20}, []int{32, 16, 3, 3}, ints("pads", 1, 1, 1, 1), i1("group", 2)),
			conv([]int{1, 32, 30, 30}, []int{32, 1, 3, 3}, ints("pads", 1, 1, 1, 1), i1("group", 32)),
			conv([]int{2, 24, 7, 7}, []int{24, 1, 3, 3}, ints("pads", 1, 1, 1, 1), i1("group", 24)),
			conv([]int{1, 24, 29, 57}, []int{24, 1, 3, 3}, ints("pads", 1, 1, 1, 1), ints("strides", 2, 2), i1("group", 24)),
			conv([]int{1, 8, 11, 13}, []int{8, 1, 3, 3}, ints("pads", 0, 2, 1, 0), i1("group", 8)),
			conv([]int{1, 32, 14, 14}, []int{64, 32, 3, 3}, ints("pads", 1, 1, 1, 1), str(kernel.TacticAttr, "conv.direct")),
			conv([]int{1, 16, 13, 17}, []int{32, 16, 3, 3}, ints("pads", 1, 1, 1, 1), ints("strides", 2, 2), str(kernel.TacticAttr, "conv.direct")),
		},
		"pool": {
			{op: "MaxPool", ver: 12, attrs: attrs(ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1)), shapes: [][]int{{1, 8, 56, 56}}},
			{op: "MaxPool", ver: 12, attrs: attrs(ints("kernel_shape", 2, 2), ints("strides", 1, 1)), shapes: [][]int{{2, 3, 17, 23}}},
			{op: "AveragePool", ver: 19, attrs: attrs(ints("kernel_shape", 3, 3), ints("pads", 1, 1, 1, 1)), shapes: [][]int{{1, 4, 15, 15}}},
			{op: "GlobalAveragePool", ver: 1, shapes: [][]int{{2, 16, 7, 7}}},
		},
		"norm": {
			{op: "LayerNormalization", ver: 17, attrs: attrs(i1("axis", -1)), shapes: [][]int{{19, 72}, {72}, {72}}},
			{op: "LayerNormalization", ver: 17, attrs: attrs(i1("axis", -1)), shapes: [][]int{{5, 128}, {128}, nil}},
			{op: "BatchNormalization", ver: 15, shapes: [][]int{{2, 6, 5, 9}, {6}, {6}, {6}, {6}}},
		},
	}
}

// TestAllFamilies runs every family's calls at every instruction-set
// level this CPU has (kerneltest.Twins), through Run and, where the op has
// one, Into (with a kernel.State, as a bound plan runs it, twice: the
// second call on prepared state), on one and on three workers, with NaN,
// ±Inf, ±0 and subnormals in the data: every level must give the portable
// twin's bits. A new vectorised kernel belongs in a family here.
func TestAllFamilies(t *testing.T) {
	t.Parallel()
	reg := builtin.Registry()
	pool := parallel.New(3)
	defer pool.Close()
	fams := families()
	for _, fam := range []string{"elementwise", "reduce", "gemm", "conv", "pool", "norm"} {
		t.Run(fam, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(len(fam)), 7))
			for ci, c := range fams[fam] {
				n := &ir.Node{Name: fmt.Sprintf("%s%d", c.op, ci), OpType: c.op, Domain: c.domain, Version: c.ver, Attrs: c.attrs, Outputs: []string{"y"}}
				if n.Attrs == nil {
					n.Attrs = map[string]*ir.Attr{}
				}
				in := make([]*tensor.Tensor, len(c.shapes))
				for i, s := range c.shapes {
					n.Inputs = append(n.Inputs, "")
					if s == nil {
						continue
					}
					n.Inputs[i] = fmt.Sprintf("x%d", i)
					in[i] = tensor.From(special(r, tensor.NumElems(s), ci%2 == 0), s...)
				}
				for i, v := range c.consts {
					in[i] = v
				}
				op, err := reg.Lookup(n)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range []*parallel.Pool{nil, pool} {
					what := fmt.Sprintf("%s %v %v, %d workers", c.op, c.shapes, n.Attrs, p.Workers())
					kerneltest.Twins(t, what, &kernel.Ctx{Pool: p}, func(k *kernel.Ctx) ([]*tensor.Tensor, error) {
						outs, err := op.Run(k, n, in)
						if err != nil || op.Into == nil {
							return outs, err
						}
						kc := *k
						kc.State = new(kernel.State)
						for call := 0; call < 2; call++ {
							into := make([]*tensor.Tensor, len(outs))
							for i, o := range outs {
								into[i] = tensor.New(o.DType, o.Shape...)
							}
							if err := op.Into(&kc, n, in, into); err != nil {
								return nil, err
							}
							if d := kerneltest.Diff(outs, into); d != "" {
								t.Fatalf("%s at %v: Into call %d differs from Run: %s", what, k.Level(), call, d)
							}
						}
						return outs, nil
					})
				}
			}
		})
	}
}

// TestSliceFunctions runs vmath's slice functions at every level on the
// same inputs: the elementwise family's building blocks, and the
// epilogue's activations.
func TestSliceFunctions(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 9))
	fns := map[string]func(v vmath.Vec, dst, src []float32){
		"Exp32s": vmath.Vec.Exp32s, "Sigmoid32s": vmath.Vec.Sigmoid32s, "Tanh32s": vmath.Vec.Tanh32s,
		"Erf32s": vmath.Vec.Erf32s, "GeluErf32s": vmath.Vec.GeluErf32s, "GeluTanh32s": vmath.Vec.GeluTanh32s,
	}
	for name, f := range fns {
		for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 100, 1000} {
			x := special(r, n, true)
			kerneltest.Twins(t, fmt.Sprintf("%s n=%d", name, n), nil, func(k *kernel.Ctx) ([]*tensor.Tensor, error) {
				y := make([]float32, n)
				f(k.Vec(), y, x)
				return []*tensor.Tensor{tensor.From(y, n)}, nil
			})
		}
	}
}

// TestTwinsFails checks that Twins can fail: outputs that depend on the
// level are reported (a test that cannot fail proves nothing).
func TestTwinsFails(t *testing.T) {
	if len(kerneltest.Levels()) < 2 {
		t.Skip("one level only on this CPU")
	}
	ft := &fakeT{}
	kerneltest.Twins(ft, "level-dependent", nil, func(k *kernel.Ctx) ([]*tensor.Tensor, error) {
		return []*tensor.Tensor{tensor.From([]float32{float32(k.Level())}, 1)}, nil
	})
	if !ft.failed {
		t.Fatal("Twins accepted outputs that differ between levels")
	}
	if d := kerneltest.Diff([]*tensor.Tensor{tensor.From([]float32{float32(math.NaN())}, 1)},
		[]*tensor.Tensor{tensor.From([]float32{math.Float32frombits(0x7fc00001)}, 1)}); d == "" {
		t.Fatal("Diff ignored a NaN payload")
	}
}

// fakeT records a failure instead of stopping the test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Fatalf(string, ...any) { f.failed = true }

// special is random data with the values that break careless kernels
// mixed in: NaN (with payloads), ±Inf, ±0, subnormals, large values.
func special(r *rand.Rand, n int, salt bool) []float32 {
	sp := []float32{float32(math.NaN()), math.Float32frombits(0x7fa12345), float32(math.Inf(1)), float32(math.Inf(-1)),
		0, float32(math.Copysign(0, -1)), 1e-40, -3e-39, 3e38, -3e38, 1.5}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * 2)
		if salt && r.IntN(25) == 0 {
			v[i] = sp[r.IntN(len(sp))]
		}
	}
	return v
}
