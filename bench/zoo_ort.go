//go:build ort

package bench

import (
	"errors"
	"fmt"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/vouchml/vouch/tensor"
)

// peerOutputs runs the peer once more and returns its outputs, in the
// plan's output order, so that the zoo can say how far the peer itself is
// from the reference (a float32 engine's rounding, not a bug, where both
// are off alike).
func peerOutputs(e Engine) ([]*tensor.Tensor, error) {
	o, ok := e.(*ortEngine)
	if !ok {
		return nil, fmt.Errorf("bench: %w: no outputs from peer %s", ErrUnavailable, e.Name())
	}
	outs := make([]ort.Value, len(o.onames))
	err := o.sess.Run(o.ins, outs)
	defer func() {
		for _, v := range outs {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("bench: peer ort: %w", err)
	}
	res := make([]*tensor.Tensor, len(outs))
	for i, v := range outs {
		var shape []int
		for _, d := range v.GetShape() {
			shape = append(shape, int(d))
		}
		switch t := v.(type) {
		case *ort.Tensor[float32]:
			res[i] = tensor.From(append([]float32(nil), t.GetData()...), shape...)
		case *ort.Tensor[float64]:
			res[i] = tensor.From(append([]float64(nil), t.GetData()...), shape...)
		case *ort.Tensor[int64]:
			res[i] = tensor.From(append([]int64(nil), t.GetData()...), shape...)
		default:
			return nil, errors.New("bench: peer ort: an output of a type the zoo does not read")
		}
	}
	return res, nil
}
