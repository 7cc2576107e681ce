package engine

import (
	"testing"

	"github.com/vouchml/vouch/cuda/fast"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// parseFast reads the int8 kernel names PlaceFast writes and refuses an
// int8 op fast_int8.cu lacks.
func TestParseFastInt8(t *testing.T) {
	conv := &ir.Node{Name: "c", OpType: "Conv"}
	s, _, err := parseFast("fast.int8.conv(128x64 x=3d4ccccd)", conv)
	if err != nil || s.prec != plan.Int8 || s.op != "conv" || s.tile != (fast.Tile{BM: 128, BN: 64}) || s.scale != 0.05 {
		t.Errorf("%+v %v", s, err)
	}
	if _, _, err := parseFast("fast.int8.matmul(64x64 x=3d4ccccd)", &ir.Node{Name: "m", OpType: "MatMul"}); err == nil {
		t.Error("an int8 matmul accepted")
	}
	for _, bad := range []string{"fast.int8.conv(128x64)", "fast.int8.conv(128x64 x=3d4cccc)", "fast.int8.conv(128x64 x=00000000)", "fast.int8.conv(128x64 x=7f800000)", "fast.fp16.conv(128x64 x=3d4ccccd)"} {
		if _, _, err := parseFast(bad, conv); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, _, err := parseFast("fast.int4.conv(64x64)", conv); err == nil {
		t.Error("int4 accepted")
	}
}

// A Gemm's B, [K][N] or transposed [N][K], quantizes to the same rows
// (one per output feature); a Conv's rows are its output channels.
func TestInt8Weights(t *testing.T) {
	K, N := 5, 3
	b := make([]float32, K*N)
	bt := make([]float32, N*K)
	for k := range K {
		for j := range N {
			v := float32(k*10+j) - 17.25
			b[k*N+j], bt[j*K+k] = v, v
		}
	}
	g := &ir.Graph{Initializers: map[string]*tensor.Tensor{"b": tensor.From(b, K, N), "bt": tensor.From(bt, N, K)}}
	w1, err := int8Weights(&ir.Node{Name: "g1", OpType: "Gemm", Inputs: []string{"x", "b"}}, g)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := int8Weights(&ir.Node{Name: "g2", OpType: "Gemm", Inputs: []string{"x", "bt"}, Attrs: map[string]*ir.Attr{"transB": {Name: "transB", Kind: ir.AttrInt, I: 1}}}, g)
	if err != nil {
		t.Fatal(err)
	}
	if w1.M != N || w1.K != K || w2.M != N || w2.K != K {
		t.Fatalf("%dx%d and %dx%d, want %dx%d", w1.M, w1.K, w2.M, w2.K, N, K)
	}
	for i := range w1.Q {
		if w1.Q[i] != w2.Q[i] {
			t.Fatalf("value %d: %d vs %d", i, w1.Q[i], w2.Q[i])
		}
	}
	want, _ := fast.QuantizeWeights(bt, N, K, K, 1)
	for m := range N {
		if w1.Scale[m] != want.Scale[m] || w1.Q[m*K] != want.Q[m*K] {
			t.Fatalf("row %d differs from the [N][K] quantization", m)
		}
	}
	if _, err := int8Weights(&ir.Node{Name: "m", OpType: "MatMul", Inputs: []string{"x", "b"}}, g); err == nil {
		t.Error("a MatMul's weights quantized")
	}
}
