package bench

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// Shape says how to size a model's inputs.
type Shape struct {
	// Batch is the size of every input's first dimension (default 1).
	Batch int
	// Seq is the size of every other dimension the model leaves dynamic
	// (a sequence length; default 64, the length tiny_bert was exported at).
	Seq int
}

func (s Shape) withDefaults() Shape {
	if s.Batch <= 0 {
		s.Batch = 1
	}
	if s.Seq <= 0 {
		s.Seq = 64
	}
	return s
}

// Inputs returns a deterministic input for every graph input: the same
// (graph, shape, seed) always gives the same tensors, and each input's values
// depend only on its own name, type and the seed.
//
// Values follow what models expect: floats uniform in [-1, 1); an int64 or
// int32 input whose name contains "mask" is all ones, one with "type" or
// "segment" all zeros, one with "position" counts 0, 1, ...; any other integer
// input (input_ids) holds ids in [0, min(vocab, 1000)), where vocab is the
// first dimension of the embedding table the input indexes through a Gather,
// or 2 when no such table is found. Bool inputs are true.
//
// The first dimension of each input is shape.Batch when the graph leaves it
// dynamic; a fixed first dimension must equal shape.Batch (see RelaxBatch).
// Every other dynamic dimension is shape.Seq.
func Inputs(g *ir.Graph, shape Shape, seed uint64) (map[string]*tensor.Tensor, error) {
	shape = shape.withDefaults()
	feeds := map[string]*tensor.Tensor{}
	for _, v := range g.Inputs {
		if !v.Type.RankKnown {
			return nil, fmt.Errorf("bench: input %q has unknown rank; cannot generate it", v.Name)
		}
		dims := make([]int, len(v.Type.Shape))
		for i, d := range v.Type.Shape {
			switch {
			case d.Known() && i == 0 && int(d.Value) != shape.Batch:
				return nil, fmt.Errorf("bench: input %q has a fixed batch dimension of %d, not %d (%v)", v.Name, d.Value, shape.Batch, v.Type)
			case d.Known():
				dims[i] = int(d.Value)
			case i == 0:
				dims[i] = shape.Batch
			default:
				dims[i] = shape.Seq
			}
		}
		t, err := fill(g, v.Name, v.Type.DType, dims, seed)
		if err != nil {
			return nil, err
		}
		feeds[v.Name] = t
	}
	return feeds, nil
}

func fill(g *ir.Graph, name string, dt tensor.DType, dims []int, seed uint64) (*tensor.Tensor, error) {
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	t := tensor.New(dt, dims...)
	lower := strings.ToLower(name)
	last := 1
	if len(dims) > 0 {
		last = dims[len(dims)-1]
	}
	intValue := func(i int) int64 {
		switch {
		case strings.Contains(lower, "mask"):
			return 1
		case strings.Contains(lower, "type") || strings.Contains(lower, "segment"):
			return 0
		case strings.Contains(lower, "position"):
			return int64(i % last)
		}
		return 0 // replaced below
	}
	special := strings.Contains(lower, "mask") || strings.Contains(lower, "type") || strings.Contains(lower, "segment") || strings.Contains(lower, "position")
	vocab := min(vocabSize(g, name), 1000)
	switch d := t.Data.(type) {
	case []float32:
		for i := range d {
			d[i] = rng.Float32()*2 - 1
		}
	case []float64:
		for i := range d {
			d[i] = rng.Float64()*2 - 1
		}
	case []int64:
		for i := range d {
			if special {
				d[i] = intValue(i)
			} else {
				d[i] = rng.Int64N(vocab)
			}
		}
	case []int32:
		for i := range d {
			if special {
				d[i] = int32(intValue(i))
			} else {
				d[i] = int32(rng.Int64N(vocab))
			}
		}
	case []bool:
		for i := range d {
			d[i] = true
		}
	default:
		return nil, fmt.Errorf("bench: input %q: cannot generate dtype %v", name, dt)
	}
	return t, nil
}

// vocabSize returns the number of rows of the table that a Gather indexes
// with value name, or 2 when none is found.
func vocabSize(g *ir.Graph, name string) int64 {
	for _, n := range g.Nodes {
		if n.OpType != "Gather" || len(n.Inputs) < 2 || n.Inputs[1] != name {
			continue
		}
		if w, ok := g.Initializers[n.Inputs[0]]; ok && len(w.Shape) > 0 && w.Shape[0] > 0 {
			return int64(w.Shape[0])
		}
	}
	return 2
}

// RelaxBatch makes the first dimension of every graph input and output
// dynamic, and forgets the value types recorded at the export batch, so that
// a model exported at batch 1 (resnet18, mobilenet_v2) can be run at another
// batch. It is for benchmarking only: a model whose later shapes hard-code
// the batch fails to build or run, and says so.
func RelaxBatch(g *ir.Graph) {
	for _, vs := range [][]*ir.Value{g.Inputs, g.Outputs} {
		for _, v := range vs {
			if v.Type.RankKnown && len(v.Type.Shape) > 0 && v.Type.Shape[0].Known() {
				v.Type.Shape[0] = ir.Dim{Value: -1, Param: "batch"}
			}
		}
	}
	for name := range g.Types {
		if _, ok := g.Initializers[name]; !ok {
			delete(g.Types, name)
		}
	}
	for _, vs := range [][]*ir.Value{g.Inputs, g.Outputs} {
		for _, v := range vs {
			if g.Types != nil {
				g.Types[v.Name] = v.Type
			}
		}
	}
}
