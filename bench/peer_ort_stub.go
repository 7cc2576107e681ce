//go:build !ort

package bench

import "fmt"

func newORT(*Model, PeerConfig) (Engine, error) {
	return nil, fmt.Errorf("bench: peer ort: %w: vouch was built without -tags ort (cgo); see scripts/fetch-ort.sh", ErrUnavailable)
}

// ORTBuilt reports whether the ONNX Runtime peer is compiled in.
const ORTBuilt = false

// ProfileORT needs the ort build tag.
func ProfileORT(*Model, PeerConfig, Options) ([]PeerLayer, error) {
	return nil, fmt.Errorf("bench: peer ort: %w: vouch was built without -tags ort (cgo); see scripts/fetch-ort.sh", ErrUnavailable)
}
