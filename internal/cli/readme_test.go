package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// readmeCommands returns the lines of the README's first sh block.
func readmeCommands(t *testing.T) []string {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```sh\n")
	if !ok {
		t.Fatal("README has no sh block")
	}
	block, _, _ := strings.Cut(rest, "```")
	return strings.Split(strings.TrimSpace(block), "\n")
}

// TestREADMEFirstCommand runs the README's first command (the demo)
// through the CLI, from the repository root as a reader would, and checks
// that it tells the whole story.
func TestREADMEFirstCommand(t *testing.T) {
	cmds := readmeCommands(t)
	if len(cmds) != 2 {
		t.Fatalf("README must open with two commands, has %d", len(cmds))
	}
	const prefix = "go run ./cmd/vouch "
	if !strings.HasPrefix(cmds[0], prefix) {
		t.Fatalf("first command %q does not start with %q", cmds[0], prefix)
	}
	if !strings.HasPrefix(cmds[1], "go test") {
		t.Fatalf("second command %q is not the test command", cmds[1])
	}
	wd, _ := os.Getwd()
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	var out, errb bytes.Buffer
	start := time.Now()
	code := NewMain(&out, &errb).Run(context.Background(), strings.Fields(strings.TrimPrefix(cmds[0], prefix)))
	text := out.String()
	if _, dir, ok := strings.Cut(text, "Everything is in "); ok {
		dir, _, _ = strings.Cut(dir, ":")
		defer os.RemoveAll(strings.TrimSpace(dir))
	}
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), text)
	}
	for _, want := range []string{"signed by demo-signer+", "answered   300 requests", "VERIFIED  trace", "was declined; the principal reasons (kernel_shap", "recomputed, the same bit for bit", "verification FAILS", "entry does not match the tiles", "report.html"} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	if d := time.Since(start); d > time.Minute {
		t.Logf("the demo took %v; the README promises under a minute", d)
	}
}
