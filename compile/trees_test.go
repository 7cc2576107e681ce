package compile

import (
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/onnx"
)

func TestLogTrees(t *testing.T) {
	m, err := onnx.DecodeFile("../../shared/models/credit_xgb/model.onnx")
	if err != nil {
		t.Skipf("credit_xgb: %v", err)
	}
	log := buildlog.New(nil)
	logTrees(m.Graph, log)
	if len(log.Records) != 1 {
		t.Fatalf("%d records, want 1", len(log.Records))
	}
	f := log.Records[0].Fields
	if f["trees"] != 200 || f["max_depth"] != 5 || f["features"] != 8 || f["compiled_layout"] != true {
		t.Errorf("fields %v", f)
	}
}
