//go:build !ort

package bench

import (
	"fmt"

	"github.com/vouchml/vouch/tensor"
)

// peerOutputs needs the ort build tag.
func peerOutputs(e Engine) ([]*tensor.Tensor, error) {
	return nil, fmt.Errorf("bench: %w: no peer outputs without -tags ort", ErrUnavailable)
}
