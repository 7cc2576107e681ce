//go:build !gomlx

package bench

import "fmt"

func newGoMLX(*Model, PeerConfig) (Engine, error) {
	return nil, fmt.Errorf("bench: peer gomlx: %w: vouch was built without -tags gomlx", ErrUnavailable)
}
