package engine_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"strings"
	"testing"

	. "github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/gputest"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// The elementwise family's placement, op by op: what runs on the GPU (and
// as which kernels) and what stays on the CPU, with a reason.
func TestPlaceElementwise(t *testing.T) {
	f4 := ir.StaticType(tensor.Float32, []int{1, 3, 8, 8})
	types := map[string]ir.Type{
		"x": f4, "b": ir.StaticType(tensor.Float32, []int{3, 1, 1}), "s": ir.StaticType(tensor.Int64, []int{2}),
		"m": ir.StaticType(tensor.Int64, []int{1, 8}), "q": ir.StaticType(tensor.Bool, []int{4}), "h": ir.StaticType(tensor.Float16, []int{4}),
		"u": {DType: tensor.Float32}, "x3": ir.StaticType(tensor.Float32, []int{3, 8, 8}), "sc1": ir.StaticType(tensor.Float32, []int{1, 3, 1, 1}),
	}
	str := func(name, v string) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrString, S: v} }
	num := func(name string, v int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInt, I: v} }
	silu := &ir.Node{Name: "silu", OpType: "Elementwise", Domain: fused.Domain, Version: 1, Inputs: []string{"x"}, Outputs: []string{"y"}}
	body := func(nodes ...*ir.Node) *ir.Attr {
		g := &ir.Graph{Inputs: []*ir.Value{{Name: "x"}}, Outputs: []*ir.Value{{Name: nodes[len(nodes)-1].Outputs[0]}}, Nodes: nodes}
		return &ir.Attr{Name: "body", Kind: ir.AttrGraph, G: g}
	}
	silu.Attrs = map[string]*ir.Attr{"body": body(
		&ir.Node{Name: "sig", OpType: "Sigmoid", Version: 13, Inputs: []string{"x"}, Outputs: []string{"sg"}},
		&ir.Node{Name: "mul", OpType: "Mul", Version: 14, Inputs: []string{"x", "sg"}, Outputs: []string{"z"}})}
	mask := &ir.Node{Name: "mask", OpType: "Elementwise", Domain: fused.Domain, Version: 1, Inputs: []string{"x", "one", "big"}, Outputs: []string{"y"}}
	mask.Attrs = map[string]*ir.Attr{"body": body(
		&ir.Node{Name: "sub", OpType: "Sub", Version: 14, Inputs: []string{"one", "x"}, Outputs: []string{"d"}},
		&ir.Node{Name: "mul", OpType: "Mul", Version: 14, Inputs: []string{"d", "big"}, Outputs: []string{"z"}})}
	mask.Attrs["body"].G.Inputs = []*ir.Value{{Name: "x"}, {Name: "one"}, {Name: "big"}}
	powb := &ir.Node{Name: "pow", OpType: "Elementwise", Domain: fused.Domain, Version: 1, Inputs: []string{"x", "two"}, Outputs: []string{"y"}}
	powb.Attrs = map[string]*ir.Attr{"body": body(
		&ir.Node{Name: "pow", OpType: "Pow", Version: 15, Inputs: []string{"x", "two"}, Outputs: []string{"p"}},
		&ir.Node{Name: "neg", OpType: "Neg", Version: 13, Inputs: []string{"p"}, Outputs: []string{"z"}})}
	powb.Attrs["body"].G.Inputs = []*ir.Value{{Name: "x"}, {Name: "two"}}
	fusedConv := func(act string, attrs ...*ir.Attr) *ir.Node {
		n := &ir.Node{Name: "conv+" + act, OpType: fused.OpFused, Domain: fused.Domain, Version: 1, Inputs: []string{"x", "w", "bias"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{}}
		fused.Layer{Base: "Conv", BaseVersion: 11, BaseInputs: 3, Activation: act, ActVersion: 13}.SetAttrs(n.Attrs)
		n.Attrs["kernel_shape"] = &ir.Attr{Name: "kernel_shape", Kind: ir.AttrInts, Ints: []int64{3, 3}}
		for _, a := range attrs {
			n.Attrs[a.Name] = a
		}
		return n
	}
	for _, c := range []struct {
		n      *ir.Node
		kernel string // "" : on the CPU, for the reason want
		want   string
	}{
		{&ir.Node{OpType: "Sub", Version: 14, Inputs: []string{"x", "x"}}, "vx_arith(Sub)", ""},
		{&ir.Node{OpType: "Mul", Version: 14, Inputs: []string{"x", "b"}}, "vx_arith_bcast(Mul)", ""},
		{&ir.Node{OpType: "Mul", Version: 14, Inputs: []string{"s", "s"}, Outputs: []string{"s"}}, "", "Mul of integers: shape arithmetic stays on the host"},
		{&ir.Node{OpType: "Sub", Version: 14, Inputs: []string{"x", "u"}}, "", "Sub of other than float32 operands of known rank (at most 6)"},
		{&ir.Node{OpType: "Mul", Version: 6, Inputs: []string{"x", "b"}, Attrs: map[string]*ir.Attr{"broadcast": num("broadcast", 1)}}, "", "Mul without two operands, or with opset 6's broadcast attribute"},
		{&ir.Node{OpType: "Cast", Version: 19, Inputs: []string{"m"}, Attrs: map[string]*ir.Attr{"to": num("to", int64(tensor.Float32))}}, "vx_cast(int64)", ""},
		{&ir.Node{OpType: "Cast", Version: 19, Inputs: []string{"q"}, Attrs: map[string]*ir.Attr{"to": num("to", int64(tensor.Float32))}}, "vx_cast(bool)", ""},
		{&ir.Node{OpType: "Cast", Version: 5, Inputs: []string{"x"}, Attrs: map[string]*ir.Attr{"to": str("to", "FLOAT")}}, "vx_cast(float32)", ""},
		{&ir.Node{OpType: "Cast", Version: 19, Inputs: []string{"h"}, Attrs: map[string]*ir.Attr{"to": num("to", int64(tensor.Float32))}}, "", "Cast from float16 (the GPU casts float32, int64, int32 and bool to float32)"},
		{&ir.Node{OpType: "Cast", Version: 19, Inputs: []string{"m"}, Attrs: map[string]*ir.Attr{"to": num("to", int64(tensor.Int32))}}, "", "no exact GPU kernel for Cast yet"},
		{&ir.Node{OpType: "Sigmoid", Version: 13, Inputs: []string{"x"}}, "vx_unary(Sigmoid)", ""},
		{&ir.Node{OpType: "Tanh", Version: 13, Inputs: []string{"x"}}, "vx_unary(Tanh)", ""},
		{&ir.Node{OpType: "Gelu", Version: 20, Inputs: []string{"x"}, Attrs: map[string]*ir.Attr{"approximate": str("approximate", "tanh")}}, "vx_unary(GeluTanh)", ""},
		{&ir.Node{OpType: "Gelu", Version: 20, Inputs: []string{"x"}, Attrs: map[string]*ir.Attr{"approximate": str("approximate", "fast")}}, "", `Gelu approximate "fast"`},
		{&ir.Node{OpType: "HardSwish", Version: 14, Inputs: []string{"x"}}, "vx_act(HardSwish)", ""},
		{&ir.Node{OpType: "LeakyRelu", Version: 16, Inputs: []string{"x"}}, "vx_act(LeakyRelu)", ""},
		{&ir.Node{OpType: "Celu", Version: 12, Inputs: []string{"x"}, Attrs: map[string]*ir.Attr{"alpha": {Name: "alpha", Kind: ir.AttrFloat, F: 0}}}, "", "Celu with alpha 0"},
		{&ir.Node{OpType: "Abs", Version: 13, Inputs: []string{"s"}, Outputs: []string{"s"}}, "", "Abs of integers: shape arithmetic stays on the host"},
		{&ir.Node{OpType: "Sin", Version: 7, Inputs: []string{"x"}}, "", "no exact GPU kernel for Sin yet"},
		{silu, "body(vx_unary(Sigmoid),vx_arith_bcast(Mul))", ""},
		{mask, "body(vx_arith_bcast(Sub),vx_arith_bcast(Mul))", ""},
		{powb, "", "body layer pow: no exact GPU kernel for Pow yet"},
		{&ir.Node{OpType: fused.ChannelMul, Domain: fused.Domain, Version: 1, Inputs: []string{"x", "sc1"}}, "vx_arith_bcast(Mul)", ""},
		{&ir.Node{OpType: nn.OpScaleShift, Domain: fused.Domain, Version: 1, Inputs: []string{"x", "a", "bias"}, Attrs: map[string]*ir.Attr{"relu": num("relu", 1)}}, "vx_scale_shift(Relu)", ""},
		{&ir.Node{OpType: nn.OpScaleShift, Domain: fused.Domain, Version: 1, Inputs: []string{"x", "a", "x"}}, "", "ScaleShift whose x is not a float32 constant"},
		{fusedConv(fused.SiLU), "vx_conv2d+vx_act(SiLU)", ""},
		{fusedConv(fused.HardSigmoidMul, num(fused.AttrSigmoidFirst, 1)), "vx_conv2d+vx_act(HardSigmoidMul(gate first))", ""},
		{fusedConv("Sigmoid"), "vx_conv2d+vx_unary(Sigmoid)", ""},
		{fusedConv("Relu"), "vx_conv2d+vx_unary(Relu)", ""}, // place.go's epilogue
		{fusedConv(fused.SiLU, &ir.Attr{Name: "auto_pad", Kind: ir.AttrString, S: "SAME_UPPER"}), "", "Conv with auto_pad"},
		{fusedConv("Sin"), "", "fused activation Sin: no exact GPU kernel for Sin yet"},
		{&ir.Node{OpType: "Resize", Version: 19, Inputs: []string{"x", "", "sc"}, Attrs: map[string]*ir.Attr{"mode": str("mode", "linear")}}, "vx_resize(linear)", ""},
		{&ir.Node{OpType: "Resize", Version: 19, Inputs: []string{"x", "", "sc"}, Attrs: map[string]*ir.Attr{"mode": str("mode", "cubic")}}, "vx_resize(cubic)", ""},
		{&ir.Node{OpType: "Resize", Version: 19, Inputs: []string{"x", "", "sc"}}, "vx_gather(map)", ""}, // nearest: place.go's
		{&ir.Node{OpType: "Resize", Version: 19, Inputs: []string{"x", "", "b"}, Attrs: map[string]*ir.Attr{"mode": str("mode", "linear")}}, "", "Resize whose input b is not a constant"},
		{&ir.Node{OpType: "Resize", Version: 19, Inputs: []string{"x3", "", "sc"}, Attrs: map[string]*ir.Attr{"mode": str("mode", "linear")}}, "", "Resize of other than a rank-4 float32 value"},
		{&ir.Node{OpType: "Resize", Version: 19, Inputs: []string{"x", "", "sc"}, Attrs: map[string]*ir.Attr{"mode": str("mode", "linear"),
			"coordinate_transformation_mode": str("coordinate_transformation_mode", "tf_crop_and_resize")}}, "", "Resize tf_crop_and_resize (extrapolated values)"},
		{&ir.Node{OpType: "Upsample", Version: 9, Inputs: []string{"x", "sc"}, Attrs: map[string]*ir.Attr{"mode": str("mode", "bilinear")}}, "vx_resize(linear)", ""},
	} {
		n := c.n
		if n.Name == "" {
			n.Name = n.OpType
		}
		if n.Outputs == nil {
			n.Outputs = []string{"y"}
		}
		if n.Attrs == nil {
			n.Attrs = map[string]*ir.Attr{}
		}
		g := &ir.Graph{Nodes: []*ir.Node{n}, Initializers: map[string]*tensor.Tensor{"sc": tensor.From([]float32{1, 1, 2, 2}, 4),
			"a": tensor.From([]float32{1, 2, 3}, 3), "bias": tensor.From([]float32{1, 2, 3}, 3), "w": tensor.From(make([]float32, 81), 3, 3, 3, 3),
			"one": tensor.Scalar(float32(1)), "big": tensor.Scalar(float32(-10000)), "two": tensor.Scalar(float32(2))}}
		ty := map[string]ir.Type{"a": ir.StaticType(tensor.Float32, []int{3}), "one": ir.StaticType(tensor.Float32, nil), "big": ir.StaticType(tensor.Float32, nil),
			"two": ir.StaticType(tensor.Float32, nil)}
		for k, v := range types {
			ty[k] = v
		}
		l := Place(g, ty)[0]
		name := fmt.Sprintf("%s %v", n.Name, n.Inputs)
		switch {
		case c.kernel == "" && (l.Backend != plan.BackendCPU || l.Reason != c.want):
			t.Errorf("%s: placed on %s %q (%q), want the CPU for %q", name, l.Backend, l.Kernel, l.Reason, c.want)
		case c.kernel != "" && (l.Backend != plan.BackendCUDA || l.Kernel != c.kernel):
			t.Errorf("%s: placed on %s %q (%s), want cuda %q", name, l.Backend, l.Kernel, l.Reason, c.kernel)
		}
	}
}

// The GPU's linear and cubic Resize runs kernel/image's stencils (the CPU
// kernel's own code) packed into one table: vx_resize's loops over that
// table on the host (exact.HostResize) give the CPU Resize's bits, NaN,
// ±Inf, -0 and subnormals included.
func TestResizeStencilTable(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	specials := []float32{float32(math.NaN()), float32(math.Copysign(0, -1)), math.Float32frombits(1), float32(math.Inf(-1)), float32(math.Inf(1)), 3e38}
	for _, c := range gputest.LinearResizeCases(r, 120) {
		x := make([]float32, tensor.NumElems(c.Shape))
		for j := range x {
			x[j] = float32(r.NormFloat64())
			if r.Intn(9) == 0 {
				x[j] = specials[r.Intn(len(specials))]
			}
		}
		want, err := cpuRun(c.Node, append([]*tensor.Tensor{tensor.From(x, c.Shape...)}, c.Consts...))
		if err != nil {
			t.Fatalf("%s: CPU: %v", c.Node.Name, err)
		}
		g, tab, err := ResizeStencilTable(c.Node, c.Shape, c.Host)
		if err != nil {
			t.Fatalf("%s: %v", c.Node.Name, err)
		}
		if fmt.Sprint(g.Out[:]) != fmt.Sprint(want[0].Shape) {
			t.Fatalf("%s: table for %v, the CPU's output %v", c.Node.Name, g.Out, want[0].Shape)
		}
		got := make([]float32, g.OutLen())
		if err := exact.HostResize(g, tab, x, got); err != nil {
			t.Fatal(err)
		}
		w := want[0].Data.([]float32)
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(w[j]) {
				t.Fatalf("%s (%v, %v): output %d: %#x, the CPU's %#x", c.Node.Name, c.Node.Attrs, c.Consts, j, math.Float32bits(got[j]), math.Float32bits(w[j]))
			}
		}
	}
}

// ResizeTable refuses tables whose offsets or indices leave the input.
func TestResizeTableChecks(t *testing.T) {
	one := exact.Taps{Off: []int{0, 1}, Idx: []int{0}, W: []float32{1}}
	two := exact.Taps{Off: []int{0, 2, 4}, Idx: []int{0, 1, 1, 1}, W: []float32{0.25, 0.75, 1, 0}}
	if _, _, err := exact.ResizeTable([]int{1, 1, 1, 2}, []int{1, 1, 1, 2}, []exact.Taps{one, one, one, two}, true); err != nil {
		t.Fatal(err)
	}
	bad := exact.Taps{Off: []int{0, 2, 4}, Idx: []int{0, 2, 1, 1}, W: []float32{0.25, 0.75, 1, 0}}
	short := exact.Taps{Off: []int{0, 2}, Idx: []int{0, 1}, W: []float32{0.25, 0.75}}
	for _, c := range []struct {
		in, out []int
		taps    []exact.Taps
		want    string
	}{
		{[]int{1, 1, 1, 2}, []int{1, 1, 1, 2}, []exact.Taps{one, one, one, bad}, "index 2 outside 2"},
		{[]int{1, 1, 1, 2}, []int{1, 1, 1, 2}, []exact.Taps{one, one, one, short}, "for 2 outputs"},
		{[]int{1, 1, 2}, []int{1, 1, 2}, []exact.Taps{one, one, two}, "rank 4"},
		{[]int{1, 1, 1, 0}, []int{1, 1, 1, 2}, []exact.Taps{one, one, one, two}, "Resize of"},
	} {
		if _, _, err := exact.ResizeTable(c.in, c.out, c.taps, false); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ResizeTable(%v, %v): %v, want an error with %q", c.in, c.out, err, c.want)
		}
	}
}

// The CPU's Cast of int64 to float32 is correctly rounded (to nearest,
// ties to even), which is what the GPU's __ll2float_rn computes: checked
// against math/big on hard cases (ties, just past ties, the extremes).
func TestCastInt64Rounding(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	vals := []int64{0, 1, -1, 1 << 24, 1<<24 + 1, 1<<24 + 3, -(1<<25 + 3), 1<<53 + 1, math.MaxInt64, math.MinInt64, math.MinInt64 + 1, 1<<62 + 1<<38, 1<<62 + 1<<38 + 1}
	for range 20000 {
		v := int64(r.Uint64()) >> r.Intn(64)
		vals = append(vals, v)
		// A tie between two float32s at v's magnitude.
		if sh := 64 - 1 - 24 - r.Intn(30); sh > 0 && v != 0 {
			vals = append(vals, (v>>sh|1)<<(sh-1))
		}
	}
	to := &ir.Attr{Name: "to", Kind: ir.AttrInt, I: int64(tensor.Float32)}
	out, err := cpuRun(&ir.Node{OpType: "Cast", Version: 19, Attrs: map[string]*ir.Attr{"to": to}, Outputs: []string{"y"}}, []*tensor.Tensor{tensor.From(vals, len(vals))})
	if err != nil {
		t.Fatal(err)
	}
	got := out[0].Data.([]float32)
	for i, v := range vals {
		want, _ := new(big.Float).SetPrec(24).SetMode(big.ToNearestEven).SetInt64(v).Float32()
		if math.Float32bits(got[i]) != math.Float32bits(want) {
			t.Fatalf("Cast(%d) = %v, correctly rounded %v", v, got[i], want)
		}
	}
}

// CastWords moves an integer or bool tensor's bytes as they are (the
// kernel reads int64s, int32s or bytes from them).
func TestCastWords(t *testing.T) {
	w, err := CastWords(tensor.From([]int64{1, -2}, 2))
	if err != nil || len(w) != 4 || math.Float32bits(w[0]) != 1 || math.Float32bits(w[1]) != 0 || math.Float32bits(w[2]) != 0xfffffffe || math.Float32bits(w[3]) != 0xffffffff {
		t.Fatalf("int64: %v, %v", w, err)
	}
	w, err = CastWords(tensor.From([]bool{true, false, true, true, true}, 5))
	if err != nil || len(w) != 2 || math.Float32bits(w[0]) != 0x01010001 || math.Float32bits(w[1]) != 1 {
		t.Fatalf("bool: %#x, %v", math.Float32bits(w[0]), err)
	}
	if _, err := CastWords(tensor.From([]float64{1}, 1)); err == nil {
		t.Fatal("float64 accepted")
	}
}
