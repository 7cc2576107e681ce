package nn

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Einsum evaluates every output element as one accumulation over the
// contracted labels, their index tuples visited in row-major order with
// the labels ordered by first appearance in the equation. The term for one
// tuple is the product of the operands' elements, left to right; the last
// factor is fused into the accumulation: acc = FMA(p, last, acc) from +0
// (with one operand, acc += x). Repeated labels within one operand take
// its diagonal; ellipsis dimensions broadcast like NumPy.

type einsumPlan struct {
	sizes    []int   // per label id
	out      []int   // output label ids
	red      []int   // contracted label ids
	strides  [][]int // per operand, per label id: element stride (0 if absent)
	outShape []int
}

const ellBase = 1000 // label ids of ellipsis dimensions

func parseEinsum(eq string, shapes [][]int) (*einsumPlan, error) {
	eq = strings.ReplaceAll(eq, " ", "")
	lhs, rhs, explicit := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	if len(terms) != len(shapes) {
		return nil, fmt.Errorf("nn: Einsum: equation %q has %d operands, got %d inputs", eq, len(terms), len(shapes))
	}
	// Per operand: label id per axis.
	axes := make([][]int, len(terms))
	ellRank := 0
	for i, t := range terms {
		before, after, hasEll := strings.Cut(t, "...")
		if strings.Contains(after, "...") {
			return nil, fmt.Errorf("nn: Einsum: operand %d term %q has more than one ellipsis", i, t)
		}
		nl := len(before) + len(after)
		if !hasEll && nl != len(shapes[i]) || hasEll && nl > len(shapes[i]) {
			return nil, fmt.Errorf("nn: Einsum: term %q does not match operand %d of rank %d", t, i, len(shapes[i]))
		}
		e := 0
		if hasEll {
			e = len(shapes[i]) - nl
			ellRank = max(ellRank, e)
		}
		var ids []int
		for _, ch := range before {
			id, err := labelID(ch)
			if err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		for j := 0; j < e; j++ {
			ids = append(ids, -1-(e-1-j)) // -1 - distance from the last ellipsis dim
		}
		for _, ch := range after {
			id, err := labelID(ch)
			if err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		axes[i] = ids
	}
	// Map ellipsis markers to right-aligned ids.
	for i := range axes {
		for j, id := range axes[i] {
			if id < 0 {
				axes[i][j] = ellBase + (ellRank - 1 - (-1 - id))
			}
		}
	}
	p := &einsumPlan{sizes: make([]int, ellBase+ellRank)}
	for i := range p.sizes {
		p.sizes[i] = -1
	}
	var order []int
	count := map[int]int{}
	for i, ids := range axes {
		for j, id := range ids {
			d := shapes[i][j]
			switch cur := p.sizes[id]; {
			case cur < 0:
				p.sizes[id] = d
				order = append(order, id)
			case cur == d || (id >= ellBase && d == 1):
			case id >= ellBase && cur == 1:
				p.sizes[id] = d
			default:
				return nil, fmt.Errorf("nn: Einsum: label %s has sizes %d and %d", labelName(id), cur, d)
			}
			count[id]++
		}
	}
	if explicit {
		before, after, hasEll := strings.Cut(rhs, "...")
		for _, ch := range before {
			id, err := labelID(ch)
			if err != nil {
				return nil, err
			}
			p.out = append(p.out, id)
		}
		if hasEll {
			for j := 0; j < ellRank; j++ {
				p.out = append(p.out, ellBase+j)
			}
		}
		for _, ch := range after {
			id, err := labelID(ch)
			if err != nil {
				return nil, err
			}
			p.out = append(p.out, id)
		}
		seen := map[int]bool{}
		for _, id := range p.out {
			if seen[id] || (id < ellBase && p.sizes[id] < 0) {
				return nil, fmt.Errorf("nn: Einsum: output label %s repeated or not among the inputs", labelName(id))
			}
			seen[id] = true
		}
	} else {
		for j := 0; j < ellRank; j++ {
			p.out = append(p.out, ellBase+j)
		}
		var once []int
		for id, c := range count {
			if c == 1 && id < ellBase {
				once = append(once, id)
			}
		}
		sort.Ints(once)
		p.out = append(p.out, once...)
	}
	inOut := map[int]bool{}
	for _, id := range p.out {
		inOut[id] = true
		if p.sizes[id] < 0 {
			p.sizes[id] = 1
		}
		p.outShape = append(p.outShape, p.sizes[id])
	}
	for _, id := range order {
		if !inOut[id] {
			p.red = append(p.red, id)
		}
	}
	for i, ids := range axes {
		st := make([]int, len(p.sizes))
		ts := tensor.Strides(shapes[i])
		for j, id := range ids {
			if shapes[i][j] != 1 || p.sizes[id] == 1 {
				st[id] += ts[j]
			}
		}
		p.strides = append(p.strides, st)
	}
	return p, nil
}

func labelID(ch rune) (int, error) {
	switch {
	case ch >= 'a' && ch <= 'z':
		return int(ch - 'a'), nil
	case ch >= 'A' && ch <= 'Z':
		return int(ch-'A') + 26, nil
	}
	return 0, fmt.Errorf("nn: Einsum: invalid label %q", ch)
}

func labelName(id int) string {
	switch {
	case id >= ellBase:
		return fmt.Sprintf("...[%d]", id-ellBase)
	case id >= 26:
		return string(rune('A' + id - 26))
	}
	return string(rune('a' + id))
}

// odometer lists the offsets (per operand) of every index tuple over the
// given labels in row-major order.
func (p *einsumPlan) offsets(labels []int, nops int) [][]int {
	total := 1
	for _, id := range labels {
		total *= p.sizes[id]
	}
	offs := make([][]int, nops)
	for o := range offs {
		offs[o] = make([]int, total)
	}
	idx := make([]int, len(labels))
	cur := make([]int, nops)
	for t := 0; t < total; t++ {
		for o := range offs {
			offs[o][t] = cur[o]
		}
		for d := len(labels) - 1; d >= 0; d-- {
			id := labels[d]
			idx[d]++
			for o := range cur {
				cur[o] += p.strides[o][id]
			}
			if idx[d] < p.sizes[id] {
				break
			}
			for o := range cur {
				cur[o] -= p.strides[o][id] * p.sizes[id]
			}
			idx[d] = 0
		}
	}
	return offs
}

func einsum[T any](p *einsumPlan, ops [][]T, mul func(a, b T) T, mac func(a, b, c T) T) []T {
	outOffs := p.offsets(p.out, len(ops))
	redOffs := p.offsets(p.red, len(ops))
	y := make([]T, len(outOffs[0]))
	last := len(ops) - 1
	for i := range y {
		var acc T
		for r := range redOffs[0] {
			if last == 0 {
				var one T
				acc = mac(ops[0][outOffs[0][i]+redOffs[0][r]], one, acc)
				continue
			}
			prodv := ops[0][outOffs[0][i]+redOffs[0][r]]
			for o := 1; o < last; o++ {
				prodv = mul(prodv, ops[o][outOffs[o][i]+redOffs[o][r]])
			}
			acc = mac(prodv, ops[last][outOffs[last][i]+redOffs[last][r]], acc)
		}
		y[i] = acc
	}
	return y
}

func runEinsum(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("nn: Einsum: needs at least one input")
	}
	shapes := make([][]int, len(in))
	for i, t := range in {
		if t == nil {
			return nil, fmt.Errorf("nn: Einsum: input %d missing", i)
		}
		if t.DType != in[0].DType {
			return nil, fmt.Errorf("nn: Einsum: inputs must share one type, got %v and %v", in[0].DType, t.DType)
		}
		shapes[i] = t.Shape
	}
	p, err := parseEinsum(n.String("equation", ""), shapes)
	if err != nil {
		return nil, err
	}
	switch in[0].DType {
	case tensor.Float64:
		ops := make([][]float64, len(in))
		for i, t := range in {
			ops[i] = t.Data.([]float64)
		}
		// With one operand mac is called with b = 0 meaning "add a".
		y := einsum(p, ops, func(a, b float64) float64 { return a * b }, func(a, b, c float64) float64 {
			if len(in) == 1 {
				return c + a
			}
			return math.FMA(a, b, c)
		})
		return []*tensor.Tensor{tensor.From(y, p.outShape...)}, nil
	case tensor.Float32, tensor.Float16, tensor.BFloat16:
		ops := make([][]float32, len(in))
		for i, t := range in {
			ops[i], _, _ = floatIn(t, "Einsum input")
		}
		y := einsum(p, ops, func(a, b float32) float32 { return a * b }, func(a, b, c float32) float32 {
			if len(in) == 1 {
				return c + a
			}
			return fmaF(a, b, c)
		})
		return []*tensor.Tensor{f32As(in[0].DType, p.outShape, y)}, nil
	}
	// Integers: exact (wrapping) arithmetic on int64, converted back.
	ops := make([][]int64, len(in))
	for i, t := range in {
		v, err := ints64(t, "Einsum input")
		if err != nil {
			return nil, err
		}
		ops[i] = v
	}
	y := einsum(p, ops, func(a, b int64) int64 { return a * b }, func(a, b, c int64) int64 {
		if len(in) == 1 {
			return c + a
		}
		return a*b + c
	})
	f := make([]float64, len(y))
	out := tensor.New(in[0].DType, p.outShape...)
	if d, ok := out.Data.([]int64); ok {
		copy(d, y)
		return []*tensor.Tensor{out}, nil
	}
	for i, v := range y {
		f[i] = float64(v)
	}
	return []*tensor.Tensor{tensor.FromFloat64s(in[0].DType, p.outShape, f)}, nil
}

func inferEinsum(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) == 0 || !in[0].Present {
		return nil, fmt.Errorf("nn: Einsum: needs at least one input")
	}
	dt := in[0].Type.DType
	shapes := make([][]int, len(in))
	for i, x := range in {
		s, ok := x.Type.Static()
		if !ok {
			return []ir.Type{kernel.UnknownRank(dt)}, nil
		}
		shapes[i] = s
	}
	p, err := parseEinsum(n.String("equation", ""), shapes)
	if err != nil {
		return nil, err
	}
	return []ir.Type{ir.StaticType(dt, p.outShape)}, nil
}
