package cli

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeBundleExplains: a credit_xgb bundle built with --features and
// --background is served with its reasons named by those features, and
// the record of the request holds them too.
func TestServeBundleExplains(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	m := "../../../shared/models/credit_xgb"
	dir := t.TempDir()
	p := func(s string) string { return filepath.Join(dir, s) }
	if code, _, errs := run(t, "keygen", "--name", "bank", "--out", dir); code != 0 {
		t.Fatal(errs)
	}
	if code, _, errs := run(t, "build", m+"/model.onnx", "-o", p("credit.plan"), "--bundle", p("credit.vouch"), "--key", p("bank.key"),
		"--name", "credit_xgb", "--model-version", "1", "--features", m+"/data/features.txt",
		"--background", m+"/test_data_set_0/input_0.pb"); code != 0 {
		t.Fatal(errs)
	}
	url, stop := startServe(t, ServeOptions{Listen: "127.0.0.1:0", GRPC: "", AuditLog: p("audit.jsonl"), AuditFsync: true,
		Workers: 1, Queue: 4, MaxBody: 1 << 20, ShutdownTimeout: 5 * time.Second,
		Bundles: []string{p("credit.vouch")}, Keys: p("bank.pub")})
	defer stop()
	body := `{"inputs":[{"name":"X","datatype":"FP32","shape":[1,8],"data":[20000,0.9,22,6,0.95,0,8,40000]}],"parameters":{"explain":true}}`
	resp, err := http.Post(url+"/v2/models/credit_xgb/infer", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Parameters struct {
			Explanation struct {
				Method string `json:"method"`
				Covers string `json:"covers"`
				Rows   []struct {
					Reasons []struct {
						Feature string `json:"feature"`
					} `json:"reasons"`
				} `json:"rows"`
			} `json:"explanation"`
		} `json:"parameters"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	x := r.Parameters.Explanation
	if x.Method != "tree_shap" || x.Covers != "background" || len(x.Rows) != 1 || len(x.Rows[0].Reasons) == 0 {
		t.Fatalf("explanation %+v", x)
	}
	names := "income debt_ratio age late_payments credit_utilization years_employed recent_inquiries loan_amount"
	for _, rs := range x.Rows[0].Reasons {
		if !strings.Contains(" "+names+" ", " "+rs.Feature+" ") {
			t.Errorf("reason names %q, not one of the bundle's features", rs.Feature)
		}
	}
}
