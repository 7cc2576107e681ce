package cli

import (
	"context"
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
	"github.com/vouchml/vouch/audit/index"
)

// TestCrashDurability: a real `vouch serve` process under load from a few
// clients is killed with SIGKILL at random moments, at least 20 times.
// After every restart the log verifies against its signed checkpoint, and
// every request that was answered 200 has its record in the log.
func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("builds vouch and kills it 20 times")
	}
	const kills = 20
	budget := time.Now().Add(60 * time.Second) // bounded in CI
	dir := t.TempDir()
	bin := buildVouch(t, dir)
	planFile := buildBC(t, dir)
	data := filepath.Join(dir, "data")
	body := `{"inputs":[{"name":"features","datatype":"FP32","shape":[1,30],"data":[` + strings.TrimSuffix(strings.Repeat("0.5,", 30), ",") + `]}]}`

	answered := map[string]bool{} // trace ids answered 200, over all runs
	var mu sync.Mutex
	start := func() (*exec.Cmd, string) {
		return startServeProcess(t, bin, dir, "--plan", planFile+",bc", "--data", data, "--grpc", "",
			"--access-log", "", "--workers", "1", "--queue", "64")
	}
	check := func(round int) {
		ctx := context.Background()
		l, err := audit.Open(ctx, filepath.Join(data, "audit"), audit.Options{}) // read-only, beside the server
		if err != nil {
			t.Fatalf("round %d: open: %v", round, err)
		}
		defer l.Close(ctx)
		rep, err := audit.Verify(ctx, os.DirFS(filepath.Join(data, "audit")), audit.VerifyOptions{VerifierKeys: l.VerifierKeys(), CheckRecords: true})
		if err != nil {
			t.Fatalf("round %d: the log does not verify after a restart: %v", round, err)
		}
		have := map[string]bool{}
		if err := l.Query(ctx, index.Filter{Kind: audit.KindInference}, func(r index.Row) error {
			have[r.TraceID] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		missing := 0
		for tr := range answered {
			if !have[tr] {
				missing++
				if missing < 5 {
					t.Errorf("round %d: request %s was answered 200 but its record is not in the log", round, tr)
				}
			}
		}
		if missing > 0 {
			t.Fatalf("round %d: %d of %d answered requests missing (log of %d entries)", round, missing, len(answered), rep.Checkpoint.Size)
		}
	}

	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	for round := 0; round <= kills; round++ {
		if time.Now().After(budget) {
			t.Fatalf("out of time after %d kills", round)
		}
		cmd, url := start()
		check(round) // the restart recovered everything answered before the kill
		if round == kills {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			break
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		client := &http.Client{Timeout: 5 * time.Second}
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					resp, err := client.Post(url+"/v2/models/bc/infer", "application/json", strings.NewReader(body))
					if err != nil {
						continue // the server is gone
					}
					resp.Body.Close()
					if resp.StatusCode == 200 {
						mu.Lock()
						answered[resp.Header.Get("Vouch-Trace-Id")] = true
						mu.Unlock()
					}
				}
			}()
		}
		time.Sleep(time.Duration(50+rng.IntN(500)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		close(stop)
		wg.Wait()
	}
	mu.Lock()
	n := len(answered)
	mu.Unlock()
	if n < kills*10 {
		t.Fatalf("only %d requests answered over %d runs", n, kills)
	}
	t.Logf("%d kills, %d requests answered 200, all in the verified log", kills, n)
}
