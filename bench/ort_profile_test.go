package bench

import (
	"testing"
	"time"
)

// TestParseORTProfile: the per-node medians of an ONNX Runtime profile,
// in first-run order, the warm-up samples dropped, other events ignored.
func TestParseORTProfile(t *testing.T) {
	raw := []byte(`[
{"cat":"Session","name":"model_run","dur":900},
{"cat":"Node","name":"conv_fence_before","dur":1},
{"cat":"Node","name":"conv_kernel_time","dur":500,"args":{"op_name":"Conv"}},
{"cat":"Node","name":"pool_kernel_time","dur":70,"args":{"op_name":"MaxPool"}},
{"cat":"Node","name":"conv_kernel_time","dur":100,"args":{"op_name":"Conv"}},
{"cat":"Node","name":"pool_kernel_time","dur":20,"args":{"op_name":"MaxPool"}},
{"cat":"Node","name":"conv_kernel_time","dur":300,"args":{"op_name":"Conv"}},
{"cat":"Node","name":"pool_kernel_time","dur":40,"args":{"op_name":"MaxPool"}},
{"cat":"Node","name":"conv_kernel_time","dur":200,"args":{"op_name":"Conv"}},
{"cat":"Node","name":"pool_kernel_time","dur":30,"args":{"op_name":"MaxPool"}}
]`)
	got, err := parseORTProfile(raw, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []PeerLayer{{"conv", "Conv", 200 * time.Microsecond}, {"pool", "MaxPool", 30 * time.Microsecond}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("node %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := parseORTProfile([]byte(`{"not":"an array"}`), 0); err == nil {
		t.Error("a malformed profile was accepted")
	}
}
