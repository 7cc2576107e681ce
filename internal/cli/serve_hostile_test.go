package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHelpAndVersion: asked-for help goes to standard output, a mistake's
// usage to standard error; --version prints the version (issue 20 A8).
func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"serve", "-h"}, {"help", "serve"}} {
		code, out, errs := run(t, args...)
		if code != 0 || !strings.Contains(out, "Usage") && !strings.Contains(out, "vouch <command>") || errs != "" {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %q", args, code, len(out), errs)
		}
	}
	if code, out, errs := run(t); code != ExitUsage || out != "" || !strings.Contains(errs, "vouch <command>") {
		t.Errorf("no command: exit %d, stdout %q", code, out)
	}
	if code, out, _ := run(t, "--version"); code != 0 || !strings.HasPrefix(out, "vouch ") {
		t.Errorf("--version: exit %d %q", code, out)
	}
}

// TestServeBindsFirst: a server that cannot bind its address fails before
// it writes anything under DATA (the log's keys) (issue 20 A8).
func TestServeBindsFirst(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	planFile := filepath.Join(dir, "bc.plan")
	if code, _, errs := run(t, "build", bcModel+"/model.onnx", "-o", planFile); code != 0 {
		t.Fatalf("build: %s", errs)
	}
	data := filepath.Join(dir, "data")
	code, _, errs := run(t, "serve", "--plan", planFile, "--listen", busy.Addr().String(), "--grpc", "", "--data", data, "--access-log", "")
	if code == 0 || !strings.Contains(errs, "address already in use") {
		t.Fatalf("serve on a busy port: exit %d %s", code, errs)
	}
	if ents, err := os.ReadDir(data); err == nil && len(ents) > 0 {
		t.Errorf("serve wrote %v under DATA before failing to bind", ents)
	}
}

// TestServeWarnsWithoutCredentials: binding a non-loopback address
// without credentials says so (issue 20 A8).
func TestServeWarnsWithoutCredentials(t *testing.T) {
	dir := t.TempDir()
	planFile := filepath.Join(dir, "bc.plan")
	if code, _, errs := run(t, "build", bcModel+"/model.onnx", "-o", planFile); code != 0 {
		t.Fatalf("build: %s", errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var errs bytes.Buffer
	done := make(chan error, 1)
	go func() {
		m := NewMain(&errs, &errs)
		o := ServeOptions{Plans: []string{planFile + ",bc"}, Listen: "0.0.0.0:0", Audit: "off", Workers: 1, Queue: 4,
			ShutdownTimeout: 5 * time.Second, ready: func(h, g string) { cancel() }}
		o.Limits.AnonymousRoles = "infer"
		done <- m.serve(ctx, o)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start")
	}
	if !strings.Contains(errs.String(), "warning: listening on ") || !strings.Contains(errs.String(), "without --credentials") {
		t.Fatalf("no warning: %s", errs.String())
	}
}
