package exact

import (
	"strings"
	"testing"
)

// Bad arguments are refused before anything reaches the driver, so these
// run on any CPU with a zero Engine.
func TestArgumentErrors(t *testing.T) {
	e := &Engine{}
	for name, err := range map[string]error{
		"unary":     e.Unary(nil, Unary(99), 0, 0, 1),
		"sgemm":     e.SGEMM(nil, 0, 4, 4, Mat{}, Mat{}, 0, 4),
		"conv":      e.Conv2D(nil, ConvGeom{N: 1, C: 3, M: 4, G: 2, OH: 1, OW: 1}, 0, 0, 0, 0, false, 0),
		"softmax":   e.Softmax(nil, 0, 0, 1, 0),
		"layernorm": e.LayerNorm(nil, 0, 0, 0, 1e-5, 0, 1, 0),
	} {
		if err == nil || !strings.HasPrefix(err.Error(), "exact: ") {
			t.Errorf("%s: err = %v, want an exact: error", name, err)
		}
	}
}

func TestUnaryNames(t *testing.T) {
	if Relu.String() != "Relu" || GeluTanh.String() != "GeluTanh" || Unary(42).String() != "Unary(42)" {
		t.Fatal(Relu.String(), GeluTanh.String(), Unary(42).String())
	}
}
