package cli

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/sqllog"
	"github.com/vouchml/vouch/audit/sqllog/sqltest"
)

// TestReplicasSIGKILL: three `vouch serve` processes append to one shared
// log in a real MariaDB while clients load them; one replica at a time is
// killed with SIGKILL, 30 times, and restarted. After every kill the log
// verifies against its signed checkpoint; at the end every request that
// was answered 200 has exactly one record in the log.
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
	t.Logf("%d kills, %d answered requests, each recorded once, log of %d entries verifies", kills, len(answered), len(ents))
}
