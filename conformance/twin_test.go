package conformance

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/kernel/q8"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/tensor"
)

// TestPortableTwinsGiveSameBits runs every shared model with the fast
// (AVX2) kernels and again with every package forced onto its portable
// twins, as a machine without AVX2 would, and requires identical bits.
func TestPortableTwinsGiveSameBits(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every shared model twice")
	}
	force := func(on bool) {
		nn.UsePortable(on)
		vmath.UsePortable(on)
		q8.UsePortable(on)
	}
	defer force(false)
	for _, name := range SharedModels {
		dir := filepath.Join(*modelsDir, name)
		m, err := onnx.DecodeFile(filepath.Join(dir, "model.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		ex, err := exec.New(m.Graph, builtin.Registry())
		if err != nil {
			t.Fatal(err)
		}
		feeds := map[string]*tensor.Tensor{}
		for i, v := range m.Graph.Inputs {
			in, _, err := onnx.DecodeTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
			if err != nil {
				t.Fatal(err)
			}
			feeds[v.Name] = in
		}
		var outs [2]map[string]*tensor.Tensor
		for i, portable := range []bool{false, true} {
			force(portable)
			if outs[i], err = ex.Run(feeds); err != nil {
				t.Fatal(err)
			}
		}
		for k, fast := range outs[0] {
			if !bytes.Equal(onnx.RawBytes(fast), onnx.RawBytes(outs[1][k])) {
				t.Errorf("%s: output %q differs between the fast kernels and their portable twins", name, k)
			}
		}
	}
}
