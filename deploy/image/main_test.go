package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage builds the static binary and the image, writes the tarball,
// reads it back as a container runtime would, and runs the binary taken
// out of the image's layer.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds vouch")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "vouch")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "../../cmd/vouch")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	img, err := Build(bin)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "vouch.tar")
	if err := tarball.WriteToFile(out, name.MustParseReference("vouch:test").(name.Tag), img); err != nil {
		t.Fatal(err)
	}
	back, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := back.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != User || len(c.Entrypoint) != 1 || c.Entrypoint[0] != BinaryPath || cf.OS != "linux" {
		t.Errorf("config: user %q entrypoint %q os %q", c.User, c.Entrypoint, cf.OS)
	}
	for _, p := range []string{"8080/tcp", "8081/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed", p)
		}
	}
	layers, err := back.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var got []byte
	var passwd string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Name {
		case BinaryPath[1:]:
			if h.Mode&0o111 == 0 {
				t.Errorf("the binary's mode %o is not executable", h.Mode)
			}
			got, _ = io.ReadAll(tr)
		case "etc/passwd":
			b, _ := io.ReadAll(tr)
			passwd = string(b)
		}
	}
	if !strings.Contains(passwd, ":65532:65532:") {
		t.Errorf("no passwd entry for the image's user:\n%s", passwd)
	}
	want, _ := os.ReadFile(bin)
	if !bytes.Equal(got, want) {
		t.Fatalf("the image's binary (%d bytes) is not the one built (%d)", len(got), len(want))
	}
	x := filepath.Join(dir, "from-image")
	os.WriteFile(x, got, 0o755)
	v, err := exec.Command(x, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(v), "vouch") {
		t.Errorf("the image's binary does not run: %v\n%s", err, v)
	}
	// The same binary gives the same image: no timestamps leak in.
	img2, _ := Build(bin)
	d1, _ := img.Digest()
	d2, _ := img2.Digest()
	if d1 != d2 {
		t.Errorf("two builds of one binary give images %s and %s", d1, d2)
	}
}
