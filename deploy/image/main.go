// Command image builds vouch's container image without a container
// daemon: it compiles the static binary (CGO_ENABLED=0), puts it in one
// layer at /usr/local/bin/vouch with a passwd entry for the non-root user
// 65532, and writes an OCI image tarball that `docker load`, `podman load`
// or `crane push` take. The image is what deploy/Dockerfile builds, minus
// the distroless base (CA certificates and tzdata are added from this
// machine when present).
//
//	go run ./deploy/image -o vouch.tar [-tag vouch:dev] [-binary PATH]
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The image's fixed facts; deploy's tests check the manifests against them.
const (
	BinaryPath = "/usr/local/bin/vouch"
	User       = "65532:65532"
	DataDir    = "/var/lib/vouch"
)

func main() {
	out := flag.String("o", "vouch.tar", "image tarball to write")
	tag := flag.String("tag", "vouch:dev", "image reference recorded in the tarball")
	bin := flag.String("binary", "", "a built vouch binary (default: build one with CGO_ENABLED=0)")
	flag.Parse()
	if err := run(*out, *tag, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(out, tag, bin string) error {
	if bin == "" {
		dir, err := os.MkdirTemp("", "vouch-image")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "vouch")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/vouch")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build: %w", err)
		}
	}
	img, err := Build(bin)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("%s: %s %s\n", out, ref, d)
	return nil
}

// arch is the architecture the binary was built for: $GOARCH, or this
// machine's.
func arch() string {
	if a := os.Getenv("GOARCH"); a != "" {
		return a
	}
	return runtime.GOARCH
}

// Build returns the image holding the binary at bin.
func Build(bin string) (v1.Image, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dir := func(p string, mode int64, uid int) {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p, Mode: mode, Uid: uid, Gid: uid, ModTime: epoch})
	}
	file := func(p string, mode int64, data []byte) {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(data)), ModTime: epoch})
		tw.Write(data)
	}
	for _, d := range []string{"etc/", "usr/", "usr/local/", "usr/local/bin/", "tmp/"} {
		dir(d, 0o755, 0)
	}
	dir("var/", 0o755, 0)
	dir("var/lib/", 0o755, 0)
	dir("var/lib/vouch/", 0o700, 65532)
	dir("home/", 0o755, 0)
	dir("home/nonroot/", 0o700, 65532)
	file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
	file("etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n"))
	if ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		dir("etc/ssl/", 0o755, 0)
		dir("etc/ssl/certs/", 0o755, 0)
		file("etc/ssl/certs/ca-certificates.crt", 0o644, ca)
	}
	file(BinaryPath[1:], 0o755, b)
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg := cf.Config
	cfg.User = User
	cfg.Entrypoint = []string{BinaryPath}
	cfg.Cmd = []string{"serve", "--help"}
	cfg.WorkingDir = "/home/nonroot"
	cfg.Env = []string{"HOME=/home/nonroot", "PATH=/usr/local/bin"}
	cfg.ExposedPorts = map[string]struct{}{"8080/tcp": {}, "8081/tcp": {}}
	cfg.Volumes = map[string]struct{}{DataDir: {}}
	cfg.Labels = map[string]string{"org.opencontainers.image.source": "https://github.com/vouchml/vouch", "org.opencontainers.image.title": "vouch"}
	img, err = mutate.Config(img, cfg)
	if err != nil {
		return nil, err
	}
	cf, _ = img.ConfigFile()
	cf.Architecture, cf.OS = arch(), "linux"
	cf.Created = v1.Time{Time: epoch}
	return mutate.ConfigFile(img, cf)
}
