package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/npy"
	"github.com/vouchml/vouch/tensor"
)

// TestBankDeclineReplays is a bank's path end to end (issue 15): the
// credit_xgb gradient-boosted model is built into a signed bundle with its
// feature names, background rows and class labels; it is pushed to the
// registry and served with inputs captured; an applicant is declined, and
// `vouch infer`, `vouch audit show` and `vouch replay` all give the same
// principal reasons — the replay recomputes them and finds them the same
// bit for bit (VERIFIED). A server started with labels that contradict
// the signed bundle records decisions the replay refuses (MISMATCH),
// until the replay is given the labels that server was given.
func TestBankDeclineReplays(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and serves credit_xgb")
	}
	m := "../../../shared/models/credit_xgb"
	dir := t.TempDir()
	p := func(s ...string) string { return filepath.Join(append([]string{dir}, s...)...) }
	must := func(args ...string) string {
		t.Helper()
		code, out, errs := run(t, args...)
		if code != 0 {
			t.Fatalf("vouch %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errs)
		}
		return out
	}
	write := func(name, s string) string {
		if err := os.WriteFile(p(name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p(name)
	}
	must("keygen", "--name", "bank", "--out", dir)
	labels := write("labels.txt", "approve\ndecline\n")
	must("build", m+"/model.onnx", "-o", p("credit.plan"), "--bundle", p("credit.vouch"), "--key", p("bank.key"),
		"--name", "credit_xgb", "--model-version", "2.1.0", "--features", m+"/data/features.txt",
		"--background", m+"/test_data_set_0/input_0.pb", "--labels", labels)
	data := p("data")
	must("registry", "push", p("credit.vouch"), "--key", p("bank.pub"), "--data", data)
	must("registry", "tag", "credit_xgb@2.1.0", "prod", "--key", p("bank.pub"), "--data", data)

	// A risky applicant: low income, high debt ratio, six late payments.
	f, err := os.Create(p("applicant.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if err := npy.Encode(f, tensor.From([]float32{20000, 0.9, 22, 6, 0.95, 0, 8, 40000}, 1, 8)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	serveOpts := ServeOptions{Models: []string{"credit_xgb@prod"}, Keys: p("bank.pub"), DataDir: data, Listen: "127.0.0.1:0",
		Audit: "on", AuditDurability: "durable", AuditFailure: "closed", CaptureInputs: true, Workers: 1, Queue: 8,
		MaxBody: 1 << 20, ShutdownTimeout: 5 * time.Second, Limits: serveLimits{AnonymousRoles: "infer,audit"}}
	url, stop := startServe(t, serveOpts)
	out := must("infer", "credit_xgb", "--url", url, "--input", "X="+p("applicant.npy"))
	stop()
	if !strings.Contains(out, "decision  row 0: decline (confidence ") {
		t.Fatalf("infer did not decline the applicant:\n%s", out)
	}
	trace := regexp.MustCompile(`trace id  ([0-9a-f]{32})`).FindStringSubmatch(out)
	if trace == nil {
		t.Fatalf("no trace id in:\n%s", out)
	}
	// The principal reasons as the applicant's bank sees them.
	reasons := regexp.MustCompile(`(?m)^\s+(\d\. \S+ = \S+ (increases|decreases) the score by \S+)$`).FindAllStringSubmatch(out, -1)
	if len(reasons) < 3 || !strings.Contains(out, "reasons   (tree_shap of the margin; target 0)") {
		t.Fatalf("infer printed no reasons:\n%s", out)
	}
	names := " income debt_ratio age late_payments credit_utilization years_employed recent_inquiries loan_amount "
	for _, r := range reasons {
		if name := strings.Fields(r[1])[1]; !strings.Contains(names, " "+name+" ") {
			t.Errorf("a reason names %q, not one of the bundle's features", name)
		}
	}
	shown := must("audit", "show", trace[1], "--data", data)
	replayed := must("replay", trace[1], "--data", data, "--key", p("bank.pub"), "--report", p("report"))
	if !strings.HasPrefix(replayed, "VERIFIED") || !strings.Contains(replayed, "recomputed, the same bit for bit (reasons by tree_shap") {
		t.Fatalf("replay:\n%s", replayed)
	}
	t.Logf("vouch infer:\n%s\nvouch audit show:\n%s\nvouch replay:\n%s", out, shown, replayed)
	for _, r := range reasons {
		if !strings.Contains(shown, r[1]) || !strings.Contains(replayed, r[1]) {
			t.Fatalf("reason %q is not the same in audit show and replay:\n%s\n%s", r[1], shown, replayed)
		}
	}
	// The same decision, replayed on the portable Go kernels on one
	// thread (as on a CPU without AVX2): the same bits.
	portable := must("replay", trace[1], "--data", data, "--key", p("bank.pub"), "--isa", "portable", "--threads", "1")
	if !strings.HasPrefix(portable, "VERIFIED") || !strings.Contains(portable, "ran on     cpu (CPU kernels at instruction set portable)") ||
		!strings.Contains(portable, "recomputed, the same bit for bit") {
		t.Fatalf("replay on the portable kernels:\n%s", portable)
	}
	if code, _, errs := run(t, "replay", trace[1], "--data", data, "--key", p("bank.pub"), "--isa", "sse9"); code == 0 || !strings.Contains(errs, "--isa") {
		t.Fatalf("replay --isa sse9: %d %s", code, errs)
	}
	page, err := os.ReadFile(p("report", "report.html"))
	if err != nil || !strings.Contains(string(page), "Principal reasons for this decision") || strings.Contains(string(page), "differs</span>") {
		t.Fatalf("report.html lacks the reasons: %v", err)
	}

	// A server given labels that contradict the signed bundle.
	swapped := write("swapped.txt", "decline\napprove\n")
	so := serveOpts
	so.Labels = []string{"credit_xgb=" + swapped}
	url, stop = startServe(t, so)
	out = must("infer", "credit_xgb", "--url", url, "--input", "X="+p("applicant.npy"))
	stop()
	trace = regexp.MustCompile(`trace id  ([0-9a-f]{32})`).FindStringSubmatch(out)
	if trace == nil || !strings.Contains(out, "row 0: approve") {
		t.Fatalf("the swapped labels were not used:\n%s", out)
	}
	code, out, errs := run(t, "replay", trace[1], "--data", data, "--key", p("bank.pub"))
	if code == 0 || !strings.HasPrefix(out, "MISMATCH") || !strings.Contains(out, `row 0: label recorded "approve", replayed "decline"`) {
		t.Fatalf("replay of a decision named by contradicting labels: exit %d\n%s\n%s", code, out, errs)
	}
	out = must("replay", trace[1], "--data", data, "--key", p("bank.pub"), "--labels", swapped)
	if !strings.HasPrefix(out, "VERIFIED") {
		t.Fatalf("replay with the server's labels:\n%s", out)
	}
}
