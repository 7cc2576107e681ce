package nn

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

func randF32(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
		if r.Intn(5) == 0 {
			v[i] = 0 // exercise the zero-sum path
		}
	}
	return v
}

// refChain is the specification: one vmath.FMA32 chain over k ascending.
func refChain(k int, a func(int) float32, b func(int) float32) float32 {
	var acc float32
	for i := 0; i < k; i++ {
		acc = vmath.FMA32(a(i), b(i), acc)
	}
	return acc
}

func TestFMAFastPathMatchesFMA32(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 200000; i++ {
		a := math.Float32frombits(r.Uint32())
		b := math.Float32frombits(r.Uint32())
		c := math.Float32frombits(r.Uint32())
		if i%2 == 0 {
			a, b, c = float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		got := dot32(1, []float32{a}, 1, []float32{b}, 1)
		want := vmath.FMA32(a, b, 0)
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("FMA(%g, %g, 0): %g, want %g", a, b, got, want)
		}
		s := float64(a)*float64(b) + float64(c)
		if fmaFast(math.Float64bits(s)) || s == 0 {
			if f, w := float32(s), vmath.FMA32(a, b, c); math.Float32bits(f) != math.Float32bits(w) {
				t.Fatalf("fast path FMA(%g, %g, %g): %g, want %g", a, b, c, f, w)
			}
		}
	}
}

// TestGEMMDeterminism checks sgemm against the one-chain specification bit
// for bit, for shapes that are not multiples of the block, transposed
// views, and rows computed alone (batch invariance).
func TestGEMMDeterminism(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for _, sh := range [][3]int{{1, 1, 1}, {3, 5, 7}, {4, 8, 16}, {37, 70, 129}, {130, 9, 300}, {5, 200, 0}} {
		m, n, k := sh[0], sh[1], sh[2]
		a, b := randF32(r, m*k), randF32(r, k*n)
		c := make([]float32, m*n)
		sgemmP(machineOf(nil), m, n, k, a, k, 1, b, n, 1, c, n)
		// The same product with A stored transposed and B transposed.
		at, bt := make([]float32, m*k), make([]float32, k*n)
		for i := 0; i < m; i++ {
			for kk := 0; kk < k; kk++ {
				at[kk*m+i] = a[i*k+kk]
			}
		}
		for kk := 0; kk < k; kk++ {
			for j := 0; j < n; j++ {
				bt[j*k+kk] = b[kk*n+j]
			}
		}
		c2 := make([]float32, m*n)
		sgemmP(machineOf(nil), m, n, k, at, 1, m, bt, 1, k, c2, n)
		for i := 0; i < m; i++ {
			row := make([]float32, n)
			sgemmP(machineOf(nil), 1, n, k, a[i*k:], k, 1, b, n, 1, row, n)
			for j := 0; j < n; j++ {
				want := refChain(k, func(kk int) float32 { return a[i*k+kk] }, func(kk int) float32 { return b[kk*n+j] })
				for _, got := range []float32{c[i*n+j], c2[i*n+j], row[j]} {
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%v: C[%d,%d] = %g, want %g", sh, i, j, got, want)
					}
				}
			}
		}
	}
}

func node(op string, attrs ...*ir.Attr) *ir.Node {
	n := &ir.Node{OpType: op, Version: 17, Attrs: map[string]*ir.Attr{}, Outputs: []string{"y"}}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	return n
}

func ints(name string, v ...int64) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrInts, Ints: v}
}

func intAttr(name string, v int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInt, I: v} }

func strAttr(name, v string) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrString, S: v} }

// naiveConv is the specification of Conv: per output one chain over
// (channel, kernel taps) ascending, padding read as zero.
func naiveConv(x, w []float32, s *convSetup) []float32 {
	g := s.g
	tabs := g.taps(false)
	P, inSz, kn := prod(g.out), prod(g.in), prod(g.k)
	y := make([]float32, s.N*s.M*P)
	col := make([]float32, s.Cg*kn*P)
	for ni := 0; ni < s.N; ni++ {
		for gi := 0; gi < s.G; gi++ {
			im2col(x[(ni*s.C+gi*s.Cg)*inSz:], s.Cg, g, tabs, col)
			for m := 0; m < s.Mg; m++ {
				for p := 0; p < P; p++ {
					wr := w[(gi*s.Mg+m)*s.Cg*kn:]
					y[(ni*s.M+gi*s.Mg+m)*P+p] = refChain(s.Cg*kn, func(k int) float32 { return wr[k] }, func(k int) float32 { return col[k*P+p] })
				}
			}
		}
	}
	return y
}

func TestConvPathsAgree(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	cases := []struct {
		x, w  []int
		attrs []*ir.Attr
	}{
		{[]int{2, 6, 9, 7}, []int{6, 1, 3, 3}, []*ir.Attr{intAttr("group", 6), ints("pads", 1, 1, 1, 1)}},                         // depthwise
		{[]int{1, 4, 11, 10}, []int{4, 1, 3, 5}, []*ir.Attr{intAttr("group", 4), ints("strides", 2, 1), ints("dilations", 2, 1)}}, // depthwise strided
		{[]int{2, 8, 5, 5}, []int{3, 8, 1, 1}, nil}, // pointwise
		{[]int{1, 4, 6, 6}, []int{6, 2, 3, 3}, []*ir.Attr{intAttr("group", 2), strAttr("auto_pad", "SAME_LOWER"), ints("strides", 2, 2)}}, // grouped
		{[]int{2, 3, 13}, []int{5, 3, 4}, []*ir.Attr{ints("pads", 2, 1), ints("dilations", 2)}},                                           // 1-D
		{[]int{1, 2, 4, 5, 6}, []int{3, 2, 2, 3, 2}, []*ir.Attr{strAttr("auto_pad", "SAME_UPPER")}},                                       // 3-D
	}
	for i, c := range cases {
		n := node("Conv", c.attrs...)
		x := tensor.From(randF32(r, prod(c.x)), c.x...)
		w := tensor.From(randF32(r, prod(c.w)), c.w...)
		out, err := runConv(nil, n, []*tensor.Tensor{x, w})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		s, _ := setupConv(n, c.x, c.w)
		want := naiveConv(x.Data.([]float32), w.Data.([]float32), s)
		got := out[0].Data.([]float32)
		for j := range want {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("case %d: element %d = %g, want %g", i, j, got[j], want[j])
			}
		}
		// Shape inference agrees with the kernel, with a symbolic batch.
		xt := ir.TensorType(x)
		xt.Shape[0] = ir.Dim{Param: "N"}
		ts, err := inferConv(n, []ir.InferInput{{Present: true, Type: xt}, {Present: true, Type: ir.TensorType(w)}})
		if err != nil {
			t.Fatalf("case %d: infer: %v", i, err)
		}
		if ts[0].Shape[0].Param != "N" {
			t.Fatalf("case %d: infer lost the symbolic batch: %v", i, ts[0])
		}
		for d := 1; d < len(out[0].Shape); d++ {
			if ts[0].Shape[d] != ir.Fixed(out[0].Shape[d]) {
				t.Fatalf("case %d: infer %v, kernel %v", i, ts[0], out[0].Shape)
			}
		}
	}
}

func TestConvBadInputs(t *testing.T) {
	x := tensor.New(tensor.Float32, 1, 3, 4, 4)
	for _, w := range []*tensor.Tensor{tensor.New(tensor.Float32, 2, 2, 3, 3), tensor.New(tensor.Float32, 2, 3, 3), tensor.New(tensor.Float32, 2, 3, 7, 7)} {
		if _, err := runConv(nil, node("Conv"), []*tensor.Tensor{x, w}); err == nil {
			t.Errorf("W %v: no error", w.Shape)
		}
	}
}

func TestMatMulBroadcastAndVectors(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for _, c := range []struct{ a, b, out []int }{
		{[]int{3}, []int{3}, []int{}},
		{[]int{3}, []int{2, 3, 4}, []int{2, 4}},
		{[]int{2, 1, 5, 3}, []int{4, 3, 2}, []int{2, 4, 5, 2}},
		{[]int{2, 5, 3}, []int{3}, []int{2, 5}},
	} {
		a := tensor.From(randF32(r, prod(c.a)), c.a...)
		b := tensor.From(randF32(r, prod(c.b)), c.b...)
		out, err := runMatMul(nil, node("MatMul"), []*tensor.Tensor{a, b})
		if err != nil {
			t.Fatal(err)
		}
		if !equalInts(out[0].Shape, c.out) {
			t.Errorf("%v x %v: shape %v, want %v", c.a, c.b, out[0].Shape, c.out)
		}
		ts, err := inferMatMulAs(func(x ir.Type) tensor.DType { return x.DType })(node("MatMul"), []ir.InferInput{{Present: true, Type: ir.TensorType(a)}, {Present: true, Type: ir.TensorType(b)}})
		if err != nil {
			t.Fatal(err)
		}
		if s, _ := ts[0].Static(); !equalInts(s, c.out) {
			t.Errorf("%v x %v: inferred %v, want %v", c.a, c.b, ts[0], c.out)
		}
	}
	if _, err := runMatMul(nil, node("MatMul"), []*tensor.Tensor{tensor.New(tensor.Float32, 2, 3), tensor.New(tensor.Float32, 4, 2)}); err == nil {
		t.Error("mismatched inner dimensions: no error")
	}
}

func TestEinsum(t *testing.T) {
	for _, c := range []struct {
		eq     string
		shapes [][]int
		out    []int
	}{
		{"ij,jk", [][]int{{2, 3}, {3, 4}}, []int{2, 4}},
		{"ii->i", [][]int{{3, 3}}, []int{3}},
		{"...ii->...i", [][]int{{2, 5, 3, 3}}, []int{2, 5, 3}},
		{"ba", [][]int{{2, 3}}, []int{3, 2}},
		{"i,i", [][]int{{4}, {4}}, []int{}},
		{"...j,j...->...", [][]int{{2, 3}, {3, 2}}, []int{2}},
		{"bij,bjk->bik", [][]int{{2, 3, 4}, {1, 4, 5}}, nil},
	} {
		p, err := parseEinsum(c.eq, c.shapes)
		if c.out == nil {
			if err == nil {
				t.Errorf("%s: no error for batch sizes that do not match", c.eq)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.eq, err)
			continue
		}
		if !equalInts(p.outShape, c.out) {
			t.Errorf("%s: shape %v, want %v", c.eq, p.outShape, c.out)
		}
	}
	// The trace of [[1,2],[3,4]] and a diagonal.
	x := tensor.From([]float32{1, 2, 3, 4}, 2, 2)
	out, err := runEinsum(nil, node("Einsum", strAttr("equation", "ii")), []*tensor.Tensor{x})
	if err != nil || out[0].Data.([]float32)[0] != 5 {
		t.Errorf("trace: %v %v", out, err)
	}
}

func TestQuantizeRounding(t *testing.T) {
	x := tensor.From([]float32{0.5, 1.5, 2.5, -0.5, -1.5, 1000, -1000, 3.4}, 2, 4)
	sc := tensor.From([]float32{1, 2}, 2)
	zp := tensor.From([]int8{0, 1}, 2)
	out, err := runQuantize(nil, node("QuantizeLinear", intAttr("axis", 0)), []*tensor.Tensor{x, sc, zp})
	if err != nil {
		t.Fatal(err)
	}
	// Row 0 scale 1: half to even; row 1 scale 2, zero point 1.
	want := []int8{0, 2, 2, -0, 0, 127, -128, 3}
	for i, v := range out[0].Data.([]int8) {
		if v != want[i] {
			t.Fatalf("element %d: %d, want %d (%v)", i, v, want[i], out[0].Data)
		}
	}
	d, err := runDequantize(nil, node("DequantizeLinear", intAttr("axis", 0)), []*tensor.Tensor{out[0], sc, zp})
	if err != nil {
		t.Fatal(err)
	}
	if got := d[0].Data.([]float32)[5]; got != 252 {
		t.Errorf("dequantize: %g, want 252", got)
	}
}

func TestMaxPoolIndicesColumnMajor(t *testing.T) {
	x := tensor.From([]float32{1, 9, 3, 4, 5, 6, 7, 8, 2}, 1, 1, 3, 3)
	n := node("MaxPool", ints("kernel_shape", 2, 2), intAttr("storage_order", 1))
	n.Outputs = []string{"y", "i"}
	out, err := runMaxPool(nil, n, []*tensor.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	// Maxima 9 (row 0, col 1), 9, 8 (row 2, col 1), 8; column-major
	// index = col*3 + row.
	want := []int64{3, 3, 5, 5}
	for i, v := range out[1].Data.([]int64) {
		if v != want[i] {
			t.Fatalf("indices %v, want %v", out[1].Data, want)
		}
	}
}

func TestPoolCeilInfer(t *testing.T) {
	n := node("AveragePool", ints("kernel_shape", 3, 3), ints("strides", 2, 2), intAttr("ceil_mode", 1))
	ts, err := inferPool(n, []ir.InferInput{{Present: true, Type: ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{{Param: "N"}, ir.Fixed(3), ir.Fixed(6), ir.Unknown}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ts[0].String(); got != "float32[N,3,?,?]" {
		t.Errorf("unknown width: %s", got)
	}
	ts, _ = inferPool(n, []ir.InferInput{{Present: true, Type: ir.StaticType(tensor.Float32, []int{1, 3, 6, 7})}})
	if got := ts[0].String(); got != "float32[1,3,3,3]" {
		t.Errorf("ceil_mode: %s", got)
	}
}
