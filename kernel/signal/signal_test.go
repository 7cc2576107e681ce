package signal

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/conformance"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// TestBackend runs this package's ONNX backend node tests with a registry
// of this package's operators only.
func TestBackend(t *testing.T) {
	if _, err := os.Stat(conformance.DefaultRoot); err != nil {
		t.Skip("ONNX backend test data not installed")
	}
	entries, err := os.ReadDir(conformance.DefaultRoot + "/node")
	if err != nil {
		t.Fatal(err)
	}
	reg := kernel.NewRegistry("", Ops())
	for _, e := range entries {
		name := e.Name()
		ok := false
		for _, p := range []string{"test_dft", "test_stft", "test_hannwindow", "test_hammingwindow", "test_blackmanwindow", "test_melweightmatrix", "test_col2im"} {
			ok = ok || strings.HasPrefix(name, p)
		}
		if !ok || strings.HasSuffix(name, "_expanded") {
			continue
		}
		r := conformance.RunTest(conformance.DefaultRoot, "node", name, reg, time.Minute)
		if r.Status != conformance.Pass {
			t.Errorf("%s: %s: %s", name, r.Status, r.Reason)
		}
	}
}

func node(op string, version int64, attrs map[string]int64) *ir.Node {
	n := &ir.Node{OpType: op, Version: version, Attrs: map[string]*ir.Attr{}}
	for k, v := range attrs {
		n.Attrs[k] = &ir.Attr{Name: k, Kind: ir.AttrInt, I: v}
	}
	return n
}

func run(t *testing.T, op kernel.RunFunc, n *ir.Node, in ...*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	out, err := op(nil, n, in)
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// naiveDFT is the float64 complex definition, for comparison.
func naiveDFT(x []complex128, nfft int, inverse bool) []complex128 {
	out := make([]complex128, nfft)
	sign := -1.0
	if inverse {
		sign = 1
	}
	for k := range nfft {
		for j := 0; j < min(nfft, len(x)); j++ {
			out[k] += x[j] * cmplx.Exp(complex(0, sign*2*math.Pi*float64(k*j)/float64(nfft)))
		}
		if inverse {
			out[k] /= complex(float64(nfft), 0)
		}
	}
	return out
}

func TestTwiddleExact(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 8, 10, 12, 16, 100} {
		for m := range n {
			c, s := twiddle(m, n)
			want := cmplx.Exp(complex(0, 2*math.Pi*float64(m)/float64(n)))
			if math.Abs(c-real(want)) > 1e-15 || math.Abs(s-imag(want)) > 1e-15 {
				t.Errorf("twiddle(%d, %d) = %v, %v, want %v", m, n, c, s, want)
			}
			if 4*m%n == 0 && c*s != 0 {
				t.Errorf("twiddle(%d, %d) = %v, %v: a multiple of π/2 must be exact", m, n, c, s)
			}
			c2, s2 := twiddle(n-m, n)
			if c2 != c || (m != 0 && s2 != -s) {
				t.Errorf("twiddle(%d, %d) is not the mirror of twiddle(%d, %d)", n-m, n, m, n)
			}
		}
	}
}

func TestDFTMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, c := range []struct {
		length, nfft, last int
		inverse, onesided  bool
	}{
		{7, -1, 1, false, false}, {8, -1, 2, false, false}, {8, -1, 2, true, false},
		{5, 8, 1, false, true}, {9, 4, 2, false, false}, {6, -1, 1, false, true},
	} {
		x := make([]float64, 3*c.length*c.last)
		for i := range x {
			x[i] = rng.Float64()*2 - 1
		}
		attrs := map[string]int64{"axis": 1}
		if c.inverse {
			attrs["inverse"] = 1
		}
		if c.onesided {
			attrs["onesided"] = 1
		}
		in := []*tensor.Tensor{tensor.From(x, 3, c.length, c.last)}
		nfft := c.length
		if c.nfft > 0 {
			nfft = c.nfft
			in = append(in, tensor.Scalar(int64(c.nfft)))
		}
		got := run(t, runDFT, node("DFT", 17, attrs), in...)
		bins := nfft
		if c.onesided {
			bins = nfft/2 + 1
		}
		if want := fmt.Sprint([]int{3, bins, 2}); fmt.Sprint(got.Shape) != want {
			t.Fatalf("%+v: shape %v, want %s", c, got.Shape, want)
		}
		g := got.Data.([]float64)
		for b := range 3 {
			line := make([]complex128, c.length)
			for j := range line {
				line[j] = complex(x[(b*c.length+j)*c.last], 0)
				if c.last == 2 {
					line[j] += complex(0, x[(b*c.length+j)*2+1])
				}
			}
			want := naiveDFT(line, nfft, c.inverse)
			for k := range bins {
				gv := complex(g[(b*bins+k)*2], g[(b*bins+k)*2+1])
				if cmplx.Abs(gv-want[k]) > 1e-12 {
					t.Errorf("%+v: batch %d bin %d: %v, want %v", c, b, k, gv, want[k])
				}
			}
		}
	}
}

func TestIRFFTRoundTrip(t *testing.T) {
	for _, nfft := range []int{6, 7} {
		x := make([]float32, nfft)
		for i := range x {
			x[i] = float32(i*i%5) - 1.5
		}
		spec := run(t, runDFT, node("DFT", 20, map[string]int64{"onesided": 1}), tensor.From(x, 1, nfft, 1))
		var l *tensor.Tensor
		if nfft%2 == 1 {
			l = tensor.Scalar(int64(nfft))
		}
		back := run(t, runDFT, node("DFT", 20, map[string]int64{"onesided": 1, "inverse": 1}), spec, l, tensor.Scalar(int64(1)))
		if fmt.Sprint(back.Shape) != fmt.Sprint([]int{1, nfft, 1}) {
			t.Fatalf("n=%d: IRFFT shape %v", nfft, back.Shape)
		}
		for i, v := range back.Data.([]float32) {
			if math.Abs(float64(v-x[i])) > 1e-5 {
				t.Errorf("n=%d: sample %d: %v, want %v", nfft, i, v, x[i])
			}
		}
	}
}

func TestDFTErrors(t *testing.T) {
	x2 := tensor.New(tensor.Float32, 2, 4, 2)
	for _, c := range []struct {
		name string
		n    *ir.Node
		in   []*tensor.Tensor
	}{
		{"axis on last dim", node("DFT", 17, map[string]int64{"axis": 2}), []*tensor.Tensor{x2}},
		{"onesided complex", node("DFT", 17, map[string]int64{"onesided": 1}), []*tensor.Tensor{x2}},
		{"bad last dim", node("DFT", 17, nil), []*tensor.Tensor{tensor.New(tensor.Float32, 2, 4, 3)}},
		{"zero length", node("DFT", 17, nil), []*tensor.Tensor{x2, tensor.Scalar(int64(0))}},
		{"int input", node("DFT", 17, nil), []*tensor.Tensor{tensor.New(tensor.Int32, 2, 4, 1)}},
		{"axis input out of range", node("DFT", 20, nil), []*tensor.Tensor{x2, nil, tensor.Scalar(int64(-4))}},
	} {
		if _, err := runDFT(nil, c.n, c.in); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if _, err := runSTFT(nil, node("STFT", 17, nil), []*tensor.Tensor{tensor.New(tensor.Float32, 1, 8, 1), tensor.Scalar(int64(0))}); err == nil {
		t.Errorf("STFT with frame_step 0: no error")
	}
}

func TestDFTInfer(t *testing.T) {
	x := ir.InferInput{Present: true, Type: ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{{Param: "B"}, ir.Fixed(10), ir.Fixed(1)}}}
	c16 := tensor.Scalar(int64(16))
	for _, c := range []struct {
		n    *ir.Node
		in   []ir.InferInput
		want string
	}{
		{node("DFT", 17, nil), []ir.InferInput{x}, "[B 10 2]"},
		{node("DFT", 17, map[string]int64{"onesided": 1}), []ir.InferInput{x}, "[B 6 2]"},
		{node("DFT", 17, nil), []ir.InferInput{x, {Present: true, Const: c16}}, "[B 16 2]"},
		{node("DFT", 20, map[string]int64{"onesided": 1, "inverse": 1}), []ir.InferInput{x}, "[B 18 1]"},
		{node("DFT", 17, nil), []ir.InferInput{x, {Present: true}}, "[B ? 2]"},
	} {
		got, err := inferDFT(c.n, c.in)
		if err != nil {
			t.Fatal(err)
		}
		if s := fmt.Sprint(got[0].Shape); s != c.want {
			t.Errorf("%v: %s, want %s", c.n.Attrs, s, c.want)
		}
	}
}

func TestWindows(t *testing.T) {
	sym := run(t, runWindow(hann), node("HannWindow", 17, map[string]int64{"periodic": 0}), tensor.Scalar(int32(9))).Data.([]float32)
	for i := range sym {
		if sym[i] != sym[len(sym)-1-i] {
			t.Errorf("symmetric Hann window is not symmetric at %d: %v vs %v", i, sym[i], sym[len(sym)-1-i])
		}
	}
	if sym[0] != 0 || sym[4] != 1 {
		t.Errorf("Hann ends/middle: %v", sym)
	}
	one := run(t, runWindow(blackman), node("BlackmanWindow", 17, map[string]int64{"periodic": 0, "output_datatype": int64(tensor.Float64)}), tensor.Scalar(int64(1)))
	if fmt.Sprint(one.Data) != "[1]" || one.DType != tensor.Float64 {
		t.Errorf("size-1 symmetric window: %v %v", one.DType, one.Data)
	}
	if _, err := runWindow(hann)(nil, node("HannWindow", 17, nil), []*tensor.Tensor{tensor.Scalar(int64(-1))}); err == nil {
		t.Errorf("negative size: no error")
	}
}

func TestCol2Im(t *testing.T) {
	// 1-D image of 4, block 2, stride 1: three blocks overlap by one.
	x := tensor.From([]float32{1, 2, 3, 10, 20, 30}, 1, 2, 3)
	got := run(t, runCol2Im, &ir.Node{OpType: "Col2Im"}, x, tensor.From([]int64{4}, 1), tensor.From([]int64{2}, 1))
	if s := fmt.Sprint(got.Shape, got.Data); s != "[1 1 4] [1 12 23 30]" {
		t.Errorf("Col2Im: %s", s)
	}
	// 2-D with pads: image 2x2, block 2x2, pads 1 all round: a 3x3 grid.
	n := &ir.Node{OpType: "Col2Im", Attrs: map[string]*ir.Attr{"pads": {Name: "pads", Kind: ir.AttrInts, Ints: []int64{1, 1, 1, 1}}}}
	x2 := tensor.New(tensor.Int32, 1, 4, 9)
	for i := range x2.Data.([]int32) {
		x2.Data.([]int32)[i] = 1
	}
	got = run(t, runCol2Im, n, x2, tensor.From([]int64{2, 2}, 2), tensor.From([]int64{2, 2}, 2))
	if s := fmt.Sprint(got.Shape, got.Data); s != "[1 1 2 2] [4 4 4 4]" {
		t.Errorf("Col2Im 2-D: %s", s)
	}
	if _, err := runCol2Im(nil, &ir.Node{OpType: "Col2Im"}, []*tensor.Tensor{tensor.New(tensor.Float32, 1, 2, 4), tensor.From([]int64{4}, 1), tensor.From([]int64{2}, 1)}); err == nil {
		t.Errorf("wrong block count: no error")
	}
}
