package nn_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/tensor"
)

const models = "../../../shared/models"

func loadModel(tb testing.TB, name string) (*exec.Executor, map[string]*tensor.Tensor) {
	tb.Helper()
	m, err := onnx.DecodeFile(filepath.Join(models, name, "model.onnx"))
	if err != nil {
		tb.Skipf("model %s: %v", name, err)
	}
	ex, err := exec.New(m.Graph, builtin.Registry())
	if err != nil {
		tb.Fatal(err)
	}
	feeds := map[string]*tensor.Tensor{}
	for i, v := range m.Graph.Inputs {
		in, _, err := onnx.DecodeTensorFile(filepath.Join(models, name, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			tb.Fatal(err)
		}
		feeds[v.Name] = in
	}
	return ex, feeds
}

// TestModelsTwin runs whole models at every instruction-set level (the
// portable twins, AVX2, AVX-512): the outputs must be the same bits.
func TestModelsTwin(t *testing.T) {
	if testing.Short() || !amd64.Enabled {
		t.Skip("slow (portable path), or no vector kernels here")
	}
	t.Parallel()
	for _, name := range []string{"mobilenet_v2", "resnet18"} {
		ex, feeds := loadModel(t, name)
		var port map[string]*tensor.Tensor
		for _, l := range kernel.ISAs() {
			if err := ex.SetCPU(exec.CPU{ISA: l}); err != nil {
				t.Fatal(err)
			}
			got, err := ex.Run(feeds)
			if err != nil {
				t.Fatal(err)
			}
			if port == nil {
				port = got
				continue
			}
			for k, v := range got {
				if !bytes.Equal(tensor.RawBytes(v), tensor.RawBytes(port[k])) {
					t.Errorf("%s: output %s differs between %v and the portable twins", name, k, l)
				}
			}
		}
	}
}

// BenchmarkModel is single-inference latency through the executor; run
// with -cpu 1 (one worker) and -cpu 2.
func BenchmarkModel(b *testing.B) {
	for _, name := range []string{"resnet18", "mobilenet_v2"} {
		b.Run(name, func(b *testing.B) {
			ex, feeds := loadModel(b, name)
			if _, err := ex.Run(feeds); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := ex.Run(feeds); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/inference")
		})
	}
}
