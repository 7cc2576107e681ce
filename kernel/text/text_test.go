package text

import (
	"fmt"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

func attrs(kv ...any) map[string]*ir.Attr {
	m := map[string]*ir.Attr{}
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		switch v := kv[i+1].(type) {
		case int:
			m[k] = &ir.Attr{Name: k, Kind: ir.AttrInt, I: int64(v)}
		case string:
			m[k] = &ir.Attr{Name: k, Kind: ir.AttrString, S: v}
		case []int64:
			m[k] = &ir.Attr{Name: k, Kind: ir.AttrInts, Ints: v}
		case []string:
			m[k] = &ir.Attr{Name: k, Kind: ir.AttrStrings, Strings: v}
		case []float32:
			m[k] = &ir.Attr{Name: k, Kind: ir.AttrFloats, Floats: v}
		}
	}
	return m
}

func TestStringNormalizer(t *testing.T) {
	for _, c := range []struct {
		name  string
		attrs map[string]*ir.Attr
		in    *tensor.Tensor
		want  string
	}{
		{"insensitive lower", attrs("stopwords", []string{"THE"}, "case_change_action", "LOWER"),
			tensor.From([]string{"The", "Cat", "the", "É"}, 4), "[2] [cat é]"},
		{"sensitive keeps other case", attrs("stopwords", []string{"the"}, "is_case_sensitive", 1),
			tensor.From([]string{"The", "the"}, 1, 2), "[1 1] [The]"},
		{"all removed 2-D", attrs("stopwords", []string{"a"}),
			tensor.From([]string{"a", "A"}, 1, 2), "[1 1] []"},
	} {
		out, err := runStringNormalizer(nil, &ir.Node{OpType: "StringNormalizer", Attrs: c.attrs}, []*tensor.Tensor{c.in})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if s := fmt.Sprint(out[0].Shape, out[0].Data); s != c.want {
			t.Errorf("%s: %s, want %s", c.name, s, c.want)
		}
	}
	bad := []*ir.Node{
		{OpType: "StringNormalizer", Attrs: attrs("case_change_action", "TITLE")},
	}
	for _, n := range bad {
		if _, err := runStringNormalizer(nil, n, []*tensor.Tensor{tensor.From([]string{"x"}, 1)}); err == nil {
			t.Errorf("%v: no error", n.Attrs)
		}
	}
	if _, err := runStringNormalizer(nil, &ir.Node{Attrs: attrs()}, []*tensor.Tensor{tensor.From([]string{"x", "y"}, 2, 1)}); err == nil {
		t.Errorf("[2, 1] input: no error")
	}
}

func TestTfIdf(t *testing.T) {
	// Pool: unigrams "a", "b"; bigram "a b". Output columns 2, 0, 1.
	base := []any{"min_gram_length", 1, "max_gram_length", 2, "max_skip_count", 1,
		"ngram_counts", []int64{0, 2}, "ngram_indexes", []int64{2, 0, 1},
		"pool_strings", []string{"a", "b", "a", "b"}}
	x := tensor.From([]string{"a", "c", "b", "a", "b"}, 5)
	for _, c := range []struct {
		extra []any
		want  string
	}{
		// a:2, b:2, "a b" with skip 0 once (positions 3,4) and skip 1 once (0,2).
		{[]any{"mode", "TF"}, "[2 2 2]"},
		{[]any{"mode", "IDF", "weights", []float32{0.5, 0.25, 2}}, "[0.5 0.25 2]"},
		{[]any{"mode", "TFIDF", "weights", []float32{0.5, 0.25, 2}}, "[1 0.5 4]"},
	} {
		n := &ir.Node{OpType: "TfIdfVectorizer", Attrs: attrs(append(append([]any{}, base...), c.extra...)...)}
		out, err := runTfIdf(nil, n, []*tensor.Tensor{x})
		if err != nil {
			t.Fatal(err)
		}
		if s := fmt.Sprint(out[0].Data); s != c.want {
			t.Errorf("%v: %s, want %s", c.extra, s, c.want)
		}
		typ, err := inferTfIdf(n, []ir.InferInput{{Present: true, Type: ir.Type{DType: tensor.String, RankKnown: true, Shape: []ir.Dim{{Param: "B"}, ir.Unknown}}}})
		if err != nil || fmt.Sprint(typ[0].Shape) != "[B 3]" {
			t.Errorf("infer: %v %v", typ, err)
		}
	}
	bad := &ir.Node{OpType: "TfIdfVectorizer", Attrs: attrs("mode", "TF", "min_gram_length", 1, "max_gram_length", 1,
		"ngram_counts", []int64{0, 5}, "ngram_indexes", []int64{0}, "pool_int64s", []int64{1, 2})}
	if _, err := runTfIdf(nil, bad, []*tensor.Tensor{tensor.From([]int64{1}, 1)}); err == nil {
		t.Errorf("ngram_counts past the pool: no error")
	}
}
