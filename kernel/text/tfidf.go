package text

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// trie holds the pool's n-grams: a path of n keys from the root ends at
// the node whose id (1-based position of the n-gram in the pool, 0 for a
// mere prefix) names it.
type trie[K comparable] struct {
	id   int
	kids map[K]*trie[K]
}

func (t *trie[K]) child(k K) *trie[K] {
	if t.kids == nil {
		t.kids = map[K]*trie[K]{}
	}
	c := t.kids[k]
	if c == nil {
		c = &trie[K]{}
		t.kids[k] = c
	}
	return c
}

// tfidf is a parsed TfIdfVectorizer node.
type tfidf struct {
	mode              string
	minN, maxN, skips int
	indexes           []int64 // output column of n-gram id-1
	outSize           int
	weights           []float32
	counts            []int64
}

func parseTfIdf(n *ir.Node) (*tfidf, error) {
	p := &tfidf{
		mode:    n.String("mode", ""),
		minN:    int(n.Int("min_gram_length", 0)),
		maxN:    int(n.Int("max_gram_length", 0)),
		skips:   int(n.Int("max_skip_count", 0)),
		indexes: n.Ints("ngram_indexes", nil),
		weights: n.Floats("weights", nil),
		counts:  n.Ints("ngram_counts", nil),
	}
	switch p.mode {
	case "TF", "IDF", "TFIDF":
	default:
		return nil, fmt.Errorf("TfIdfVectorizer: mode must be TF, IDF or TFIDF, got %q", p.mode)
	}
	if p.minN < 1 || p.maxN < p.minN || p.maxN > 1<<20 || p.skips < 0 || p.skips > 1<<20 {
		return nil, fmt.Errorf("TfIdfVectorizer: need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, got %d, %d, %d", p.minN, p.maxN, p.skips)
	}
	if len(p.indexes) == 0 {
		return nil, fmt.Errorf("TfIdfVectorizer: ngram_indexes is empty")
	}
	for _, v := range p.indexes {
		if v < 0 || v >= 1<<30 {
			return nil, fmt.Errorf("TfIdfVectorizer: ngram_indexes value %d out of range", v)
		}
		p.outSize = max(p.outSize, int(v)+1)
	}
	if len(p.weights) > 0 && len(p.weights) < p.outSize {
		return nil, fmt.Errorf("TfIdfVectorizer: weights has %d values, need one per output column (%d)", len(p.weights), p.outSize)
	}
	return p, nil
}

// build loads the pool into a trie, keeping only n-grams whose length is
// in [min_gram_length, max_gram_length] but numbering all of them.
func build[K comparable](p *tfidf, pool []K) (*trie[K], error) {
	root := &trie[K]{}
	id := 1
	for i, start := range p.counts {
		end := int64(len(pool))
		if i+1 < len(p.counts) {
			end = p.counts[i+1]
		}
		size := int64(i + 1)
		if start < 0 || end < start || end > int64(len(pool)) {
			return nil, fmt.Errorf("TfIdfVectorizer: ngram_counts %v is not a non-decreasing list of offsets into the pool of %d items", p.counts, len(pool))
		}
		if (end-start)%size != 0 {
			return nil, fmt.Errorf("TfIdfVectorizer: the %d-grams span %d pool items, not a multiple of %d", size, end-start, size)
		}
		num := int((end - start) / size)
		if int(size) < p.minN || int(size) > p.maxN {
			id += num
			continue
		}
		for g := range num {
			t := root
			for _, k := range pool[int(start)+g*int(size) : int(start)+(g+1)*int(size)] {
				t = t.child(k)
			}
			t.id = id
			id++
		}
	}
	if id-1 > len(p.indexes) {
		return nil, fmt.Errorf("TfIdfVectorizer: the pool has %d n-grams but ngram_indexes has %d values", id-1, len(p.indexes))
	}
	return root, nil
}

// count adds the n-gram frequencies of one row to freq. For skip distance
// d = 1..max_skip_count+1 and every start position, it walks x[s], x[s+d],
// ... down the trie and counts each n-gram of length >= the current
// minimum; unigrams are counted at d = 1 only.
func count[K comparable](p *tfidf, root *trie[K], x []K, freq []int64) {
	start := p.minN
	for d := 1; d <= p.skips+1; d++ {
		for s := range x {
			if s+d*(start-1) >= len(x) {
				break
			}
			t := root
			for size, i := 1, s; size <= p.maxN && i < len(x); size, i = size+1, i+d {
				t = t.kids[x[i]]
				if t == nil {
					break
				}
				if size >= start && t.id != 0 {
					freq[p.indexes[t.id-1]]++
				}
			}
		}
		if start == 1 {
			if start++; start > p.maxN {
				break
			}
		}
	}
}

// runTfIdf counts, per row of X ([C] or [B, C]), the pool's n-grams and
// weights the counts: TF the count, IDF weight (or 1) where the count is
// non-zero, TFIDF weight times count, rounded once to float32. Weights are
// indexed by output column, as in ONNX Runtime and the ONNX reference.
func runTfIdf(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, fmt.Errorf("TfIdfVectorizer: missing input")
	}
	p, err := parseTfIdf(n)
	if err != nil {
		return nil, err
	}
	rows, cols := 1, 1
	shape := []int{p.outSize}
	switch x.Rank() {
	case 0:
	case 1:
		cols = x.Shape[0]
	case 2:
		rows, cols = x.Shape[0], x.Shape[1]
		shape = []int{rows, p.outSize}
	default:
		return nil, fmt.Errorf("TfIdfVectorizer: input must have shape [C] or [B, C], got %s", tensor.ShapeString(x.Shape))
	}
	freq := make([]int64, rows*p.outSize)
	ints, strs := n.Ints("pool_int64s", nil), n.Attrs["pool_strings"]
	if (len(ints) > 0) == (strs != nil && len(strs.Strings) > 0) {
		return nil, fmt.Errorf("TfIdfVectorizer: exactly one of pool_int64s and pool_strings must be set")
	}
	switch d := x.Data.(type) {
	case []string:
		if strs == nil {
			return nil, fmt.Errorf("TfIdfVectorizer: string input needs pool_strings")
		}
		root, err := build(p, strs.Strings)
		if err != nil {
			return nil, err
		}
		for r := range rows {
			count(p, root, d[r*cols:(r+1)*cols], freq[r*p.outSize:])
		}
	case []int32, []int64:
		if len(ints) == 0 {
			return nil, fmt.Errorf("TfIdfVectorizer: integer input needs pool_int64s")
		}
		root, err := build(p, ints)
		if err != nil {
			return nil, err
		}
		v, _ := x.Int64s()
		for r := range rows {
			count(p, root, v[r*cols:(r+1)*cols], freq[r*p.outSize:])
		}
	default:
		return nil, fmt.Errorf("TfIdfVectorizer: input must be string, int32 or int64, got %v", x.DType)
	}
	out := make([]float32, len(freq))
	for i, f := range freq {
		col := i % p.outSize
		switch {
		case p.mode == "TF":
			out[i] = float32(f)
		case p.mode == "IDF" && f > 0:
			out[i] = 1
			if p.weights != nil {
				out[i] = p.weights[col]
			}
		case p.mode == "TFIDF":
			out[i] = float32(f)
			if p.weights != nil {
				out[i] = float32(float64(p.weights[col]) * float64(f))
			}
		}
	}
	return []*tensor.Tensor{tensor.From(out, shape...)}, nil
}

func inferTfIdf(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) == 0 || !in[0].Present {
		return nil, fmt.Errorf("TfIdfVectorizer: missing input")
	}
	p, err := parseTfIdf(n)
	if err != nil {
		return nil, err
	}
	x := in[0].Type
	t := ir.Type{DType: tensor.Float32}
	if !x.RankKnown {
		return []ir.Type{t}, nil
	}
	t.RankKnown = true
	switch len(x.Shape) {
	case 0, 1:
		t.Shape = []ir.Dim{ir.Fixed(p.outSize)}
	case 2:
		t.Shape = []ir.Dim{x.Shape[0], ir.Fixed(p.outSize)}
	default:
		return nil, fmt.Errorf("TfIdfVectorizer: input must have rank 1 or 2, got %d", len(x.Shape))
	}
	return []ir.Type{t}, nil
}
