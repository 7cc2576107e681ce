package fused_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestChannelMul: a ChannelMul layer gives the bits of the Mul node it
// replaces (x times a per-channel operand, in either order), NaNs in both
// operands included, for planes of full and partial vectors and rank 3,
// Run and Into (in place too), at every instruction-set level and on 1 and
// 2 workers, and Into allocates nothing.
func TestChannelMul(t *testing.T) {
	reg := builtin.Registry()
	r := rand.New(rand.NewPCG(16, 3))
	nan := func(bits uint32) float32 { return math.Float32frombits(bits) }
	for _, xs := range [][]int{{2, 3, 5, 7}, {1, 4, 16, 16}, {1, 5, 3, 3}, {2, 2, 17}, {1, 3, 1, 1}} {
		for _, first := range []bool{false, true} {
			name := fmt.Sprintf("%v/first=%v", xs, first)
			ss := []int{xs[0], xs[1]}
			for range xs[2:] {
				ss = append(ss, 1)
			}
			x, s := randomTensor(r, xs...), randomTensor(r, ss...)
			xd, sd := x.Data.([]float32), s.Data.([]float32)
			xd[0], xd[len(xd)-1], sd[0] = nan(0xffc00000), nan(0x7fc12345), nan(0xffa00001)
			mul := &ir.Node{Name: "m", OpType: "Mul", Version: 14, Inputs: []string{"x", "s"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{}}
			args := []*tensor.Tensor{x, s}
			if first {
				args = []*tensor.Tensor{s, x}
			}
			op, err := reg.Lookup(mul)
			if err != nil {
				t.Fatal(err)
			}
			w, err := op.Run(&kernel.Ctx{ISA: kernel.ISAPortable}, mul, args)
			if err != nil {
				t.Fatal(err)
			}
			want := w[0]
			f := &ir.Node{Name: "f", OpType: fused.ChannelMul, Domain: fused.Domain, Version: 1, Inputs: []string{"x", "s"}, Outputs: []string{"y"},
				Attrs: map[string]*ir.Attr{fused.AttrScaleFirst: {Name: fused.AttrScaleFirst, Kind: ir.AttrInt, I: map[bool]int64{false: 0, true: 1}[first]}}}
			cm, err := reg.Lookup(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range kernel.ISAs() {
				for _, pool := range []*parallel.Pool{parallel.New(1), parallel.New(2)} {
					c := &kernel.Ctx{ISA: l, Pool: pool, State: new(kernel.State)}
					got, err := cm.Run(c, f, []*tensor.Tensor{x, s})
					if err != nil {
						t.Fatal(err)
					}
					if err := sameBits(got[0], want); err != nil {
						t.Fatalf("%s %v: Run: %v", name, l, err)
					}
					out := []*tensor.Tensor{tensor.New(tensor.Float32, xs...)}
					if err := cm.Into(c, f, []*tensor.Tensor{x, s}, out); err != nil {
						t.Fatal(err)
					}
					if err := sameBits(out[0], want); err != nil {
						t.Fatalf("%s %v: Into: %v", name, l, err)
					}
					inPlace := tensor.From(append([]float32{}, xd...), xs...)
					if err := cm.Into(c, f, []*tensor.Tensor{inPlace, s}, []*tensor.Tensor{inPlace}); err != nil {
						t.Fatal(err)
					}
					if err := sameBits(inPlace, want); err != nil {
						t.Fatalf("%s %v: Into in place: %v", name, l, err)
					}
					xin := []*tensor.Tensor{x, s}
					if allocs := testing.AllocsPerRun(5, func() { _ = cm.Into(c, f, xin, out) }); allocs != 0 && !raceEnabled {
						t.Errorf("%s %v: Into allocates %v times", name, l, allocs)
					}
					pool.Close()
				}
			}
		}
	}
}
