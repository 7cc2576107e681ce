package conformance

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/kerneltest"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/tensor"
)

// TestPortableTwinsGiveSameBits runs every shared model at every
// instruction-set level this CPU has (portable, AVX2, AVX-512: the
// executor's exec.CPU.ISA, as a machine without AVX2 or AVX-512 would run
// it) and requires identical bits.
func TestPortableTwinsGiveSameBits(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every shared model at every level")
	}
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
		var want map[string]*tensor.Tensor
		for i, l := range kerneltest.Levels() {
			if err := ex.SetCPU(exec.CPU{ISA: l}); err != nil {
				t.Fatal(err)
			}
			got, err := ex.Run(feeds)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				want = got
				continue
			}
			for k, w := range want {
				if !bytes.Equal(tensor.RawBytes(w), tensor.RawBytes(got[k])) {
					t.Errorf("%s: output %q differs between %v and the portable twins", name, k, l)
				}
			}
		}
	}
}
