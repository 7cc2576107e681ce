package bench

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// parseORTProfile reads ORT's profile (a JSON array of trace events) and
// returns the median of each node's kernel time ("<node>_kernel_time"
// events of category "Node"), dropping each node's first skip samples.
func parseORTProfile(raw []byte, skip int) ([]PeerLayer, error) {
	var events []struct {
		Cat  string `json:"cat"`
		Name string `json:"name"`
		Dur  int64  `json:"dur"` // microseconds
		Args struct {
			Op string `json:"op_name"`
		} `json:"args"`
	}
	if err := json.Unmarshal(raw, &events); err != nil {
		return nil, fmt.Errorf("bench: peer ort: reading the profile: %w", err)
	}
	idx := map[string]int{}
	var layers []PeerLayer
	var samples [][]time.Duration
	for _, ev := range events {
		name, ok := strings.CutSuffix(ev.Name, "_kernel_time")
		if ev.Cat != "Node" || !ok {
			continue
		}
		i, seen := idx[name]
		if !seen {
			i = len(layers)
			idx[name] = i
			layers = append(layers, PeerLayer{Name: name, Kind: ev.Args.Op})
			samples = append(samples, nil)
		}
		samples[i] = append(samples[i], time.Duration(ev.Dur)*time.Microsecond)
	}
	for i := range layers {
		s := samples[i]
		if len(s) > skip {
			s = s[skip:]
		}
		layers[i].Median = Summarize(s).Median
	}
	return layers, nil
}
