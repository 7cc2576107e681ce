package capture_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/capture"
	"github.com/vouchml/vouch/tensor"
)

func inputs(v float32) map[string]*tensor.Tensor {
	return map[string]*tensor.Tensor{
		"x":    tensor.From([]float32{v, -2.5, 3}, 1, 3),
		"ids":  tensor.From([]int64{1, 2}, 2),
		"mask": tensor.From([]bool{true, false}, 2),
		"h":    tensor.From([]tensor.Half{tensor.ToHalf(1.5)}, 1),
		"s":    tensor.From([]string{"a", "héllo"}, 2),
	}
}

func digest(t *testing.T, ts map[string]*tensor.Tensor) string {
	d, _, err := audit.InputDigest(ts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func blobs(t *testing.T, dir string) []string {
	var out []string
	filepath.WalkDir(filepath.Join(dir, "blobs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestPutGetShred(t *testing.T) {
	dir := t.TempDir()
	s, err := capture.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	in := inputs(1)
	d := digest(t, in)
	if err := s.Put("credit", d, in); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("credit", d, in); err != nil { // content-addressed: stored once
		t.Fatal(err)
	}
	if n := len(blobs(t, dir)); n != 1 {
		t.Fatalf("%d blobs after two puts of one input", n)
	}
	got, err := s.Get(d)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("got %v, want %v", got, in)
	}
	st, _ := os.Stat(filepath.Join(dir, "keys"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", st.Mode().Perm())
	}
	if b, _ := os.ReadFile(blobs(t, dir)[0]); strings.Contains(string(b), "héllo") {
		t.Fatal("blob holds plaintext")
	}
	if err := s.Put("credit", digest(t, inputs(2)), in); err == nil {
		t.Fatal("Put accepted a digest that is not the inputs'")
	}
	if _, err := s.Get(digest(t, inputs(3))); !errors.Is(err, capture.ErrNotFound) {
		t.Fatalf("Get of a never-stored digest: %v", err)
	}

	other := inputs(4)
	if err := s.Put("fraud", digest(t, other), other); err != nil {
		t.Fatal(err)
	}
	// A second store on the same directory (another process: the CLI while
	// the server runs) shreds; the first one sees it.
	s2, err := capture.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s2.Shred("credit"); n != 1 || err != nil {
		t.Fatalf("Shred = %d, %v", n, err)
	}
	if _, err := s.Get(d); !errors.Is(err, capture.ErrNotFound) && !errors.Is(err, capture.ErrShredded) {
		t.Fatalf("Get after shred: %v", err)
	}
	if _, err := s.Get(digest(t, other)); err != nil {
		t.Fatalf("another model's input after shredding credit: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "keys"))
	if !strings.Contains(string(b), " credit ") || !strings.Contains(string(b), "shredded") {
		t.Fatalf("key file after shred:\n%s", b)
	}
	if _, err := s2.Shred("credit"); !errors.Is(err, capture.ErrNotFound) {
		t.Fatalf("second shred: %v", err)
	}
	// A new capture for the model gets a new key.
	if err := s.Put("credit", d, in); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(d); err != nil {
		t.Fatal(err)
	}
	ks, _ := s.Keys()
	if len(ks) != 3 {
		t.Fatalf("keys: %+v", ks)
	}
}

// A copy of a blob taken before its key was shredded stays unreadable.
func TestShredMakesCopiesUnreadable(t *testing.T) {
	dir := t.TempDir()
	s, _ := capture.Open(dir)
	in := inputs(1)
	d := digest(t, in)
	s.Put("m", d, in)
	p := blobs(t, dir)[0]
	backup, _ := os.ReadFile(p)
	s.Shred("m")
	os.WriteFile(p, backup, 0o600) // restored from a backup
	if _, err := s.Get(d); !errors.Is(err, capture.ErrShredded) {
		t.Fatalf("Get of a restored blob after shred: %v", err)
	}
}

func TestTamperedBlob(t *testing.T) {
	dir := t.TempDir()
	s, _ := capture.Open(dir)
	in := inputs(1)
	d := digest(t, in)
	s.Put("m", d, in)
	p := blobs(t, dir)[0]
	b, _ := os.ReadFile(p)
	for _, off := range []int{len(b) - 1, len(b) - 30, 20} {
		c := append([]byte(nil), b...)
		c[off] ^= 1
		os.WriteFile(p, c, 0o600)
		if _, err := s.Get(d); !errors.Is(err, capture.ErrCorrupt) && !errors.Is(err, capture.ErrShredded) {
			t.Errorf("flip at %d: %v", off, err)
		}
	}
	os.WriteFile(p, b[:10], 0o600)
	if _, err := s.Get(d); !errors.Is(err, capture.ErrCorrupt) {
		t.Errorf("truncated: %v", err)
	}
}

func TestPurge(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := capture.OpenOptions(dir, capture.Options{Retain: 24 * time.Hour, Now: func() time.Time { return now }})
	a, b := inputs(1), inputs(2)
	s.Put("m", digest(t, a), a)
	now = now.Add(12 * time.Hour)
	s.Put("m", digest(t, b), b)
	now = now.Add(13 * time.Hour) // a expired, b not
	n, err := s.Purge()
	if n != 1 || err != nil {
		t.Fatalf("Purge = %d, %v", n, err)
	}
	if _, err := s.Get(digest(t, a)); !errors.Is(err, capture.ErrNotFound) {
		t.Fatalf("expired blob: %v", err)
	}
	if _, err := s.Get(digest(t, b)); err != nil {
		t.Fatalf("unexpired blob: %v", err)
	}
}

func TestParseRetain(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7y", 7 * 365 * 24 * time.Hour, true},
		{"30d", 30 * 24 * time.Hour, true},
		{"36h", 36 * time.Hour, true},
		{"0", 0, true},
		{"", 0, true},
		{"-1d", 0, false},
		{"7x", 0, false},
	} {
		got, err := capture.ParseRetain(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseRetain(%q) = %v, %v", tc.in, got, err)
		}
	}
}
