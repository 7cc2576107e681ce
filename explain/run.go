package explain

import (
	"context"
	"fmt"

	"github.com/vouchml/vouch/tensor"
)

// RunNamed adapts a model that takes and returns named tensors (a server
// Runner, a replay engine) to a RunFunc: the rows go in as input, a
// float32 [rows, F] tensor, and output, [rows, classes] (or [rows]), comes
// back. A model run is split into calls of at most maxBatch rows (0: no
// limit); a batch-invariant model gives the same bits either way.
func RunNamed(run func(context.Context, map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error), input, output string, nfeat, maxBatch int) RunFunc {
	return func(ctx context.Context, x []float32, rows int) ([]float32, int, error) {
		step := rows
		if maxBatch > 0 {
			step = min(rows, maxBatch)
		}
		var all []float32
		classes := 0
		for start := 0; start < rows; start += step {
			n := min(step, rows-start)
			outs, err := run(ctx, map[string]*tensor.Tensor{input: tensor.From(x[start*nfeat:(start+n)*nfeat], n, nfeat)})
			if err != nil {
				return nil, 0, err
			}
			t := outs[output]
			if t == nil {
				return nil, 0, fmt.Errorf("model has no output %q", output)
			}
			f, err := t.Float64s()
			if err != nil || len(t.Shape) == 0 || t.Shape[0] != n || len(f)%n != 0 {
				return nil, 0, fmt.Errorf("output %q is %v %v, want [%d, classes] numbers", output, t.DType, t.Shape, n)
			}
			c := len(f) / n
			if classes != 0 && c != classes {
				return nil, 0, fmt.Errorf("output %q changed width", output)
			}
			classes = c
			for _, v := range f {
				all = append(all, float32(v))
			}
		}
		return all, classes, nil
	}
}
