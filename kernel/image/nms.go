package image

import (
	"fmt"
	"math"
	"sort"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// NonMaxSuppression (opset 10, 11): for each batch and class, boxes whose
// score exceeds score_threshold (strictly) are taken in decreasing score
// order (ties: lower box index first) and kept unless their IoU with an
// already kept box exceeds iou_threshold (strictly), up to
// max_output_boxes_per_class (absent or 0: none). The output
// [num_selected, 3] lists (batch, class, box) by batch, then class, then
// selection order. Geometry is computed in float32 as ONNX Runtime does.
func runNMS(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	boxes, scores := kernel.Input(in, 0), kernel.Input(in, 1)
	if boxes == nil || scores == nil {
		return nil, fmt.Errorf("NonMaxSuppression: needs inputs boxes and scores")
	}
	if boxes.Rank() != 3 || boxes.Shape[2] != 4 {
		return nil, fmt.Errorf("NonMaxSuppression: boxes must have shape [batches, boxes, 4], got %s", tensor.ShapeString(boxes.Shape))
	}
	B, S := boxes.Shape[0], boxes.Shape[1]
	if scores.Rank() != 3 || scores.Shape[0] != B || scores.Shape[2] != S {
		return nil, fmt.Errorf("NonMaxSuppression: scores must have shape [%d, classes, %d], got %s", B, S, tensor.ShapeString(scores.Shape))
	}
	C := scores.Shape[1]
	bv, err := floats32(boxes, "boxes")
	if err != nil {
		return nil, err
	}
	sv, err := floats32(scores, "scores")
	if err != nil {
		return nil, err
	}
	var maxOut int64
	if t := kernel.Input(in, 2); t != nil {
		v, err := t.Int64s()
		if err != nil || len(v) != 1 || t.DType != tensor.Int64 {
			return nil, fmt.Errorf("NonMaxSuppression: max_output_boxes_per_class must be one int64, got %v%s", t.DType, tensor.ShapeString(t.Shape))
		}
		maxOut = v[0]
	}
	iouTh, err := scalar32(kernel.Input(in, 3), "iou_threshold", 0)
	if err != nil {
		return nil, err
	}
	scoreTh, err := scalar32(kernel.Input(in, 4), "score_threshold", float32(math.Inf(-1)))
	if err != nil {
		return nil, err
	}
	hasScoreTh := kernel.Input(in, 4) != nil
	center := n.Int("center_point_box", 0)
	if center != 0 && center != 1 {
		return nil, fmt.Errorf("NonMaxSuppression: center_point_box must be 0 or 1, got %d", center)
	}
	// Corners (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2.
	corner := make([][4]float32, B*S)
	for i := range corner {
		b := bv[i*4 : i*4+4]
		if center == 1 {
			cx, cy, w, h := b[0], b[1], b[2], b[3]
			corner[i] = [4]float32{cy - h/2, cx - w/2, cy + h/2, cx + w/2}
		} else {
			corner[i] = [4]float32{min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3])}
		}
	}
	var sel []int64
	cand := make([]int, 0, S)
	var kept []int
	for b := 0; b < B && maxOut > 0; b++ {
		for c := 0; c < C; c++ {
			sc := sv[(b*C+c)*S : (b*C+c+1)*S]
			cand = cand[:0]
			for i, s := range sc {
				if !hasScoreTh || s > scoreTh {
					cand = append(cand, i)
				}
			}
			sort.SliceStable(cand, func(i, j int) bool { return sc[cand[i]] > sc[cand[j]] })
			kept = kept[:0]
			for _, i := range cand {
				if int64(len(kept)) >= maxOut {
					break
				}
				ok := true
				for _, k := range kept {
					if iouAbove(corner[b*S+i], corner[b*S+k], iouTh) {
						ok = false
						break
					}
				}
				if ok {
					kept = append(kept, i)
					sel = append(sel, int64(b), int64(c), int64(i))
				}
			}
		}
	}
	return []*tensor.Tensor{tensor.From(append([]int64{}, sel...), len(sel)/3, 3)}, nil
}

// iouAbove reports whether the IoU of two corner boxes exceeds th.
func iouAbove(a, b [4]float32, th float32) bool {
	ih := min(a[2], b[2]) - max(a[0], b[0])
	iw := min(a[3], b[3]) - max(a[1], b[1])
	if ih <= 0 || iw <= 0 {
		return false
	}
	inter := ih * iw
	areaA := (a[2] - a[0]) * (a[3] - a[1])
	areaB := (b[2] - b[0]) * (b[3] - b[1])
	union := areaA + areaB - inter
	if areaA <= 0 || areaB <= 0 || union <= 0 {
		return false
	}
	return inter/union > th
}

func floats32(t *tensor.Tensor, what string) ([]float32, error) {
	if d, ok := t.Data.([]float32); ok {
		return d, nil
	}
	if !t.DType.IsFloat() {
		return nil, fmt.Errorf("NonMaxSuppression: %s must be float, got %v", what, t.DType)
	}
	f, _ := t.Float64s()
	out := make([]float32, len(f))
	for i, v := range f {
		out[i] = float32(v)
	}
	return out, nil
}

func scalar32(t *tensor.Tensor, what string, def float32) (float32, error) {
	if t == nil {
		return def, nil
	}
	v, err := t.Float64s()
	if err != nil || len(v) != 1 || !t.DType.IsFloat() {
		return 0, fmt.Errorf("NonMaxSuppression: %s must be one float, got %v%s", what, t.DType, tensor.ShapeString(t.Shape))
	}
	return float32(v[0]), nil
}

func inferNMS(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	return []ir.Type{{DType: tensor.Int64, RankKnown: true, Shape: []ir.Dim{ir.Unknown, ir.Fixed(3)}}}, nil
}
