package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Regression (issue 20 D): replay --input /dev/zero ran out of memory.
func TestTensorFileBounded(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.npy")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(maxTensorFile + 1) // sparse: no disk used
	f.Close()
	for _, c := range []struct{ path, want string }{
		{"/dev/zero", "not a regular file"},
		{"/dev/zero.npy", "no such file"},
		{big, "more than"},
	} {
		if _, err := ReadTensorFile(c.path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadTensorFile(%s): %v, want %q", c.path, err, c.want)
		}
	}
	if err := os.Symlink("/dev/zero", filepath.Join(t.TempDir(), "z.npy")); err == nil {
		if _, err := ReadTensorFile(filepath.Join(filepath.Dir(big), "..", "z.npy")); err == nil {
			t.Error("a link to /dev/zero was read")
		}
	}
	code, _, errs := run(t, "replay", "0123456789abcdef0123456789abcdef", "--input", "x=/dev/zero", "--data", t.TempDir())
	if code == 0 || strings.Contains(errs, "out of memory") {
		t.Fatalf("replay --input /dev/zero: %d %s", code, errs)
	}
}
