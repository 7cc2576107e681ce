package ml

import (
	"math"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

var nan32 = float32(math.NaN())

func TestScaler(t *testing.T) {
	x := f32([]int{2, 3}, 1, 2, 3, 4, 5, 6)
	n := node("Scaler", fs("offset", 1, 2, 3), fs("scale", 2, 0.5, -1))
	near(t, "per feature", run(t, n, x)[0], []float32{0, 0, 0, 6, 1.5, -3}, 0)
	n = node("Scaler", fs("offset", 1), fs("scale", 2))
	near(t, "broadcast", run(t, n, tensor.From([]int64{1, 2, 3}, 3))[0], []float32{0, 2, 4}, 0)
	if _, err := runErr(node("Scaler", fs("offset", 1, 2)), x); err == nil {
		t.Error("2 offsets for 3 features: no error")
	}
}

func TestNormalizer(t *testing.T) {
	x := f32([]int{3, 3}, 1, -2, 2, 0, 0, 0, -1, -4, -2)
	near(t, "MAX", run(t, node("Normalizer", s1("norm", "MAX")), x)[0], []float32{0.5, -1, 1, 0, 0, 0, 1, 4, 2}, 1e-7)
	near(t, "L1", run(t, node("Normalizer", s1("norm", "L1")), x)[0], []float32{0.2, -0.4, 0.4, 0, 0, 0, -1.0 / 7, -4.0 / 7, -2.0 / 7}, 1e-7)
	r := float32(math.Sqrt(21))
	near(t, "L2", run(t, node("Normalizer", s1("norm", "L2")), x)[0], []float32{1.0 / 3, -2.0 / 3, 2.0 / 3, 0, 0, 0, -1 / r, -4 / r, -2 / r}, 1e-7)
	if _, err := runErr(node("Normalizer", s1("norm", "L3")), x); err == nil {
		t.Error("norm L3: no error")
	}
}

func TestBinarizer(t *testing.T) {
	n := node("Binarizer", f1("threshold", 0.5))
	near(t, "float", run(t, n, f32([]int{5}, 0.4, 0.5, 0.6, nan32, -1))[0], []float32{0, 0, 1, 0, 0}, 0)
	equal[int64](t, "int64", run(t, n, tensor.From([]int64{-1, 0, 1, 2}, 2, 2))[0], 0, 0, 1, 1)
	equal[float64](t, "double", run(t, node("Binarizer"), tensor.From([]float64{-0.1, 0, 0.1}, 3))[0], 0, 0, 1)
}

func TestImputer(t *testing.T) {
	// NaN replaced per feature.
	n := node("Imputer", fs("imputed_value_floats", 10, 20), f1("replaced_value_float", nan32))
	near(t, "nan", run(t, n, f32([]int{2, 2}, nan32, 1, 2, nan32))[0], []float32{10, 1, 2, 20}, 0)
	// A value replaced by one imputed value (the default replaced value is 0).
	n = node("Imputer", fs("imputed_value_floats", -1))
	near(t, "zero", run(t, n, f32([]int{3}, 0, 1, 0))[0], []float32{-1, 1, -1}, 0)
	n = node("Imputer", is("imputed_value_int64s", 7, 8), i1("replaced_value_int64", -1))
	equal[int64](t, "int64", run(t, n, tensor.From([]int64{-1, 3, 4, -1}, 2, 2))[0], 7, 3, 4, 8)
	if _, err := runErr(node("Imputer", fs("imputed_value_floats", 1, 2, 3)), f32([]int{1, 2}, 0, 0)); err == nil {
		t.Error("3 imputed values for 2 features: no error")
	}
	if _, err := runErr(node("Imputer", fs("imputed_value_floats", 1)), tensor.From([]int64{0}, 1)); err == nil {
		t.Error("int64 input with float imputed values: no error")
	}
}

func TestOneHotEncoder(t *testing.T) {
	n := node("OneHotEncoder", is("cats_int64s", 1, 3, 5))
	out := run(t, n, tensor.From([]int64{3, 4, 1, 5}, 2, 2))
	if s := out[0].Shape; len(s) != 3 || s[2] != 3 {
		t.Fatalf("shape %v", s)
	}
	near(t, "int", out[0], []float32{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, 0)
	// Floats are truncated toward zero; NaN is in no category.
	near(t, "float", run(t, n, tensor.From([]float64{3.9, -0.5, math.NaN()}, 3))[0], []float32{0, 1, 0, 0, 0, 0, 0, 0, 0}, 0)
	n = node("OneHotEncoder", ss("cats_strings", "red", "green"), i1("zeros", 0))
	near(t, "string", run(t, n, tensor.From([]string{"green", "red"}, 2))[0], []float32{0, 1, 1, 0}, 0)
	if _, err := runErr(n, tensor.From([]string{"blue"}, 1)); err == nil {
		t.Error("unknown category with zeros=0: no error")
	}
}

// TestLabelEncoder covers every attribute form and every pair of the
// spec's key and value types.
func TestLabelEncoder(t *testing.T) {
	// Opset 1: classes_strings, both directions.
	n := node("LabelEncoder", ss("classes_strings", "a", "b", "c"), i1("default_int64", 42), s1("default_string", "?"))
	equal[int64](t, "v1 string->int", run(t, n, tensor.From([]string{"c", "a", "z"}, 3))[0], 2, 0, 42)
	equal(t, "v1 int->string", run(t, n, tensor.From([]int64{1, 9}, 2))[0], "b", "?")

	// Keys and values in the three list forms: entry i of each list is
	// the i-th of x/y/z, -5/0/7, -0.5/0/NaN.
	type form struct {
		attr string
		t    *tensor.Tensor
	}
	forms := []form{
		{"strings", tensor.From([]string{"x", "y", "z"}, 3)},
		{"int64s", tensor.From([]int64{-5, 0, 7}, 3)},
		{"floats", tensor.From([]float32{-0.5, 0, float32(math.NaN())}, 3)},
	}
	list := func(prefix string, f form) *ir.Attr {
		switch d := f.t.Data.(type) {
		case []string:
			return ss(prefix+"_strings", d...)
		case []int64:
			return is(prefix+"_int64s", d...)
		}
		return fs(prefix+"_floats", f.t.Data.([]float32)...)
	}
	for _, k := range forms {
		for _, v := range forms {
			n := node("LabelEncoder", list("keys", k), list("values", v))
			// The input: key 2, key 0, a key that is not there.
			var in *tensor.Tensor
			switch k.attr {
			case "strings":
				in = tensor.From([]string{"z", "x", "w"}, 3)
			case "int64s":
				in = tensor.From([]int64{7, -5, 1}, 3)
			default:
				in = tensor.From([]float32{float32(math.NaN()), -0.5, 3}, 3)
			}
			out := run(t, n, in)[0]
			what := "keys_" + k.attr + " -> values_" + v.attr
			switch v.attr {
			case "strings":
				equal(t, what, out, "z", "x", "_Unused")
			case "int64s":
				equal[int64](t, what, out, 7, -5, -1)
			default:
				g := out.Data.([]float32)
				if g[0] == g[0] || g[1] != -0.5 || g[2] != 0 || !math.Signbit(float64(g[2])) {
					t.Errorf("%s: got %v, want [NaN -0.5 -0]", what, g)
				}
			}
		}
	}
	// -0 finds the key 0.
	n = node("LabelEncoder", fs("keys_floats", 0, 1), is("values_int64s", 10, 11))
	equal[int64](t, "-0 key", run(t, n, tensor.From([]float32{float32(math.Copysign(0, -1))}, 1))[0], 10)

	// Opset 4: keys_tensor, values_tensor, default_tensor, with the types
	// the list forms cannot hold.
	n = node("LabelEncoder", ta("keys_tensor", tensor.From([]float64{1.5, 2.5}, 2)),
		ta("values_tensor", tensor.From([]int16{3, 4}, 2)), ta("default_tensor", tensor.From([]int16{-9}, 1)))
	equal[int16](t, "double->int16", run(t, n, tensor.From([]float64{2.5, 0, 1.5}, 3))[0], 4, -9, 3)
	n = node("LabelEncoder", ta("keys_tensor", tensor.From([]int32{1, 2}, 2)), ta("values_tensor", tensor.From([]string{"one", "two"}, 2)))
	equal(t, "int32->string", run(t, n, tensor.From([]int32{2, 3}, 1, 2))[0], "two", "_Unused")
	n = node("LabelEncoder", ss("keys_strings", "a"), ta("values_tensor", tensor.From([]float64{0.25}, 1)), f1("default_float", 7))
	equal[float64](t, "string->double", run(t, n, tensor.From([]string{"a", "b"}, 2))[0], 0.25, 7)

	if _, err := runErr(node("LabelEncoder", ss("keys_strings", "a"), is("values_int64s", 1)), tensor.From([]int64{1}, 1)); err == nil {
		t.Error("int64 input for string keys: no error")
	}
	if _, err := runErr(node("LabelEncoder", ss("keys_strings", "a", "b"), is("values_int64s", 1)), tensor.From([]string{"a"}, 1)); err == nil {
		t.Error("2 keys, 1 value: no error")
	}
	if _, err := runErr(node("LabelEncoder", ss("keys_strings", "a"), is("keys_int64s", 1), is("values_int64s", 1)), tensor.From([]string{"a"}, 1)); err == nil {
		t.Error("two key forms: no error")
	}
}

func TestCategoryMapper(t *testing.T) {
	n := node("CategoryMapper", is("cats_int64s", 1, 2, 3), ss("cats_strings", "one", "two", "three"), i1("default_int64", -7))
	equal[int64](t, "string->int", run(t, n, tensor.From([]string{"three", "four", "one"}, 3))[0], 3, -7, 1)
	equal(t, "int->string", run(t, n, tensor.From([]int64{2, 5}, 1, 2))[0], "two", "_Unused")
	if _, err := runErr(node("CategoryMapper", is("cats_int64s", 1), ss("cats_strings")), tensor.From([]int64{1}, 1)); err == nil {
		t.Error("mismatched categories: no error")
	}
}

func TestArrayFeatureExtractor(t *testing.T) {
	x := f32([]int{2, 3}, 1, 2, 3, 4, 5, 6)
	out := run(t, node("ArrayFeatureExtractor"), x, tensor.From([]int64{2, 0}, 2))[0]
	near(t, "2-D", out, []float32{3, 1, 6, 4}, 0)
	out = run(t, node("ArrayFeatureExtractor"), tensor.From([]string{"a", "b", "c"}, 3), tensor.From([]int64{1}, 1))[0]
	if len(out.Shape) != 2 || out.Shape[0] != 1 || out.Shape[1] != 1 {
		t.Errorf("1-D shape %v", out.Shape)
	}
	equal(t, "strings", out, "b")
	if _, err := runErr(node("ArrayFeatureExtractor"), x, tensor.From([]int64{3}, 1)); err == nil {
		t.Error("index 3 of 3: no error")
	}
}

func TestFeatureVectorizer(t *testing.T) {
	n := node("FeatureVectorizer", is("inputdimensions", 2, 3))
	out := run(t, n, tensor.From([]int64{1, 2, 3, 4}, 2, 2), f32([]int{2, 1}, 5, 6))[0]
	near(t, "padded", out, []float32{1, 2, 5, 0, 0, 3, 4, 6, 0, 0}, 0)
	n = node("FeatureVectorizer", is("inputdimensions", 1))
	near(t, "cut", run(t, n, f32([]int{1, 3}, 7, 8, 9))[0], []float32{7}, 0)
	if _, err := runErr(node("FeatureVectorizer", is("inputdimensions", 1, 1)), f32([]int{2, 1}, 1, 2), f32([]int{3, 1}, 1, 2, 3)); err == nil {
		t.Error("different row counts: no error")
	}
}

func TestDictVectorizerAndZipMap(t *testing.T) {
	m := tensor.NewMap(tensor.From([]string{"b", "zz", "a"}, 3), tensor.From([]float32{2, 9, 1}, 3))
	n := node("DictVectorizer", ss("string_vocabulary", "a", "b", "c"))
	out := run(t, n, m)[0]
	if len(out.Shape) != 2 || out.Shape[0] != 1 || out.Shape[1] != 3 {
		t.Fatalf("shape %v", out.Shape)
	}
	near(t, "string keys", out, []float32{1, 2, 0}, 0)
	m = tensor.NewMap(tensor.From([]int64{5, 1}, 2), tensor.From([]string{"five", "one"}, 2))
	equal(t, "int keys", run(t, node("DictVectorizer", is("int64_vocabulary", 1, 2, 5)), m)[0], "one", "", "five")
	if _, err := runErr(n, f32([]int{1}, 1)); err == nil {
		t.Error("a tensor input: no error")
	}

	x := f32([]int{2, 3}, 0.1, 0.2, 0.7, 0.5, 0.25, 0.25)
	seq := run(t, node("ZipMap", is("classlabels_int64s", 10, 20, 30)), x)[0]
	if seq.DType != tensor.Sequence || len(seq.Elems()) != 2 {
		t.Fatalf("ZipMap gave %v", seq)
	}
	m1, ok := seq.Elems()[1].MapOf()
	if !ok {
		t.Fatal("element 1 is not a map")
	}
	equal[int64](t, "keys", m1.Keys, 10, 20, 30)
	near(t, "values", m1.Values, []float32{0.5, 0.25, 0.25}, 0)
	seq = run(t, node("ZipMap", ss("classlabels_strings", "no", "yes")), f32([]int{2}, 0.3, 0.7))[0]
	m0, _ := seq.Elems()[0].MapOf()
	equal(t, "string keys", m0.Keys, "no", "yes")
	if _, err := runErr(node("ZipMap", ss("classlabels_strings", "no")), x); err == nil {
		t.Error("3 columns for 1 label: no error")
	}
}
