package engine

import (
	"testing"

	"github.com/vouchml/vouch/cuda/fast"
	"github.com/vouchml/vouch/ir"
)

// The attention kernel names parse to their SMAX; others are refused, and
// so is an attention kernel on another layer.
func TestParseFastAttention(t *testing.T) {
	n := &ir.Node{OpType: "Attention"}
	for k, want := range map[string]int{"fast.fp16.attention(s128)": 128, "fast.bf16.attention(s64)": 64} {
		sp, body, err := parseFast(k, n)
		if err != nil || body != nil || sp.op != "attention" || sp.tile != (fast.Tile{BN: want}) {
			t.Errorf("%s: %+v %v %v", k, sp, body, err)
		}
	}
	for _, k := range []string{"fast.fp16.attention(s96)", "fast.fp16.attention(d64 s128)", "fast.fp16.attention(128)", "fast.int8.attention(s128)"} {
		if _, _, err := parseFast(k, n); err == nil {
			t.Errorf("%s: parsed", k)
		}
	}
	if _, _, err := parseFast("fast.fp16.attention(s128)", &ir.Node{OpType: "MatMul"}); err == nil {
		t.Error("an attention kernel on a MatMul parsed")
	}
}
