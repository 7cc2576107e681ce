package cli

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// buildVouch builds the vouch binary into dir for tests that run it as a
// process (to kill it).
func buildVouch(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "vouch")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/vouch").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startServeProcess runs `bin serve ARGS --listen ADDR` on a free loopback port,
// its output appended to dir/serve.log, and returns once it is ready.
func startServeProcess(t *testing.T, bin, dir string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, append(append([]string{"serve"}, args...), "--listen", addr)...)
	logf, _ := os.OpenFile(filepath.Join(dir, "serve.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get(url + "/v2/health/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return cmd, url
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			b, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
			t.Fatalf("server not ready after 30s:\n%s", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
