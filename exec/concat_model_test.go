package exec_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/bench"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

var (
	zooDir    = flag.String("zoo", "", "with TestConcatModels: the model zoo directory (scripts/make-zoo.py) whose models to check")
	zooModels = flag.String("zoo-models", "densenet121,googlenet,inception_v3,squeezenet1_0,squeezenet1_1,unet_small", "with -zoo: the comma-separated zoo models to check")
)

// TestConcatModels: the shared models, and with -zoo the zoo's models with
// Concats, give the same output bits with their Concats planned in place
// and with every Concat copying, at 1 and 2 threads, at batch 1 and 8 (the
// batch-1 export relaxed to a dynamic batch, as `vouch bench --batch`
// does). It logs what the plan made of the Concats.
func TestConcatModels(t *testing.T) {
	type model struct{ name, path string }
	var ms []model
	for _, name := range []string{"digits_cnn", "tiny_bert", "resnet18", "mobilenet_v2"} {
		ms = append(ms, model{name, filepath.Join(models, name, "model.onnx")})
	}
	if testing.Short() {
		ms = ms[:2]
	}
	if *zooDir != "" {
		for _, name := range strings.Split(*zooModels, ",") {
			ms = append(ms, model{name, filepath.Join(*zooDir, name, "model.onnx")})
		}
	}
	for _, m := range ms {
		for _, batch := range []int{1, 8} {
			t.Run(m.name+"/b"+string(rune('0'+batch)), func(t *testing.T) {
				if _, err := os.Stat(m.path); err != nil {
					t.Skip(err)
				}
				bm, err := bench.Load(m.path, bench.Shape{Batch: batch}, 1, compile.DefaultOptions())
				if errors.Is(err, exec.ErrBudget) {
					// inception_v3's arena at the default profile's max
					// batch passes the build's budget: no plan to check.
					t.Skip(err)
				}
				if err != nil {
					t.Fatal(err)
				}
				g := bm.Plan.Graph
				in := make([]*tensor.Tensor, len(g.Inputs))
				for i, v := range g.Inputs {
					in[i] = bm.Inputs[v.Name]
				}
				var want []*tensor.Tensor
				for _, copyAll := range []bool{false, true} {
					for _, threads := range []int{1, 2} {
						got, st, peak := runConcats(t, g, in, copyAll, threads)
						if threads == 1 {
							t.Logf("%s at batch %d, copy all %v: concats %+v, arena %d bytes", m.name, batch, copyAll, st, peak)
						}
						if want == nil {
							want = got
							continue
						}
						for i, o := range g.Outputs {
							if !sameBits(got[i], want[i]) {
								t.Errorf("copy all %v, %d threads: output %q differs from the in-place plan's at 1 thread", copyAll, threads, o.Name)
							}
						}
					}
				}
			})
		}
	}
}

// runConcats runs g once on in and returns a copy of its outputs, what the
// plan made of its Concats and the arena's size.
func runConcats(t *testing.T, g *ir.Graph, in []*tensor.Tensor, copyAll bool, threads int) ([]*tensor.Tensor, exec.ConcatStats, int64) {
	t.Helper()
	b, err := concatExecutor(t, g, copyAll, threads).Bind(shapesOf(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Execute(in)
	if err != nil {
		t.Fatal(err)
	}
	res := make([]*tensor.Tensor, len(out))
	for i, o := range out {
		res[i] = o.Clone()
	}
	return res, b.Concats(), b.Arena().PeakBytes
}
