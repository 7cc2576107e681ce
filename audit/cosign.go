package audit

import (
	"fmt"
	"strings"

	"github.com/transparency-dev/tessera"

	"github.com/vouchml/vouch/audit/witness"
)

// witnessPolicy turns URL=VERIFIERKEY witnesses into the witness group that
// tessera asks to cosign each checkpoint before it publishes it (the
// sigsum policy format tessera reads): tessera sends each witness the
// checkpoint with its consistency proof from the size the witness last
// cosigned (C2SP tlog-witness add-checkpoint), and publishes the
// checkpoint with the cosignatures once quorum of them answered.
func witnessPolicy(specs []string, quorum int) (tessera.WitnessGroup, error) {
	if quorum <= 0 {
		quorum = len(specs)
	}
	if quorum > len(specs) {
		return tessera.WitnessGroup{}, fmt.Errorf("audit: witness quorum %d of %d witnesses", quorum, len(specs))
	}
	var b strings.Builder
	var names []string
	for i, s := range specs {
		w, err := witness.Parse(s)
		if err != nil {
			return tessera.WitnessGroup{}, fmt.Errorf("audit: %w", err)
		}
		name := fmt.Sprintf("w%d", i)
		names = append(names, name)
		fmt.Fprintf(&b, "witness %s %s %s\n", name, w.Key, w.URL)
	}
	fmt.Fprintf(&b, "group all-witnesses %d %s\nquorum all-witnesses\n", quorum, strings.Join(names, " "))
	wg, err := tessera.NewWitnessGroupFromPolicy([]byte(b.String()))
	if err != nil {
		return tessera.WitnessGroup{}, fmt.Errorf("audit: witnesses: %w", err)
	}
	return wg, nil
}
