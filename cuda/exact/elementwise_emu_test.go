package exact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

// TestElementwiseKernelsEmulated runs elementwise.cu itself on the CPU
// (exact.cu and elementwise.cu compiled by the host C++ compiler under
// emuPrelude, rnn_emu_test.go's stand-ins for the CUDA builtins, with
// IEEE float32 arithmetic) and compares every kernel's outputs with the
// CPU registry's operator on data full of NaN, ±Inf, ±0 and subnormals:
// vx_act's activations, vx_arith and vx_arith_bcast, vx_cast, vx_scale_shift.
// (vx_resize's loops are checked by HostResize against kernel/image in
// cuda/engine.) A NaN must meet a NaN; its payload is not compared.
// Skipped without g++ or with -short.
func TestElementwiseKernelsEmulated(t *testing.T) {
	dir, bin := buildEmu(t, "elementwise.cu", emuPrelude+ewEmuPrelude, ewEmuDriver)
	r := rand.New(rand.NewSource(5))
	run := func(name string, in []byte, n int) []float32 {
		t.Helper()
		got := runEmu(t, dir, bin, in, name)
		if len(got) != n {
			t.Fatalf("%s: the emulation wrote %d floats for %d", name, len(got), n)
		}
		return got
	}
	check := func(name string, got, want []float32) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d outputs, the CPU's %d", name, len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
				t.Fatalf("%s: output %d: %#08x (%v), the CPU's %#08x (%v)", name, i, math.Float32bits(g), g, math.Float32bits(w), w)
			}
		}
	}
	cpu := func(op string, version int64, attrs []*ir.Attr, ins ...*tensor.Tensor) []float32 {
		t.Helper()
		n := &ir.Node{OpType: op, Version: version, Attrs: map[string]*ir.Attr{}, Outputs: []string{"y"}}
		for _, a := range attrs {
			n.Attrs[a.Name] = a
		}
		if op == "ScaleShift" {
			n.Domain = "vouch"
		}
		k, err := builtin.Registry().Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		out, err := k.Run(&kernel.Ctx{}, n, ins)
		if err != nil {
			t.Fatal(err)
		}
		return out[0].Data.([]float32)
	}
	fa := func(name string, v float32) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrFloat, F: v} }

	x := emuData(r, 30011)
	xt := tensor.From(x, len(x))
	var buf bytes.Buffer
	w := func(v ...any) {
		for _, x := range v {
			binary.Write(&buf, binary.LittleEndian, x)
		}
	}
	act := func(op ActOp, p0, p1 float32, want []float32) {
		buf.Reset()
		w(int32(0), int32(op), p0, p1, int64(len(x)), x)
		check(fmt.Sprintf("vx_act %v(%v, %v)", op, p0, p1), run(op.String(), buf.Bytes(), len(x)), want)
	}
	act(EwLeakyRelu, 0.1, 0, cpu("LeakyRelu", 16, []*ir.Attr{fa("alpha", 0.1)}, xt))
	act(EwHardSigmoid, 0.2, 0.5, cpu("HardSigmoid", 6, nil, xt))
	act(EwHardSigmoid, 1.0/6, 0.5, cpu("HardSigmoid", 6, []*ir.Attr{fa("alpha", 1.0/6), fa("beta", 0.5)}, xt))
	act(EwHardSwish, 0, 0, cpu("HardSwish", 14, nil, xt))
	act(EwNeg, 0, 0, cpu("Neg", 13, nil, xt))
	act(EwAbs, 0, 0, cpu("Abs", 13, nil, xt))
	act(EwSqrt, 0, 0, cpu("Sqrt", 13, nil, xt))
	act(EwReciprocal, 0, 0, cpu("Reciprocal", 13, nil, xt))
	act(EwElu, 0.7, 0, cpu("Elu", 6, []*ir.Attr{fa("alpha", 0.7)}, xt))
	act(EwSoftplus, 0, 0, cpu("Softplus", 1, nil, xt))
	act(EwSoftsign, 0, 0, cpu("Softsign", 1, nil, xt))
	act(EwMish, 0, 0, cpu("Mish", 18, nil, xt))
	act(EwSelu, 1.67326319217681884765625, 1.05070102214813232421875, cpu("Selu", 6, nil, xt))
	act(EwCelu, 0.6, 0, cpu("Celu", 12, []*ir.Attr{fa("alpha", 0.6)}, xt))
	act(EwThresholdedRelu, 0.3, 0, cpu("ThresholdedRelu", 10, []*ir.Attr{fa("alpha", 0.3)}, xt))
	act(EwSign, 0, 0, cpu("Sign", 13, nil, xt))
	act(EwFloor, 0, 0, cpu("Floor", 13, nil, xt))
	act(EwCeil, 0, 0, cpu("Ceil", 13, nil, xt))
	act(EwRound, 0, 0, cpu("Round", 11, nil, xt))
	act(EwReluMax, 0, 0, cpu("Relu", 14, nil, xt))
	sig := tensor.From(cpu("Sigmoid", 13, nil, xt), len(x))
	act(EwSiLU, 0, 0, cpu("Mul", 14, nil, xt, sig))
	act(EwSiLUSigmoidFirst, 0, 0, cpu("Mul", 14, nil, sig, xt))
	hs := tensor.From(cpu("HardSigmoid", 6, []*ir.Attr{fa("alpha", 1.0/6), fa("beta", 0.5)}, xt), len(x))
	act(EwHardSigmoidMul, 1.0/6, 0.5, cpu("Mul", 14, nil, xt, hs))
	act(EwHardSigmoidMulSF, 1.0/6, 0.5, cpu("Mul", 14, nil, hs, xt))

	// Arithmetic, same shape and broadcast.
	for _, op := range []Arith{ArithAdd, ArithSub, ArithMul, ArithDiv} {
		b := emuData(r, len(x))
		buf.Reset()
		w(int32(1), int32(op), int64(len(x)), x, b)
		check(fmt.Sprintf("vx_arith %v", op), run("arith", buf.Bytes(), len(x)), cpu(op.String(), 14, nil, xt, tensor.From(b, len(b))))
		for range 12 {
			sa, sb := emuShapes(r)
			a, b := emuData(r, tensor.NumElems(sa)), emuData(r, tensor.NumElems(sb))
			c, err := Broadcast(sa, sb)
			if err != nil {
				t.Fatal(err)
			}
			buf.Reset()
			w(int32(2), c.geom(), int32(op), int64(len(a)), a, int64(len(b)), b, int64(c.N()))
			check(fmt.Sprintf("vx_arith_bcast %v %v %v", op, sa, sb), run("bcast", buf.Bytes(), c.N()),
				cpu(op.String(), 14, nil, tensor.From(a, sa...), tensor.From(b, sb...)))
		}
	}

	// Cast.
	n := 20000
	i64 := make([]int64, n)
	i32 := make([]int32, n)
	bs := make([]bool, n)
	for i := range i64 {
		i64[i] = int64(r.Uint64()) >> r.Intn(64)
		if r.Intn(2) == 0 {
			i64[i] = -i64[i]
		}
		i32[i] = int32(i64[i])
		bs[i] = r.Intn(2) == 0
	}
	to := &ir.Attr{Name: "to", Kind: ir.AttrInt, I: int64(tensor.Float32)}
	for _, c := range []struct {
		from CastFrom
		t    *tensor.Tensor
		raw  []byte
	}{
		{FromInt64, tensor.From(i64, n), le(i64)}, {FromInt32, tensor.From(i32, n), le(i32)}, {FromBool, tensor.From(bs, n), le(bs)},
		{FromFloat32, tensor.From(x[:n], n), le(x[:n])},
	} {
		buf.Reset()
		w(int32(3), int32(c.from), int64(n), int64(len(c.raw)), c.raw)
		got := run("cast", buf.Bytes(), n)
		want := cpu("Cast", 19, []*ir.Attr{to}, c.t)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("vx_cast from %v: output %d: %#08x, the CPU's %#08x", c.t.DType, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
		}
	}

	// ScaleShift.
	for _, sh := range [][]int{{2, 7, 5, 3}, {3, 5}, {1, 13, 1, 1}} {
		C := sh[1]
		xs, a, b := emuData(r, tensor.NumElems(sh)), emuData(r, C), emuData(r, C)
		for _, relu := range []int32{0, 1} {
			var attrs []*ir.Attr
			if relu == 1 {
				attrs = []*ir.Attr{{Name: "relu", Kind: ir.AttrInt, I: 1}}
			}
			buf.Reset()
			w(int32(4), int64(sh[0]*C), int32(tensor.NumElems(sh[2:])), int32(C), relu, int64(len(xs)), xs, a, b)
			check(fmt.Sprintf("vx_scale_shift %v relu %d", sh, relu), run("ss", buf.Bytes(), len(xs)),
				cpu("ScaleShift", 1, attrs, tensor.From(xs, sh...), tensor.From(a, C), tensor.From(b, C)))
		}
	}
}

func le(v any) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, v)
	return b.Bytes()
}

// emuData is n floats, a fifth of them special (NaN, ±Inf, ±0,
// subnormals, the polynomials' edges, large values).
func emuData(r *rand.Rand, n int) []float32 {
	sp := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(1), math.Float32frombits(0x80000001), math.Float32frombits(0x007fffff), 1e-39, -2.5e-40,
		math.MaxFloat32, -math.MaxFloat32, 88.7, -87.4, 89, -104, 0.625, -0.5, 4, 9.01, 3, -3, 2.5, -2.5, 0.5, 1, -1, 6, -6}
	v := make([]float32, n)
	for i := range v {
		switch r.Intn(5) {
		case 0:
			v[i] = sp[r.Intn(len(sp))]
		case 1:
			v[i] = float32(r.NormFloat64() * 40)
		default:
			v[i] = float32(r.NormFloat64() * 3)
		}
	}
	return v
}

// emuShapes is a pair of shapes that broadcast (rank 1 to 6, odd edges).
func emuShapes(r *rand.Rand) ([]int, []int) {
	rk := 1 + r.Intn(MaxCopyRank)
	a, b := make([]int, rk), make([]int, rk)
	for d := range a {
		a[d] = 1 + r.Intn(5)
		b[d] = a[d]
		switch r.Intn(4) {
		case 0:
			a[d] = 1
		case 1:
			b[d] = 1
		}
	}
	if r.Intn(3) == 0 {
		b = b[r.Intn(rk):]
	}
	return a, b
}

// ewEmuPrelude adds the builtins elementwise.cu uses beyond emuPrelude's.
const ewEmuPrelude = `
inline float __ll2float_rn(long long v) { volatile float r = (float)v; return r; }
inline float __int2float_rn(int v) { volatile float r = (float)v; return r; }
`

// ewEmuDriver reads one launch (a kind, then its arguments), runs it with
// grid-stride loops capped at three blocks and writes the output floats.
const ewEmuDriver = `
#include <cstdio>
#include <cstdlib>
static FILE* in;
static void rd(void* p, size_t n) { if (n && fread(p, 1, n, in) != n) { fprintf(stderr, "short read\n"); exit(2); } }
template <class T> static T get() { T v; rd(&v, sizeof v); return v; }
template <class T> static std::vector<T> arr(long long n) { std::vector<T> v(n + 1); rd(v.data(), n * sizeof(T)); return v; }
static unsigned gridOf(long long n) { long long g = (n + 255) / 256; return (unsigned)std::min(std::max(g, 1LL), 3LL); }
int main(int argc, char** argv) {
	in = fopen(argv[1], "rb");
	int kind = get<int>();
	std::vector<float> y;
	switch (kind) {
	case 0: {
		int op = get<int>(); float p0 = get<float>(), p1 = get<float>(); long long n = get<long long>();
		auto x = arr<float>(n);
		y.assign(n, __int_as_float(0x7fbadbad));
		emu_launch({gridOf(n), 1, 1}, {256, 1, 1}, [&] { vx_act(op, x.data(), y.data(), n, p0, p1); });
		break;
	}
	case 1: {
		int op = get<int>(); long long n = get<long long>();
		auto a = arr<float>(n), b = arr<float>(n);
		y.assign(n, __int_as_float(0x7fbadbad));
		emu_launch({gridOf(n), 1, 1}, {256, 1, 1}, [&] { vx_arith(op, a.data(), b.data(), y.data(), n); });
		break;
	}
	case 2: {
		int f[19]; rd(f, sizeof f);
		copy_geom g; memcpy(&g, f, sizeof g);
		static_assert(sizeof(copy_geom) == 19 * 4, "copy_geom");
		int op = get<int>();
		long long an = get<long long>(); auto a = arr<float>(an);
		long long bn = get<long long>(); auto b = arr<float>(bn);
		long long n = get<long long>();
		y.assign(n, __int_as_float(0x7fbadbad));
		emu_launch({gridOf(n), 1, 1}, {256, 1, 1}, [&] { vx_arith_bcast(g, op, a.data(), b.data(), y.data(), n); });
		break;
	}
	case 3: {
		int from = get<int>(); long long n = get<long long>(), nb = get<long long>();
		std::vector<unsigned char> x(nb + 8); rd(x.data(), nb);
		y.assign(n, __int_as_float(0x7fbadbad));
		emu_launch({gridOf(n), 1, 1}, {256, 1, 1}, [&] { vx_cast(from, x.data(), y.data(), n); });
		break;
	}
	case 4: {
		long long planes = get<long long>(); int S = get<int>(), C = get<int>(), relu = get<int>(); long long n = get<long long>();
		auto x = arr<float>(n), a = arr<float>(C), b = arr<float>(C);
		y.assign(n, __int_as_float(0x7fbadbad));
		emu_launch({gridOf(n), 1, 1}, {256, 1, 1}, [&] { vx_scale_shift(x.data(), a.data(), b.data(), y.data(), planes, S, C, relu); });
		break;
	}
	default:
		fprintf(stderr, "kind %d\n", kind);
		return 2;
	}
	fclose(in);
	FILE* out = fopen(argv[2], "wb");
	fwrite(y.data(), 4, y.size(), out);
	fclose(out);
	return 0;
}
`
