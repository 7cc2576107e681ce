package text

import (
	"fmt"
	"strings"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// runStringNormalizer removes stopwords from a [C] or [1, C] string tensor,
// then changes the case of what is left. With is_case_sensitive 0 a word
// is a stopword when its lower-case form equals a stopword's. When every
// word is removed the output is one empty string ([1] or [1, 1]), as in
// ONNX Runtime.
func runStringNormalizer(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, fmt.Errorf("StringNormalizer: missing input")
	}
	words, ok := x.Data.([]string)
	if !ok {
		return nil, fmt.Errorf("StringNormalizer: input must be a string tensor, got %v", x.DType)
	}
	if !(x.Rank() == 1 || (x.Rank() == 2 && x.Shape[0] == 1)) {
		return nil, fmt.Errorf("StringNormalizer: input must have shape [C] or [1, C], got %s", tensor.ShapeString(x.Shape))
	}
	var change func(string) string
	switch a := n.String("case_change_action", "NONE"); a {
	case "NONE":
	case "LOWER":
		change = strings.ToLower
	case "UPPER":
		change = strings.ToUpper
	default:
		return nil, fmt.Errorf("StringNormalizer: case_change_action must be NONE, LOWER or UPPER, got %q", a)
	}
	sensitive := n.Int("is_case_sensitive", 0) != 0
	key := func(s string) string { return s }
	if !sensitive {
		key = strings.ToLower
	}
	stop := map[string]bool{}
	if a, ok := n.Attrs["stopwords"]; ok {
		for _, w := range a.Strings {
			stop[key(w)] = true
		}
	}
	out := []string{}
	for _, w := range words {
		if stop[key(w)] {
			continue
		}
		if change != nil {
			w = change(w)
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		out = []string{""}
	}
	shape := []int{len(out)}
	if x.Rank() == 2 {
		shape = []int{1, len(out)}
	}
	return []*tensor.Tensor{tensor.From(out, shape...)}, nil
}

func inferStringNormalizer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) == 0 || !in[0].Present {
		return nil, fmt.Errorf("StringNormalizer: missing input")
	}
	x := in[0].Type
	if x.DType != tensor.String && x.DType != tensor.Undefined {
		return nil, fmt.Errorf("StringNormalizer: input must be a string tensor, got %v", x.DType)
	}
	t := ir.Type{DType: tensor.String}
	if !x.RankKnown {
		return []ir.Type{t}, nil
	}
	t.RankKnown = true
	switch len(x.Shape) {
	case 1:
		t.Shape = []ir.Dim{ir.Unknown}
	case 2:
		t.Shape = []ir.Dim{ir.Fixed(1), ir.Unknown}
	default:
		return nil, fmt.Errorf("StringNormalizer: input must have rank 1 or 2, got %d", len(x.Shape))
	}
	return []ir.Type{t}, nil
}
