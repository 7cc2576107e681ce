package bundle

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	b := signedBundle(t, k)
	enc := b.Encode()
	got, err := Read(bytes.NewReader(enc), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !slicesEqual(got.Names(), fileOrder) {
		t.Errorf("names = %v, want %v", got.Names(), fileOrder)
	}
	for _, n := range b.Names() {
		x, _ := got.File(n)
		if !bytes.Equal(x, b.files[n]) {
			t.Errorf("%s differs after round trip", n)
		}
	}
	if !bytes.Equal(got.Encode(), enc) {
		t.Error("re-encoding a read bundle changed its bytes")
	}
	if got.Metadata().Model != b.Metadata().Model {
		t.Errorf("metadata model = %v", got.Metadata().Model)
	}
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// Identical contents, built and signed twice, give identical bytes.
func TestDeterministic(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	a := signedBundle(t, k).Encode()
	b := signedBundle(t, k).Encode()
	if !bytes.Equal(a, b) {
		t.Fatal("two bundles of identical contents differ")
	}
	tr := tar.NewReader(bytes.NewReader(a))
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
		if h.ModTime.Unix() != 0 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || h.Mode != 0o644 || h.Typeflag != tar.TypeReg {
			t.Errorf("%s: header not canonical: %+v", h.Name, h)
		}
	}
	if !slicesEqual(names, fileOrder) {
		t.Errorf("archive order = %v, want %v", names, fileOrder)
	}
}

func TestOptionalFiles(t *testing.T) {
	b, err := New(testMetadata(), Contents{Plan: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Names(); !slicesEqual(got, []string{MetadataFile, PlanFile}) {
		t.Errorf("names = %v", got)
	}
	if _, err := New(testMetadata(), Contents{}); err == nil {
		t.Error("New without a plan succeeded")
	}
}

func TestNewChecksMetadata(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*Metadata)
		want string
	}{
		{"no name", func(m *Metadata) { m.Model.Name = "" }, "no model name"},
		{"no version", func(m *Metadata) { m.Model.Version = "" }, "has no version"},
		{"bad source digest", func(m *Metadata) { m.Source.Digest = "md5:abc" }, "source digest"},
		{"bad calibration digest", func(m *Metadata) { m.Calibration.Digest = "sha256:XYZ" }, "calibration data digest"},
		{"no plan format", func(m *Metadata) { m.Plan.FormatVersion = "" }, "plan format"},
		{"empty options", func(m *Metadata) { m.Options = []byte("{}") }, "options"},
		{"array options", func(m *Metadata) { m.Options = []byte("[1]") }, "options"},
		{"no vouch version", func(m *Metadata) { m.Environment.VouchVersion = "" }, "vouch version"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := testMetadata()
			tt.edit(&m)
			_, err := New(m, testContents())
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "bundle: ") {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.vouch")
	b := signedBundle(t, testKey(t, "k", 1))
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Encode(), b.Encode()) {
		t.Error("file differs")
	}
	if err := b.WriteFile(filepath.Join(dir, "missing", "x.vouch")); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want 1 (no temporary files left)", len(ents))
	}
}

// Hostile archives are refused with ErrFormat and an error that says why.
func TestReadHostile(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	good := entries(signedBundle(t, k))
	goodBytes := makeTar(t, good)
	meta := good[0].data

	link := func(typ byte, name, target string) entry {
		return entry{tar.Header{Typeflag: typ, Name: name, Linkname: target, Mode: 0o777}, nil}
	}
	for _, tt := range []struct {
		name string
		data []byte
		lim  Limits
		want string
	}{
		{"path traversal", makeTar(t, append(good, reg("../../etc/cron.d/x", []byte("x")))), Limits{}, "path traversal"},
		{"traversal to known name", makeTar(t, append(without(good, PlanFile), reg("../plan.vouchplan", []byte("x")))), Limits{}, "path traversal"},
		{"absolute path", makeTar(t, append(good, reg("/etc/passwd", []byte("x")))), Limits{}, "path traversal"},
		{"subdirectory", makeTar(t, append(good, reg("a/plan.vouchplan", []byte("x")))), Limits{}, "path traversal"},
		{"backslash", makeTar(t, append(good, reg(`..\x`, []byte("x")))), Limits{}, "path traversal"},
		{"symlink", makeTar(t, append(without(good, PlanFile), link(tar.TypeSymlink, PlanFile, "/etc/shadow"))), Limits{}, "symbolic link"},
		{"hardlink", makeTar(t, append(without(good, PlanFile), link(tar.TypeLink, PlanFile, ReportFile))), Limits{}, "hard link"},
		{"directory", makeTar(t, append([]entry{link(tar.TypeDir, "report.json", "")}, good...)), Limits{}, "directory"},
		{"fifo", makeTar(t, append([]entry{link(tar.TypeFifo, "report.json", "")}, good...)), Limits{}, "FIFO"},
		{"duplicate", makeTar(t, append(good, reg(PlanFile, []byte("second plan")))), Limits{}, `duplicate entry "plan.vouchplan"`},
		{"unknown entry", makeTar(t, append(good, reg("evil.sh", []byte("x")))), Limits{}, `unknown entry "evil.sh"`},
		{"oversized entry", goodBytes, Limits{MaxFileSize: 16}, "over the limit of 16"},
		{"oversized total", goodBytes, Limits{MaxTotalSize: 100}, "more than the limit of 100 bytes"},
		{"oversized metadata", makeTar(t, replace(good, MetadataFile, bytes.Repeat([]byte(" "), MaxJSONSize+1))), Limits{}, "over the limit"},
		{"no plan", makeTar(t, without(good, PlanFile)), Limits{}, "no plan.vouchplan"},
		{"no metadata", makeTar(t, without(good, MetadataFile)), Limits{}, "no metadata.json"},
		{"bad metadata", makeTar(t, replace(good, MetadataFile, []byte("{"))), Limits{}, "metadata.json"},
		{"future metadata", makeTar(t, replace(good, MetadataFile, bytes.Replace(meta, []byte(`"formatVersion": 1`), []byte(`"formatVersion": 2`), 1))), Limits{}, "format version 2"},
		{"truncated in header", goodBytes[:700], Limits{}, "truncated"},
		{"truncated in data", goodBytes[:512+100], Limits{}, "truncated"},
		{"truncated at entry boundary", goodBytes[:len(goodBytes)-1024], Limits{}, "no end-of-archive marker"},
		{"truncated end marker", goodBytes[:len(goodBytes)-700], Limits{}, "truncated"},
		{"empty", nil, Limits{}, "no end-of-archive marker"},
		{"not a tar", []byte(strings.Repeat("hello world ", 100)), Limits{}, "invalid archive"},
		{"trailing data", append(append([]byte{}, goodBytes...), []byte("hidden")...), Limits{}, "after the end of the archive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Read(bytes.NewReader(tt.data), tt.lim)
			if err == nil {
				t.Fatalf("Read succeeded: %v", b.Names())
			}
			if !errors.Is(err, ErrFormat) {
				t.Errorf("err = %v, want one wrapping ErrFormat", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "bundle: ") {
				t.Errorf("err = %q, want one containing %q", err, tt.want)
			}
		})
	}
}

// A global PAX header is refused; zero padding after the end is fine.
func TestReadPAXAndPadding(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	good := entries(signedBundle(t, k))
	g := entry{tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": "x"}, Format: tar.FormatPAX}, nil}
	if _, err := Read(bytes.NewReader(makeTar(t, append([]entry{g}, good...))), Limits{}); err == nil || !strings.Contains(err.Error(), "global PAX header") {
		t.Errorf("global PAX header: err = %v", err)
	}
	padded := append(makeTar(t, good), make([]byte, 10240)...)
	if _, err := Read(bytes.NewReader(padded), Limits{}); err != nil {
		t.Errorf("zero padding after the end: %v", err)
	}
	// Entries in another order are read.
	rev := make([]entry, len(good))
	for i, e := range good {
		rev[len(good)-1-i] = e
	}
	if _, err := Read(bytes.NewReader(makeTar(t, rev)), Limits{}); err != nil {
		t.Errorf("reversed order: %v", err)
	}
}

func TestDigest(t *testing.T) {
	if got, want := Digest(nil), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; got != want {
		t.Errorf("Digest(nil) = %s, want %s", got, want)
	}
	for d, ok := range map[string]bool{
		Digest([]byte("x")):                 true,
		"sha256:" + strings.Repeat("A", 64): false,
		"sha256:abc":                        false,
		strings.Repeat("a", 64):             false,
	} {
		if validDigest(d) != ok {
			t.Errorf("validDigest(%q) = %v", d, !ok)
		}
	}
}
