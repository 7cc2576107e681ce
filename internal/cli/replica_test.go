package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/index"
	"github.com/vouchml/vouch/audit/sqllog"
	"github.com/vouchml/vouch/audit/sqllog/sqltest"
	"github.com/vouchml/vouch/server"
)

// TestReplicasSIGKILL: three `vouch serve` processes append to one shared
// log in a real MariaDB while clients load them; one replica at a time is
// killed with SIGKILL, 30 times, and restarted. After every kill the log
// verifies against its signed checkpoint; at the end every request that
// was answered 200 has exactly one record in the log, and exactly one row
// in the shared index: in the table as the replicas left it (each indexes
// what it appends, and a restarted one fills what a killed one had not
// indexed), and through a query.
func TestReplicasSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds vouch, starts MariaDB and kills replicas 30 times")
	}
	dsn := sqltest.Start(t)
	dir := t.TempDir()
	bin := buildVouch(t, dir)
	planFile := buildBC(t, dir)
	skey, vkey, err := audit.GenerateKey("vouch.test/replicas")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "log.key")
	if err := os.WriteFile(keyFile, []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	body := `{"inputs":[{"name":"features","datatype":"FP32","shape":[1,30],"data":[` + strings.TrimSuffix(strings.Repeat("0.5,", 30), ",") + `]}]}`

	type replica struct {
		cmd  *exec.Cmd
		url  string
		stop chan struct{}
		wg   sync.WaitGroup
	}
	var mu sync.Mutex
	answered := map[string]bool{}
	start := func(i int) *replica {
		data := filepath.Join(dir, "data", string(rune('a'+i)))
		cmd, url := startServeProcess(t, bin, dir, "--plan", planFile+",bc", "--data", data, "--grpc", "",
			"--access-log", "", "--audit-db", dsn, "--log-key", keyFile)
		r := &replica{cmd: cmd, url: url, stop: make(chan struct{})}
		for range 2 {
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				cl := &http.Client{Timeout: 5 * time.Second}
				for {
					select {
					case <-r.stop:
						return
					default:
					}
					resp, err := cl.Post(r.url+"/v2/models/bc/infer", "application/json", strings.NewReader(body))
					if err != nil {
						return
					}
					tr := resp.Header.Get("Vouch-Trace-Id")
					resp.Body.Close()
					if resp.StatusCode == 200 && tr != "" {
						mu.Lock()
						answered[tr] = true
						mu.Unlock()
					}
				}
			}()
		}
		return r
	}
	halt := func(r *replica, sig syscall.Signal) {
		r.cmd.Process.Signal(sig)
		r.cmd.Wait()
		close(r.stop)
		r.wg.Wait()
	}
	ctx := context.Background()
	reader, err := sqllog.Open(ctx, sqllog.Options{DSN: dsn, VerifierKeys: []string{vkey}})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(ctx)
	verify := func(when string) uint64 {
		rep, err := audit.Verify(ctx, reader.FS(ctx), audit.VerifyOptions{VerifierKeys: []string{vkey}, CheckRecords: true})
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
			t.Fatalf("%s: the shared log does not verify: %v\n%s", when, err, b[max(0, len(b)-3000):])
		}
		return rep.Checkpoint.Size
	}

	reps := []*replica{start(0), start(1), start(2)}
	rng := rand.New(rand.NewPCG(3, uint64(time.Now().UnixNano())))
	const kills = 30
	budget := time.Now().Add(150 * time.Second)
	for k := range kills {
		if time.Now().After(budget) {
			t.Fatalf("out of time after %d kills", k)
		}
		time.Sleep(time.Duration(200+rng.IntN(600)) * time.Millisecond)
		i := rng.IntN(3)
		halt(reps[i], syscall.SIGKILL)
		verify(fmt.Sprintf("after kill %d", k+1))
		reps[i] = start(i)
	}
	for _, r := range reps {
		halt(r, syscall.SIGTERM)
	}
	size := verify("at the end")

	count := map[string]int{}
	ents, err := reader.Entries(0, int(size)+1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		r, err := audit.Parse(e)
		if err != nil {
			t.Fatal(err)
		}
		count[r.TraceID]++
	}
	mu.Lock()
	defer mu.Unlock()
	missing, twice := 0, 0
	for tr := range answered {
		switch count[tr] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	if len(answered) == 0 || missing > 0 || twice > 0 {
		t.Fatalf("%d answered requests: %d have no record, %d more than one", len(answered), missing, twice)
	}

	// The shared index as the replicas left it, read with plain SQL.
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, next uint64
	if err := db.QueryRow("SELECT COUNT(*), COALESCE(MAX(idx)+1, 0) FROM vouch_index").Scan(&rows, &next); err != nil {
		t.Fatal(err)
	}
	if rows != uint64(len(ents)) || next != uint64(len(ents)) {
		t.Fatalf("the shared index holds %d rows for indexes below %d; the log has %d entries", rows, next, len(ents))
	}
	inIndex := map[string]int{}
	q, err := db.Query("SELECT trace_id FROM vouch_index")
	if err != nil {
		t.Fatal(err)
	}
	for q.Next() {
		var tr string
		if err := q.Scan(&tr); err != nil {
			t.Fatal(err)
		}
		inIndex[tr]++
	}
	q.Close()
	// And through the query API, which checks every row against the log.
	viaQuery := map[string]int{}
	if err := reader.Records().Query(ctx, index.Filter{Kind: audit.KindInference}, func(r index.Row) error {
		viaQuery[r.TraceID]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for tr := range answered {
		if inIndex[tr] != 1 || viaQuery[tr] != 1 {
			t.Fatalf("answered trace %s: %d rows in the shared index, %d through a query (want 1)", tr, inIndex[tr], viaQuery[tr])
		}
	}
	t.Logf("%d kills, %d answered requests, each recorded and indexed once, log of %d entries verifies", kills, len(answered), len(ents))
}

// TestSharedAuditAPI: two replicas on one shared log. A record appended
// through replica A is shown with its inclusion proof, queried and exported
// through replica B's /v1/audit API, found by B's console search, and
// replayed by B's console from the input A captured (in the database);
// the proofs check against the shared log's key, and each of those reads
// left its own access record.
func TestSharedAuditAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds vouch and starts MariaDB")
	}
	dsn := sqltest.Start(t)
	dir := t.TempDir()
	bin := buildVouch(t, dir)
	planFile := buildBC(t, dir)
	skey, vkey, err := audit.GenerateKey("vouch.test/shared-api")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "log.key")
	if err := os.WriteFile(keyFile, []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte("app infer "+server.HashToken("app-token")+"\nauditor audit "+server.HashToken("audit-token")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var urls []string
	for i := range 2 {
		cmd, url := startServeProcess(t, bin, dir, "--plan", planFile+",bc", "--data", filepath.Join(dir, "data", string(rune('a'+i))),
			"--grpc", "", "--access-log", "", "--audit-db", dsn, "--log-key", keyFile, "--credentials", creds, "--console", "on", "--capture-inputs")
		t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
		urls = append(urls, url)
	}
	a, b := urls[0], urls[1]
	call := func(method, url, token string, body string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp, out
	}
	body := `{"inputs":[{"name":"features","datatype":"FP32","shape":[1,30],"data":[` + strings.TrimSuffix(strings.Repeat("0.25,", 30), ",") + `]}]}`
	var trace string
	for range 5 {
		resp, out := call("POST", a+"/v2/models/bc/infer", "app-token", body)
		if resp.StatusCode != 200 {
			t.Fatalf("infer on A: %d %s", resp.StatusCode, out)
		}
		trace = resp.Header.Get("Vouch-Trace-Id")
	}

	// show on B: the record A appended, with a proof that checks.
	resp, out := call("GET", b+"/v1/audit/records/"+trace, "audit-token", "")
	if resp.StatusCode != 200 {
		t.Fatalf("show on B: %d %s", resp.StatusCode, out)
	}
	var inc audit.Inclusion
	if err := json.Unmarshal(out, &inc); err != nil {
		t.Fatal(err)
	}
	rec, cp, err := inc.Verify(vkey)
	if err != nil {
		t.Fatalf("show on B: the inclusion does not verify: %v", err)
	}
	if rec.TraceID != trace || rec.Model != "bc" || rec.Principal != "app" {
		t.Fatalf("show on B gave trace %s model %s principal %s", rec.TraceID, rec.Model, rec.Principal)
	}
	// query on B: every inference record once, A's among them.
	resp, out = call("GET", b+"/v1/audit/records?model=bc&kind=inference", "audit-token", "")
	if resp.StatusCode != 200 {
		t.Fatalf("query on B: %d %s", resp.StatusCode, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	found := 0
	for _, ln := range lines {
		var ql server.QueryLine
		if err := json.Unmarshal([]byte(ln), &ql); err != nil {
			t.Fatalf("query line %q: %v", ln, err)
		}
		if r, err := audit.Parse(ql.Record); err != nil {
			t.Fatal(err)
		} else if r.TraceID == trace {
			found++
		}
	}
	if len(lines) != 5 || found != 1 {
		t.Fatalf("query on B: %d lines, trace %s %d times; want 5 and 1:\n%s", len(lines), trace, found, out)
	}
	// export on B: verifies offline with the log's key alone.
	resp, out = call("GET", b+"/v1/audit/export?model=bc", "audit-token", "")
	if resp.StatusCode != 200 {
		t.Fatalf("export on B: %d %s", resp.StatusCode, out)
	}
	_, n, err := audit.VerifyExport(bytes.NewReader(out), nil, vkey)
	if err != nil || n != 5 {
		t.Fatalf("export on B: %d records, %v", n, err)
	}
	// Refused without the audit role, and that refusal is recorded too.
	if resp, _ := call("GET", b+"/v1/audit/records/"+trace, "app-token", ""); resp.StatusCode != 403 {
		t.Fatalf("show by the infer role: %d, want 403", resp.StatusCode)
	}

	// The console on B finds A's record through the shared index.
	jar, _ := cookiejar.New(nil)
	cl := &http.Client{Jar: jar}
	resp, err = cl.Get(b + "/console/signin")
	if err != nil {
		t.Fatal(err)
	}
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("console sign-in page without a csrf field:\n%s", out)
	}
	resp, err = cl.PostForm(b+"/console/signin", url.Values{"csrf": {string(m[1])}, "token": {"audit-token"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = cl.Get(b + "/console/?trace=" + trace)
	if err != nil {
		t.Fatal(err)
	}
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(out, []byte("/console/decision/"+trace)) {
		t.Fatalf("console search on B for %s: %d\n%s", trace, resp.StatusCode, out)
	}
	resp, err = cl.Get(b + "/console/?model=bc")
	if err != nil {
		t.Fatal(err)
	}
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := len(regexp.MustCompile(`href="/console/decision/[0-9a-f]{32}"`).FindAll(out, -1)); resp.StatusCode != 200 || got != 5 {
		t.Fatalf("console search on B for model bc: %d, %d decisions, want 5\n%s", resp.StatusCode, got, out)
	}
	// B's console replays A's record from the input A captured.
	resp, err = cl.Get(b + "/console/decision/" + trace)
	if err != nil {
		t.Fatal(err)
	}
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	m = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindSubmatch(out)
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("decision page on B: %d\n%s", resp.StatusCode, out)
	}
	resp, err = cl.PostForm(b+"/console/replay/"+trace, url.Values{"csrf": {string(m[1])}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(out, []byte("<b>bit for bit</b>")) {
		t.Fatalf("replay on B of A's record: %d\n%s", resp.StatusCode, out)
	}
	// Each read above left an access record in the shared log, under the
	// reader's name; the log verifies.
	reader, err := sqllog.Open(context.Background(), sqllog.Options{DSN: dsn, VerifierKeys: []string{vkey}})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(context.Background())
	access := map[string]int{}
	if err := reader.Records().Query(context.Background(), index.Filter{Kind: audit.KindAccess}, func(r index.Row) error {
		access[r.Principal+" "+r.Status]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if access["auditor ok"] < 3 || access["app error"] != 1 {
		t.Fatalf("access records %v: want at least 3 by auditor (show, query, export) and the refusal of app", access)
	}
	if _, err := audit.Verify(context.Background(), reader.FS(context.Background()), audit.VerifyOptions{VerifierKeys: []string{vkey}, CheckRecords: true}); err != nil {
		t.Fatalf("the shared log does not verify: %v", err)
	}
	t.Logf("record of A at index %d (checkpoint %d) shown, queried, exported and searched through B", inc.Index, cp.Size)
}

// BenchmarkReplicasServe: three real `vouch serve` processes on one shared
// log in a private MariaDB, each driven by closed-loop HTTP clients
// (keep-alive, the breast-cancer MLP, JSON; VOUCH_REPLICA_CLIENTS per
// replica, 128 by default) for
// VOUCH_REPLICA_WINDOW (10s by default) after a 2 s warm-up. It reports the
// aggregate answered requests a second and the durable appends a second
// (the log's growth over the window: every answered request's record
// committed), and how long the shared index took to hold every entry after
// the load stopped. A replica's batch waits up to 50 ms for more records,
// so each client sends at most about 20 requests a second: the client
// count bounds the figure; at 128 a replica's model queue (64 waiting)
// refuses a few requests with 503, each refusal recorded too, and the
// errors metric counts them. Run it with -benchtime 1x: b.N is not used.
func BenchmarkReplicasServe(b *testing.B) {
	window := 10 * time.Second
	if v := os.Getenv("VOUCH_REPLICA_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		window = d
	}
	clients := 128
	if v := os.Getenv("VOUCH_REPLICA_CLIENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("VOUCH_REPLICA_CLIENTS=%q: want a positive integer", v)
		}
		clients = n
	}
	dsn := sqltest.Start(b)
	dir := b.TempDir()
	bin := filepath.Join(dir, "vouch")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/vouch").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	planFile := filepath.Join(dir, "bc.plan")
	if out, err := exec.Command(bin, "build", bcModel+"/model.onnx", "-o", planFile).CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	skey, vkey, err := audit.GenerateKey("vouch.test/replicas-bench")
	if err != nil {
		b.Fatal(err)
	}
	keyFile := filepath.Join(dir, "log.key")
	if err := os.WriteFile(keyFile, []byte(skey+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	var urls []string
	for i := range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		cmd := exec.Command(bin, "serve", "--plan", planFile+",bc", "--data", filepath.Join(dir, "data", string(rune('a'+i))), "--grpc", "",
			"--access-log", "", "--audit-db", dsn, "--log-key", keyFile, "--listen", addr)
		logf, _ := os.Create(filepath.Join(dir, fmt.Sprintf("serve%d.log", i)))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait(); logf.Close() })
		urls = append(urls, "http://"+addr)
	}
	for _, u := range urls {
		for deadline := time.Now().Add(60 * time.Second); ; {
			if resp, err := http.Get(u + "/v2/health/ready"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if time.Now().After(deadline) {
				var logs []byte
				for i := range 3 {
					l, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("serve%d.log", i)))
					logs = append(logs, l...)
				}
				b.Fatalf("replica %s not ready:\n%s", u, logs)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ctx := context.Background()
	reader, err := sqllog.Open(ctx, sqllog.Options{DSN: dsn, VerifierKeys: []string{vkey}})
	if err != nil {
		b.Fatal(err)
	}
	defer reader.Close(ctx)
	size := func() uint64 {
		var n uint64
		if err := reader.DB().QueryRowContext(ctx, "SELECT size FROM TreeState WHERE id = 0").Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	body := []byte(`{"inputs":[{"name":"features","datatype":"FP32","shape":[1,30],"data":[` + strings.TrimSuffix(strings.Repeat("0.5,", 30), ",") + `]}]}`)
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var ok, failed atomic.Int64
	var measuring atomic.Bool
	var wmu sync.Mutex
	whys := map[string]int{}
	why := func(s string) {
		wmu.Lock()
		if len(whys) < 20 {
			whys[s]++
		}
		wmu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, u := range urls {
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					resp, err := cl.Post(u+"/v2/models/bc/infer", "application/json", bytes.NewReader(body))
					if err != nil {
						if measuring.Load() {
							failed.Add(1)
							why(err.Error())
						}
						continue
					}
					msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
					resp.Body.Close()
					if measuring.Load() {
						if resp.StatusCode == 200 {
							ok.Add(1)
						} else {
							failed.Add(1)
							m, _, _ := strings.Cut(string(msg), `,"trace_id"`)
							why(fmt.Sprintf("%d %s", resp.StatusCode, m))
						}
					}
				}
			}()
		}
	}
	time.Sleep(2 * time.Second)
	b.ResetTimer()
	n0, t0 := size(), time.Now()
	measuring.Store(true)
	time.Sleep(window)
	measuring.Store(false)
	n1, el := size(), time.Since(t0)
	close(stop)
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(ok.Load())/el.Seconds(), "answered/s")
	b.ReportMetric(float64(n1-n0)/el.Seconds(), "appends/s")
	b.ReportMetric(float64(failed.Load()), "errors")
	if len(whys) > 0 {
		b.Logf("errors: %v", whys)
	}
	// The index catches up with the log once the load stops.
	final, ts := size(), time.Now()
	for {
		var c uint64
		if err := reader.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM vouch_index").Scan(&c); err != nil {
			b.Fatal(err)
		}
		if c >= final {
			break
		}
		if time.Since(ts) > time.Minute {
			b.Fatalf("the index holds %d rows a minute after the load stopped; the log %d entries", c, final)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.ReportMetric(float64(time.Since(ts).Milliseconds()), "index-lag-ms")
}
