package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vouchml/vouch/onnx"
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
	// The predicted classes are those of the PyTorch reference output.
	want, _, err := onnx.DecodeTensorFile("../shared/models/digits_cnn/test_data_set_0/output_0.pb")
	if err != nil {
		t.Fatal(err)
	}
	ref := want.Data.([]float32)
	var classes []string
	for r := 0; r < want.Shape[0]; r++ {
		best := 0
		for c, v := range ref[r*10 : (r+1)*10] {
			if v > ref[r*10+best] {
				best = c
			}
		}
		classes = append(classes, fmt.Sprint(best))
	}
	if w := "argmax per row=[" + strings.Join(classes, " ") + "]"; !strings.Contains(out.String(), w) {
		t.Fatalf("output lacks %q:\n%s", w, out.String())
	}
}
