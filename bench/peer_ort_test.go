//go:build ort

package bench

import (
	"context"
	"os"
	"testing"

	"github.com/vouchml/vouch/compile"
)

// TestORT runs the ONNX Runtime peer when its library is found:
// VOUCH_ORT_LIB, or the path scripts/fetch-ort.sh fills.
func TestORT(t *testing.T) {
	lib := os.Getenv("VOUCH_ORT_LIB")
	if lib == "" {
		lib = "../.cache/ort/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1"
	}
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("no ONNX Runtime library (%v); run scripts/fetch-ort.sh", err)
	}
	m, err := Load(models+"/breast_cancer_mlp/model.onnx", Shape{Batch: 2}, 1, compile.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewPeer("ort", m, PeerConfig{Threads: 1, ORTLib: lib})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	res, err := Compare(context.Background(), []Engine{e}, Options{Runs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Summary.Median <= 0 {
		t.Errorf("ort results %+v", res)
	}
}
