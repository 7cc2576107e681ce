package compile

import (
	"github.com/vouchml/vouch/kernel/builtin"
	"os"
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

func TestBuildLogsTrees(t *testing.T) {
	src, err := os.ReadFile("../../shared/models/digits_rf/model.onnx")
	if err != nil {
		t.Skipf("digits_rf: %v", err)
	}
	m, err := onnx.Decode(src, "")
	if err != nil {
		t.Fatal(err)
	}
	log := buildlog.New(nil)
	r1, err := Build(m, src, "digits_rf", "test", DefaultOptions(), builtin.Registry(), log)
	if err != nil {
		t.Fatal(err)
	}
	if log.Count("trees", "ensemble") != 1 {
		t.Fatalf("%d trees lines in the build log", log.Count("trees", "ensemble"))
	}
	// Rebuild identity: the same model and options give the same plan.
	m2, err := onnx.Decode(src, "")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Build(m2, src, "digits_rf", "test", DefaultOptions(), builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	if r1.Digest != r2.Digest {
		t.Errorf("rebuilt plan %s, first %s", r2.Digest, r1.Digest)
	}
}
