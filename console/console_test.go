package console_test

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/internal/cli"
	"github.com/vouchml/vouch/server"
)

const bcModel = "../../shared/models/breast_cancer_mlp"

var screenshots = flag.Bool("screenshots", false, "write the browser test's screenshots to docs/console/")

// chromium finds the browser: the test skips without it, except in CI
// (VOUCH_CI=1), where it fails.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("VOUCH_CI") == "1" {
		t.Fatal("chromium is not installed (apt-get install -y chromium); VOUCH_CI=1 requires the browser test")
	}
	t.Skip("chromium not installed (apt-get install -y chromium)")
	return ""
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type served struct {
	url, data string
	traces    []string
	stop      func()
}

// serve builds the breast-cancer MLP and starts `vouch serve --console` on
// loopback with two principals: an auditor and an inference-only caller,
// then sends it three inference requests.
func serve(t *testing.T) *served {
	t.Helper()
	dir := t.TempDir()
	var out bytes.Buffer
	m := cli.NewMain(&out, &out)
	var features []string
	for i := range 30 {
		features = append(features, fmt.Sprintf("f%02d", i))
	}
	features[0], features[1], features[2] = "mean radius", "mean texture", "mean perimeter"
	os.WriteFile(filepath.Join(dir, "features"), []byte(strings.Join(features, "\n")+"\n"), 0o644)
	// A signed bundle, with the feature names and a background set for
	// the explanations.
	bundleFile := filepath.Join(dir, "bc.vouch")
	for _, args := range [][]string{{"keygen", "--name", "ci", "--out", dir},
		{"build", bcModel + "/model.onnx", "-o", filepath.Join(dir, "bc.plan"), "--bundle", bundleFile, "--key", filepath.Join(dir, "ci.key"),
			"--name", "breast_cancer_mlp", "--model-version", "1", "--features", filepath.Join(dir, "features"),
			"--background", bcModel + "/test_data_set_0/input_0.pb"}} {
		if code := m.Run(context.Background(), args); code != 0 {
			t.Fatalf("%s: %s", args[0], out.String())
		}
	}
	os.WriteFile(filepath.Join(dir, "labels"), []byte("malignant\nbenign\n"), 0o644)
	creds := fmt.Sprintf("auditor audit %s\nalice infer %s\n", server.HashToken("audit-token"), server.HashToken("alice-token"))
	os.WriteFile(filepath.Join(dir, "creds"), []byte(creds), 0o600)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var serr bytes.Buffer
	go func() {
		sm := cli.NewMain(&serr, &serr)
		done <- sm.Run(ctx, []string{"serve", "--bundle", bundleFile, "--key", filepath.Join(dir, "ci.pub"), "--labels", "breast_cancer_mlp=" + filepath.Join(dir, "labels"),
			"--listen", addr, "--grpc", "", "--data", filepath.Join(dir, "data"), "--credentials", filepath.Join(dir, "creds"),
			"--capture-inputs", "--access-log", "", "--audit-durability", "async", "--console", "on"})
	}()
	s := &served{url: "http://" + addr, data: filepath.Join(dir, "data"), stop: func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
	}}
	for i := 0; ; i++ {
		resp, err := http.Get(s.url + "/v2/health/ready")
		if err == nil && resp.StatusCode == 200 {
			resp.Body.Close()
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, serr.String())
		case <-time.After(100 * time.Millisecond):
		}
		if i > 300 {
			t.Fatalf("server not ready: %s", serr.String())
		}
	}
	in, err := cli.ReadTensorFile(bcModel + "/test_data_set_0/input_0.pb")
	if err != nil {
		t.Fatal(err)
	}
	vals, _ := in.Float64s()
	for i := range 3 {
		body, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("claim-%d", i), "inputs": []map[string]any{{
			"name": "features", "datatype": "FP32", "shape": in.Shape, "data": vals}}})
		req, _ := http.NewRequest("POST", s.url+"/v2/models/breast_cancer_mlp/infer", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer alice-token")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("infer: %d %s", resp.StatusCode, b)
		}
		s.traces = append(s.traces, resp.Header.Get("Vouch-Trace-Id"))
	}
	return s
}

func TestConsoleInBrowser(t *testing.T) {
	exe := chromium(t)
	if _, err := os.Stat(bcModel + "/model.onnx"); err != nil {
		t.Skipf("test model missing: %v", err)
	}
	s := serve(t)
	defer s.stop()
	trace := s.traces[1]

	actx, cancelA := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	tctx, cancelT := context.WithTimeout(bctx, 3*time.Minute)
	defer cancelT()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(tctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	attr := func(sel, name string) string {
		t.Helper()
		v, err := chromedp.Run(tctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
		if err != nil || !v.Exists {
			t.Fatalf("attribute %s of %s: %v", name, sel, err)
		}
		return v.Value
	}
	// shot saves a full-page screenshot under docs/console/.
	shot := func(name string) {
		t.Helper()
		// A full-page capture waits for a frame, which a loaded machine
		// can starve: bounded, and tried twice.
		var b []byte
		var err error
		for range 2 {
			sctx, cancel := context.WithTimeout(tctx, 30*time.Second)
			b, err = chromedp.Run(sctx, chromedp.FullScreenshot(100))
			cancel()
			if err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		dir := t.TempDir()
		if *screenshots {
			dir = filepath.Join("..", "docs", "console")
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	u, _ := url.Parse(s.url)
	const fixed = "0000000000000000000000000000000000000000000000000000000000000000"

	// A viewer without the audit role is refused.
	do("refused sign-in", chromedp.Navigate(s.url+"/console/"), chromedp.WaitVisible(css("#token")),
		chromedp.SendKeys(css("#token"), "alice-token"), chromedp.Submit(css("#token")), chromedp.WaitVisible(css(".alert")))
	shot("refused")
	if got := text(".alert"); !strings.Contains(got, `"alice" lacks role "audit"`) {
		t.Fatalf("refused sign-in says %q", got)
	}

	// Session fixation: a session cookie planted before sign-in is not the
	// one the sign-in hands out, and never works.
	if _, err := chromedp.Call(tctx, network.SetCookie, network.SetCookieParams{Name: "vouch_console", Value: fixed,
		Domain: u.Hostname(), Path: "/console/"}); err != nil {
		t.Fatal(err)
	}
	do("sign in", chromedp.Navigate(s.url+"/console/"), chromedp.WaitVisible(css("#token")))
	shot("signin")
	do("sign in", chromedp.SendKeys(css("#token"), "audit-token"), chromedp.Submit(css("#token")), chromedp.WaitVisible(css("#trace")))
	cs, err := chromedp.Call(tctx, network.GetCookies, network.GetCookiesParams{URLs: []string{s.url + "/console/"}})
	if err != nil {
		t.Fatal(err)
	}
	var session string
	for _, c := range cs.Cookies {
		if c.Name == "vouch_console" {
			session = c.Value
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict {
				t.Errorf("session cookie: HttpOnly %v, SameSite %v", c.HTTPOnly, c.SameSite)
			}
		}
	}
	if session == "" || session == fixed {
		t.Fatalf("session id after sign-in %q: not rotated", session)
	}
	if code, _ := get(t, s.url+"/console/", fixed); code != http.StatusSeeOther {
		t.Fatalf("the planted session id was accepted (%d)", code)
	}

	// Search by trace id, open the decision, replay it.
	do("search", chromedp.SendKeys(css("#trace"), trace), chromedp.Submit(css("#trace")), chromedp.WaitVisible(css("#results")))
	shot("search")
	if got := text("main"); !strings.Contains(got, trace) || !strings.Contains(got, "1 record on this page") {
		t.Fatalf("search page: %s", got)
	}
	do("decision", chromedp.Click(css("a[href='/console/decision/"+trace+"']")), chromedp.WaitVisible(css("#proof")))
	shot("decision")
	page := text("main")
	for _, want := range []string{"PROVEN", "alice", "breast_cancer_mlp", "benign", "0.9999969005584717", "mean radius", "-1.2355446", "claim-1", "log key"} {
		if !strings.Contains(page, want) {
			t.Errorf("decision page lacks %q", want)
		}
	}
	do("replay", chromedp.Click(css("button.big")), chromedp.WaitVisible(css("#replay-verdict")))
	shot("replay")
	if got := text("#replay-verdict"); got != "VERIFIED" {
		t.Fatalf("replay verdict %q", got)
	}
	reportURL, dsseURL := attr("a[href$='report.html']", "href"), attr("a[href$='report.dsse.json']", "href")
	code, report := get(t, s.url+reportURL, session)
	if code != 200 || !strings.Contains(report, "VERIFIED") || !strings.Contains(report, trace) {
		t.Fatalf("report download: %d", code)
	}
	do("report page", chromedp.Navigate("data:text/html;base64,"+base64.StdEncoding.EncodeToString([]byte(report))), chromedp.WaitVisible(css("h1")))
	shot("report")
	code, env := get(t, s.url+dsseURL, session)
	pubs, _ := os.ReadFile(filepath.Join(s.data, "console", "report.pub"))
	pub, err := bundle.ParsePublicKey(strings.TrimSpace(string(pubs)))
	if err != nil {
		t.Fatal(err)
	}
	if _, payload, _, err := bundle.VerifyEnvelope([]byte(env), []*bundle.PublicKey{pub}); code != 200 || err != nil || !bytes.Contains(payload, []byte(`"verdict": "VERIFIED"`)) {
		t.Fatalf("signed report: %d %v", code, err)
	}

	// CSRF: a POST without the session's token, or with another, fails.
	for _, tok := range []string{"", fixed} {
		if code := post(t, s.url+"/console/replay/"+trace, session, url.Values{"csrf": {tok}}); code != http.StatusForbidden {
			t.Fatalf("replay POST with CSRF token %q: %d, want 403", tok, code)
		}
	}
	if code := post(t, s.url+"/console/signin", "", url.Values{"token": {"audit-token"}}); code != http.StatusForbidden {
		t.Fatalf("sign-in without the form's CSRF token: %d, want 403", code)
	}

	// The other pages.
	do("log", chromedp.Navigate(s.url+"/console/log"), chromedp.WaitVisible(css("#verification")),
		chromedp.Click(css("#verification ~ form button")), chromedp.WaitVisible(css("#verification ~ p .verdict")))
	shot("log")
	if got := text("#verification ~ p"); !strings.Contains(got, "VERIFIED") {
		t.Fatalf("log verification: %s", got)
	}
	do("models", chromedp.Navigate(s.url+"/console/models"), chromedp.WaitVisible(css("svg")))
	shot("models")
	do("export", chromedp.Navigate(s.url+"/console/export"), chromedp.WaitVisible(css("#since")))
	shot("export")
	code, zipped := postBody(t, s.url+"/console/export", session, "/console/export")
	if code != 200 {
		t.Fatalf("export: %d %s", code, zipped)
	}
	checkExport(t, []byte(zipped), s.data)
	do("sign out", chromedp.Navigate(s.url+"/console/"), chromedp.WaitVisible(css("#trace")),
		chromedp.Click(css("header form button")), chromedp.WaitVisible(css("#token")))
	if got := text("main"); !strings.Contains(got, "Signed out") {
		t.Fatalf("after sign-out: %s", got)
	}
	if code, _ := get(t, s.url+"/console/", session); code != http.StatusSeeOther {
		t.Fatalf("the signed-out session still works (%d)", code)
	}

	// Every view left an access record naming the viewer.
	req, _ := http.NewRequest("GET", s.url+"/v1/audit/records?kind=access", nil)
	req.Header.Set("Authorization", "Bearer audit-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Record struct {
				Principal string `json:"principal"`
				Status    string `json:"status"`
				Access    struct{ Action, Target string }
			}
		}
		json.Unmarshal(sc.Bytes(), &line)
		seen[line.Record.Principal+" "+line.Record.Access.Action+" "+line.Record.Status]++
	}
	for _, want := range []string{"alice console-signin error", "auditor console-signin ok", "auditor console-search ok",
		"auditor console-decision ok", "auditor console-replay ok", "auditor console-replay-view ok", "auditor console-download ok",
		"auditor console-log ok", "auditor console-verify ok", "auditor console-models ok", "auditor console-export ok", "auditor console-signout ok"} {
		if seen[want] == 0 {
			t.Errorf("no access record %q (have %v)", want, seen)
		}
	}
}

// send makes one request with the session cookie (no redirects followed)
// and returns the status and body; form, when not nil, is POSTed.
func send(t *testing.T, u, session string, form url.Values) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if form != nil {
		req, _ = http.NewRequest("POST", u, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if session != "" {
		req.AddCookie(&http.Cookie{Name: "vouch_console", Value: session})
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func get(t *testing.T, u, session string) (int, string) { t.Helper(); return send(t, u, session, nil) }

func post(t *testing.T, u, session string, form url.Values) int {
	t.Helper()
	code, _ := send(t, u, session, form)
	return code
}

// postBody submits the form on page (its CSRF token read from the page).
func postBody(t *testing.T, u, session, page string) (int, string) {
	t.Helper()
	base, _ := url.Parse(u)
	_, html := get(t, base.Scheme+"://"+base.Host+page, session)
	i := strings.Index(html, `name="csrf" value="`)
	if i < 0 {
		t.Fatalf("no CSRF token on %s", page)
	}
	tok := html[i+len(`name="csrf" value="`):]
	tok = tok[:strings.IndexByte(tok, '"')]
	return send(t, u, session, url.Values{"csrf": {tok}, "since": {"2000-01-01"}, "until": {"2100-01-01"}})
}

// checkExport opens a regulator export: its JSON lines verify against the
// log key inside, their DSSE signature against the console's key, and the
// CSV has one row per decision.
func checkExport(t *testing.T, b []byte, data string) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range zr.File {
		r, _ := f.Open()
		files[f.Name], _ = io.ReadAll(r)
		r.Close()
	}
	keys := strings.Fields(string(files["log.pub"]))
	_, n, err := audit.VerifyExport(bytes.NewReader(files["export.jsonl"]), nil, keys...)
	if err != nil || n != 3 {
		t.Fatalf("export.jsonl: %d records, %v", n, err)
	}
	pubs, _ := os.ReadFile(filepath.Join(data, "console", "report.pub"))
	pub, _ := bundle.ParsePublicKey(strings.TrimSpace(string(pubs)))
	if _, payload, _, err := bundle.VerifyEnvelope(files["export.jsonl.dsse.json"], []*bundle.PublicKey{pub}); err != nil || !bytes.Equal(payload, files["export.jsonl"]) {
		t.Fatalf("export signature: %v", err)
	}
	rows, err := csv.NewReader(bytes.NewReader(files["export.csv"])).ReadAll()
	if err != nil || len(rows) != 4 || rows[1][10] != "benign" {
		t.Fatalf("export.csv: %v %v", rows, err)
	}
}
