package ml

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

func bits(t *tensor.Tensor) []byte {
	var b bytes.Buffer
	switch d := t.Data.(type) {
	case []float32:
		for _, v := range d {
			binary.Write(&b, binary.LittleEndian, math.Float32bits(v))
		}
	case []int64:
		binary.Write(&b, binary.LittleEndian, d)
	case []string:
		for _, s := range d {
			b.WriteString(s)
			b.WriteByte(0)
		}
	}
	return b.Bytes()
}

// TestBatchInvariance: every row of a batch gets the bits it gets alone.
func TestBatchInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, feat = 37, 2
	x := make([]float32, rows*feat)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	svc := func(kind string, extra ...*ir.Attr) *ir.Node {
		a := append([]*ir.Attr{s1("kernel_type", kind), fs("kernel_params", 0.4, 0.5, 3), fs("support_vectors", svs...),
			is("vectors_per_class", 2, 1, 1), fs("coefficients", svCoef...), fs("rho", svRho...), is("classlabels_ints", 1, 2, 3)}, extra...)
		return node("SVMClassifier", a...)
	}
	nodes := []*ir.Node{
		node("LinearClassifier", fs("coefficients", 1, 2, -1, 0.5, 0, -1), fs("intercepts", 0.1, 0.2, 0.3), s1("post_transform", "SOFTMAX")),
		node("LinearClassifier", fs("coefficients", 2, -1), fs("intercepts", 0.5), is("classlabels_ints", 0, 1), s1("post_transform", "LOGISTIC")),
		node("LinearRegressor", fs("coefficients", 1, 2, 3, 4), i1("targets", 2), s1("post_transform", "SOFTMAX_ZERO")),
		svc("LINEAR"), svc("POLY"), svc("RBF"), svc("SIGMOID"),
		svc("RBF", fs("prob_a", -1, -2, -0.5), fs("prob_b", 0.1, 0.2, 0.3)),
		node("SVMRegressor", s1("kernel_type", "RBF"), fs("kernel_params", 0.7, 0, 0), fs("support_vectors", svs...),
			i1("n_supports", 4), fs("coefficients", 0.5, -1, 0.25, 2), fs("rho", -0.3)),
		node("Scaler", fs("offset", 0.5, -1), fs("scale", 3, 0.25)),
		node("Normalizer", s1("norm", "L2")),
	}
	for _, n := range nodes {
		batch := run(t, n, f32([]int{rows, feat}, x...))
		for r := range rows {
			one := run(t, n, f32([]int{1, feat}, x[r*feat:(r+1)*feat]...))
			for o := range batch {
				w := len(bits(one[o]))
				if !bytes.Equal(bits(batch[o])[r*w:(r+1)*w], bits(one[o])) {
					t.Fatalf("%s (%s): row %d output %d differs between the batch and alone", n.OpType, n.String("kernel_type", ""), r, o)
				}
			}
		}
	}
}

// FuzzAttributes decodes hostile attributes for every operator: lists of
// any length, sizes and counts of any value. Run and Infer must return an
// error or a well-formed result, never panic or allocate what the sizes
// claim.
func FuzzAttributes(f *testing.F) {
	f.Add([]byte{0, 3, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{2, 200, 255, 255, 255, 127, 1, 2})
	f.Add([]byte{12, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	names := []string{}
	for name := range Ops() {
		names = append(names, name)
	}
	// A fixed order: the map's is random.
	slices.Sort(names)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 2 {
			return
		}
		op := names[int(b[0])%len(names)]
		r := &byteReader{b: b[1:]}
		n := node(op)
		for _, a := range []string{"coefficients", "intercepts", "support_vectors", "rho", "prob_a", "prob_b",
			"kernel_params", "scale", "offset", "imputed_value_floats", "keys_floats", "values_floats"} {
			if r.bool() {
				n.Attrs[a] = fs(a, r.floats()...)
			}
		}
		for _, a := range []string{"classlabels_ints", "vectors_per_class", "cats_int64s", "keys_int64s", "values_int64s",
			"inputdimensions", "int64_vocabulary", "classlabels_int64s", "imputed_value_int64s"} {
			if r.bool() {
				n.Attrs[a] = is(a, r.ints()...)
			}
		}
		for _, a := range []string{"targets", "n_supports", "one_class", "zeros", "default_int64"} {
			if r.bool() {
				n.Attrs[a] = i1(a, r.int())
			}
		}
		for _, a := range []string{"classlabels_strings", "cats_strings", "keys_strings", "values_strings", "string_vocabulary", "classes_strings"} {
			if r.bool() {
				n.Attrs[a] = ss(a, r.strs()...)
			}
		}
		for _, a := range []string{"post_transform", "kernel_type", "norm"} {
			if r.bool() {
				n.Attrs[a] = s1(a, []string{"NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT", "RBF", "POLY", "SIGMOID", "L1", "L2", "MAX", "BAD"}[r.byte()%12])
			}
		}
		rows, cols := int(r.byte()%4), int(r.byte()%5)
		var in []*tensor.Tensor
		switch r.byte() % 4 {
		case 0:
			in = []*tensor.Tensor{f32([]int{rows, cols}, make([]float32, rows*cols)...)}
		case 1:
			idx := r.ints()
			in = []*tensor.Tensor{tensor.From(make([]int64, cols), cols), tensor.From(idx, len(idx))}
		case 2:
			in = []*tensor.Tensor{tensor.From(make([]string, rows), rows)}
		default:
			in = []*tensor.Tensor{tensor.NewMap(tensor.From([]int64{1, 2}, 2), tensor.From([]float32{1, 2}, 2))}
		}
		out, err := runErr(n, in...)
		if err == nil {
			for _, o := range out {
				if err := o.Check(); err != nil {
					t.Fatalf("%s: malformed output: %v", op, err)
				}
			}
		}
	})
}

// byteReader draws fuzz values; past the end it gives zeros.
type byteReader struct{ b []byte }

func (r *byteReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *byteReader) bool() bool { return r.byte()&1 == 1 }

func (r *byteReader) int() int64 {
	switch r.byte() % 4 {
	case 0:
		return int64(r.byte()) - 8
	case 1:
		return math.MaxInt64 - int64(r.byte())
	case 2:
		return math.MinInt64 + int64(r.byte())
	}
	return int64(r.byte()) << 24
}

func (r *byteReader) count() int { return int(r.byte() % 12) }

func (r *byteReader) floats() []float32 {
	v := make([]float32, r.count())
	for i := range v {
		v[i] = float32(int8(r.byte())) / 4
	}
	return v
}

func (r *byteReader) ints() []int64 {
	v := make([]int64, r.count())
	for i := range v {
		v[i] = r.int()
	}
	return v
}

func (r *byteReader) strs() []string {
	v := make([]string, r.count())
	for i := range v {
		v[i] = string(rune('a' + r.byte()%4))
	}
	return v
}

// TestIntoMatchesRun: every Into gives Run's bits, into outputs full of
// garbage.
func TestIntoMatchesRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 5*3)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for _, n := range []*ir.Node{
		node("LinearClassifier", fs("coefficients", 1, 2, -1, 0.5, 0, -1, 3, 1, 1), is("classlabels_ints", 7, 8, 9), s1("post_transform", "LOGISTIC")),
		node("LinearClassifier", fs("coefficients", 2, -1, 1), fs("intercepts", 0.5), is("classlabels_ints", 0, 1), s1("post_transform", "SOFTMAX")),
		node("LinearRegressor", fs("coefficients", 1, 2, 3, 4, 5, 6), i1("targets", 2), fs("intercepts", 1, 2)),
		node("Scaler", fs("offset", 0.5, -1, 2), fs("scale", 3)),
		node("Normalizer", s1("norm", "L1")),
		node("Normalizer", s1("norm", "MAX")),
	} {
		in := []*tensor.Tensor{f32([]int{5, 3}, x...)}
		want := run(t, n, in...)
		got := make([]*tensor.Tensor, len(want))
		for i, w := range want {
			got[i] = tensor.New(w.DType, w.Shape...)
			if d, ok := got[i].Data.([]float32); ok {
				for j := range d {
					d[j] = float32(math.NaN())
				}
			}
		}
		into := Ops()[n.OpType].Into
		if err := into(nil, n, in, got); err != nil {
			t.Fatalf("%s: %v", n.OpType, err)
		}
		if a := testing.AllocsPerRun(10, func() { into(nil, n, in, got) }); a != 0 {
			t.Errorf("%s: Into allocates %v times", n.OpType, a)
		}
		for i := range want {
			if !bytes.Equal(bits(got[i]), bits(want[i])) {
				t.Errorf("%s output %d: Into %v, Run %v", n.OpType, i, got[i].Data, want[i].Data)
			}
		}
	}
}

// TestHostileAttributes: sizes an attribute claims are checked against
// what the attributes hold, with an error that says what is wrong.
func TestHostileAttributes(t *testing.T) {
	x := f32([]int{1, 2}, 1, 2)
	for _, c := range []struct {
		n    *ir.Node
		in   []*tensor.Tensor
		want string
	}{
		{node("SVMClassifier", fs("coefficients", 1, 2), fs("rho", 0), is("vectors_per_class", math.MaxInt64, 1), is("classlabels_ints", 0, 1)), nil, "vectors_per_class[0] is"},
		{node("SVMClassifier", fs("coefficients", 1, 2), fs("support_vectors", 1, 2), fs("rho", 0), is("vectors_per_class", 1<<27, 1<<27), is("classlabels_ints", 0, 1)), nil, "support vector values do not make"},
		{node("SVMClassifier", fs("coefficients", 1, 2), fs("rho", 0), is("classlabels_ints", 0, 1), fs("kernel_params", 1)), nil, "kernel_params has 1 values"},
		{node("SVMClassifier", fs("coefficients", 1, 2), fs("rho", 0)), nil, "classlabels_ints and classlabels_strings is required"},
		{node("SVMRegressor", fs("coefficients", 1, 2), fs("rho", 0), i1("n_supports", math.MaxInt64)), nil, "n_supports"},
		{node("SVMRegressor", fs("coefficients", 1, 2), fs("rho", 0), i1("n_supports", 3)), nil, "2 coefficients for 3 support vectors"},
		{node("LinearRegressor", fs("coefficients", 1, 2), i1("targets", math.MaxInt64)), nil, "targets is"},
		{node("LinearClassifier", fs("coefficients", 1, 2, 3)), nil, "3 coefficients do not make rows of 2 features"},
		{node("LinearClassifier", fs("coefficients", 1, 2, 3, 4), fs("intercepts", 1)), nil, "1 intercepts for 2 targets"},
		{node("LinearClassifier", fs("coefficients", 1, 2, 3, 4), is("classlabels_ints", 1, 2, 3)), nil, "3 class labels for 2 coefficient rows"},
		{node("LinearClassifier", fs("coefficients", 1, 2), s1("post_transform", "EXP")), nil, "unknown post_transform"},
		{node("FeatureVectorizer", is("inputdimensions", math.MaxInt64)), nil, "inputdimensions[0] is"},
		{node("FeatureVectorizer", is("inputdimensions", 1<<23, 1<<23, 1<<23)), []*tensor.Tensor{x, x, x}, "inputdimensions[2] is"},
		{node("LabelEncoder", ta("keys_tensor", tensor.From([]bool{true}, 1)), is("values_int64s", 1)), nil, "keys_tensor has dtype bool"},
		{node("LabelEncoder", ss("keys_strings", "a"), ta("values_tensor", tensor.From([]int64{1}, 1)), ta("default_tensor", tensor.From([]float32{1, 2}, 2))), []*tensor.Tensor{tensor.From([]string{"a"}, 1)}, "default_tensor is"},
		{node("ArrayFeatureExtractor"), []*tensor.Tensor{x, tensor.From([]int64{-1}, 1)}, "index Y[0] = -1 is outside [0, 2)"},
		{node("ZipMap"), nil, "classlabels_int64s and classlabels_strings is required"},
		{node("OneHotEncoder", is("cats_int64s", 1), ss("cats_strings", "a")), nil, "both cats_int64s and cats_strings"},
		{node("Scaler", fs("scale", 1, 2, 3)), nil, "scale has 3 values for 2 features"},
	} {
		in := c.in
		if in == nil {
			in = []*tensor.Tensor{x}
		}
		_, err := runErr(c.n, in...)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "ml: "+c.n.OpType+": ") {
			t.Errorf("%s: got %v, want an error with %q", c.n.OpType, err, c.want)
		}
	}
}
