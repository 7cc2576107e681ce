package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
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

// TestREADMEFirstCommand runs the README's first command through the CLI
// (from the repository root, as a reader would) and checks its output.
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
	code := NewMain(&out, &errb).Run(context.Background(), strings.Fields(strings.TrimPrefix(cmds[0], prefix)))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "argmax=") {
		t.Fatalf("output has no prediction:\n%s", out.String())
	}
}
