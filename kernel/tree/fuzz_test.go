package tree

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// mutate applies the fuzzer's edits to a copy of n: each 10-byte record
// picks an attribute, an element and a value to write there, or (a
// negative element) a length to cut the array to.
func mutate(n *ir.Node, data []byte) *ir.Node {
	m := &ir.Node{OpType: n.OpType, Domain: n.Domain, Version: n.Version, Attrs: map[string]*ir.Attr{}}
	var names []string
	for k, a := range n.Attrs {
		c := *a
		c.Ints, c.Floats, c.Strings = slices.Clone(a.Ints), slices.Clone(a.Floats), slices.Clone(a.Strings)
		m.Attrs[k] = &c
		names = append(names, k)
	}
	slices.Sort(names)
	for len(data) >= 10 {
		a := m.Attrs[names[int(data[0])%len(names)]]
		el := int(int8(data[1]))
		v := int64(binary.LittleEndian.Uint64(data[2:10]))
		data = data[10:]
		switch a.Kind {
		case ir.AttrInts:
			if el < 0 {
				a.Ints = a.Ints[:min(len(a.Ints), -el-1)]
			} else if len(a.Ints) > 0 {
				a.Ints[el%len(a.Ints)] = v % 1000 // ids near the real ones, sometimes hostile below
				if v&1 == 1 {
					a.Ints[el%len(a.Ints)] = v
				}
			}
		case ir.AttrFloats:
			if el < 0 {
				a.Floats = a.Floats[:min(len(a.Floats), -el-1)]
			} else if len(a.Floats) > 0 {
				a.Floats[el%len(a.Floats)] = math.Float32frombits(uint32(v))
			}
		case ir.AttrStrings:
			if len(a.Strings) > 0 && el >= 0 {
				a.Strings[el%len(a.Strings)] = []string{"LEAF", "BRANCH_LT", "BRANCH_EQ", "BRANCH_GT", "X"}[uint64(v)%5]
			}
		case ir.AttrInt:
			a.I = v % 8
		}
	}
	return m
}

// FuzzFromNode: hostile attribute values give an error or a working
// ensemble, never a panic or a hang; a working one gives the same bits on
// both tactics and local accuracy under background covers.

func FuzzFromNode(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	bases := []*ir.Node{stump("BRANCH_LEQ", 1), twoTrees("SUM"), classifier3("SOFTMAX"), v5(tensor.Float32),
		genNode(rng, genSpec{trees: 3, depth: 3, feats: 3, targets: 2, modes: []string{"BRANCH_LT", "BRANCH_GTE"}, leafStop: 0.2, thresholds: grid})}
	for i := range bases {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), []byte{3, 1, 5, 0, 0, 0, 0, 0, 0, 0, 7, 255, 0, 0, 0, 0, 0, 0, 0, 0})
	}
	f.Fuzz(func(t *testing.T, base uint8, data []byte) {
		n := mutate(bases[int(base)%len(bases)], data)
		e, err := FromNode(n)
		if err != nil {
			return
		}
		x := genInput(rand.New(rand.NewPCG(uint64(len(data)), 1)), 3, max(e.NumFeatures(), 1))
		a, err1 := runNode(n, x, TacticWalk, 1)
		b, err2 := runNode(n, x, "", 1)
		if (err1 == nil) != (err2 == nil) || (err1 == nil && !sameBits(a, b)) {
			t.Fatalf("tactics disagree: %v / %v", err1, err2)
		}
		xs := x.Data.([]float32)
		if e.CoversFromData(xs, 3) != nil {
			return
		}
		nf := e.NumFeatures()
		out := make([]float64, e.NumTargets()*(nf+1))
		if e.SHAP(xs[:nf], nf, out) != nil {
			return
		}
		mg := make([]float64, e.NumTargets())
		e.Margin(xs[:nf], mg)
		scale := 1.0 // the margin is summed in float32: allow its rounding
		for _, w := range append(slices.Clone(e.wv), e.base...) {
			scale += math.Abs(w)
		}
		for m := range mg {
			s := 0.0
			for j := 0; j <= nf; j++ {
				s += out[m*(nf+1)+j]
			}
			if math.Abs(s-mg[m]) > 1e-5*scale && !math.IsNaN(mg[m]) && !math.IsInf(mg[m], 0) {
				t.Fatalf("margin %d: contributions sum to %v, margin %v", m, s, mg[m])
			}
		}
	})
}
