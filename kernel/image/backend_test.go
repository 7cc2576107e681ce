package image_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/conformance"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	. "github.com/vouchml/vouch/kernel/image"
	"github.com/vouchml/vouch/tensor"
)

// (An external test: conformance imports exec, which imports cuda/engine,
// which imports this package for the GPU Resize's stencils.)

// TestBackend runs this package's ONNX backend node tests with a registry of
// this package's operators only.
func TestBackend(t *testing.T) {
	if _, err := os.Stat(conformance.DefaultRoot); err != nil {
		t.Skip("ONNX backend test data not installed")
	}
	entries, err := os.ReadDir(conformance.DefaultRoot + "/node")
	if err != nil {
		t.Fatal(err)
	}
	reg := kernel.NewRegistry("", Ops(), kernel.Table{"Constant": {
		Run: func(_ *kernel.Ctx, n *ir.Node, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
			return []*tensor.Tensor{n.Attrs["value"].T}, nil
		},
		Infer: func(n *ir.Node, _ []ir.InferInput) ([]ir.Type, error) {
			return []ir.Type{ir.TensorType(n.Attrs["value"].T)}, nil
		},
	}})
	for _, e := range entries {
		name := e.Name()
		ok := false
		for _, p := range []string{"test_resize", "test_upsample", "test_gridsample", "test_roialign", "test_nonmaxsuppression"} {
			ok = ok || strings.HasPrefix(name, p)
		}
		if !ok {
			continue
		}
		r := conformance.RunTest(conformance.DefaultRoot, "node", name, reg, time.Minute)
		if r.Status != conformance.Pass {
			t.Errorf("%s: %s: %s", name, r.Status, r.Reason)
		}
	}
}
