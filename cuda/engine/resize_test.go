package engine_test

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	. "github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

func cpuRun(n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	k, err := builtin.Registry().Lookup(n)
	if err != nil {
		return nil, err
	}
	return k.Run(&kernel.Ctx{}, n, in)
}

// ResizeCases are nearest-mode Resizes: every coordinate transformation
// but tf_crop_and_resize, every nearest_mode, scales up and down, sizes.
func ResizeCases(r *rand.Rand, count int) (nodes []*ir.Node, shapes [][]int, consts [][]*tensor.Tensor) {
	ctms := []string{"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"}
	modes := []string{"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}
	for i := range count {
		sh := []int{1 + r.Intn(2), 1 + r.Intn(3), 1 + r.Intn(9), 1 + r.Intn(9)}
		n := &ir.Node{Name: fmt.Sprintf("resize%d", i), OpType: "Resize", Version: 19, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{
			"mode":                           {Name: "mode", Kind: ir.AttrString, S: "nearest"},
			"coordinate_transformation_mode": {Name: "coordinate_transformation_mode", Kind: ir.AttrString, S: ctms[r.Intn(len(ctms))]},
			"nearest_mode":                   {Name: "nearest_mode", Kind: ir.AttrString, S: modes[r.Intn(len(modes))]},
		}}
		var c []*tensor.Tensor
		if i%2 == 0 {
			sc := []float32{1, 1, []float32{0.5, 2, 3, 0.7, 1.5}[r.Intn(5)], []float32{0.5, 2, 1.25, 0.6}[r.Intn(4)]}
			c = []*tensor.Tensor{nil, tensor.From(sc, 4)}
		} else {
			c = []*tensor.Tensor{nil, nil, tensor.From([]int64{int64(sh[0]), int64(sh[1]), int64(1 + r.Intn(17)), int64(1 + r.Intn(17))}, 4)}
		}
		nodes, shapes, consts = append(nodes, n), append(shapes, sh), append(consts, c)
	}
	return nodes, shapes, consts
}

// The GPU's nearest Resize gathers by ResizeMap: on the host the gather
// gives the CPU Resize's bits (NaN payloads, -0 and subnormals included).
func TestResizeMap(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	specials := []float32{float32(math.NaN()), float32(math.Copysign(0, -1)), math.Float32frombits(1), float32(math.Inf(-1))}
	nodes, shapes, consts := ResizeCases(r, 60)
	for i, n := range nodes {
		x := make([]float32, tensor.NumElems(shapes[i]))
		for j := range x {
			x[j] = float32(r.NormFloat64())
			if r.Intn(5) == 0 {
				x[j] = specials[r.Intn(len(specials))]
			}
		}
		want, err := cpuRun(n, append([]*tensor.Tensor{tensor.From(x, shapes[i]...)}, consts[i]...))
		if err != nil {
			t.Fatalf("%s: CPU: %v", n.Name, err)
		}
		m, out, err := ResizeMap(n, shapes[i], consts[i], cpuRun)
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		if fmt.Sprint(out) != fmt.Sprint(want[0].Shape) {
			t.Fatalf("%s: map of shape %v, the CPU's output %v", n.Name, out, want[0].Shape)
		}
		w := want[0].Data.([]float32)
		for j, k := range m {
			if math.Float32bits(x[k]) != math.Float32bits(w[j]) {
				t.Fatalf("%s (%v): output %d from input %d: %#x, the CPU's %#x", n.Name, n.Attrs, j, k, math.Float32bits(x[k]), math.Float32bits(w[j]))
			}
		}
	}
}
