package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vouchml/vouch/bundle"
)

type testRand byte

func (r testRand) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r) + byte(i)
	}
	return len(p), nil
}

func testKey(t testing.TB, name string, seed byte) *bundle.PrivateKey {
	t.Helper()
	_, k, err := bundle.GenerateKey(testRand(seed), name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// makeBundle returns the bytes of a bundle of name@version signed by k.
func makeBundle(t testing.TB, k *bundle.PrivateKey, name, version, plan string) []byte {
	t.Helper()
	b, err := bundle.New(bundle.Metadata{
		Model:       bundle.Model{Name: name, Version: version},
		Source:      bundle.Artifact{Name: name + ".onnx", Digest: bundle.Digest([]byte(name))},
		Plan:        bundle.PlanInfo{FormatVersion: "1"},
		Options:     json.RawMessage(`{"precision":"fp32"}`),
		Environment: bundle.Environment{OS: "linux", Arch: "amd64", GoVersion: "go1.26.8", VouchVersion: "0.1.0"},
	}, bundle.Contents{Plan: []byte(plan), Report: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if k != nil {
		if err := bundle.Sign(b, k); err != nil {
			t.Fatal(err)
		}
	}
	return b.Encode()
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { c.t = c.t.Add(time.Second); return c.t }

func openTest(t *testing.T, keys ...*bundle.PrivateKey) (*Registry, string) {
	t.Helper()
	dir := t.TempDir()
	var trusted []*bundle.PublicKey
	for _, k := range keys {
		trusted = append(trusted, k.Public())
	}
	c := &clock{time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	r, err := Open(Options{Dir: dir, TrustedKeys: trusted, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir
}

var ctx = context.Background()

// dirState lists the files under the blob and tmp directories.
func dirState(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, d := range []string{"blobs/sha256", "tmp"} {
		ents, err := os.ReadDir(filepath.Join(dir, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			out = append(out, d+"/"+e.Name())
		}
	}
	return out
}

func TestPushPullLoad(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	r, dir := openTest(t, k)
	data := makeBundle(t, k, "credit-risk", "2.1.0", "plan v2.1")
	v, err := r.Push(ctx, bytes.NewReader(data), PushOptions{Principal: "alice", Ref: "credit-risk@2.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Name != "credit-risk" || v.Version != "2.1.0" || v.Digest != bundle.Digest(data) || v.Size != int64(len(data)) ||
		v.PushedBy != "alice" || v.SignedBy[0] != k.ID() || v.PlanDigest != bundle.Digest([]byte("plan v2.1")) {
		t.Errorf("pushed version = %+v", v)
	}
	blob := filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(v.Digest, "sha256:"))
	if fi, err := os.Stat(blob); err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("blob %s: %v %v", blob, fi, err)
	}
	if st := dirState(t, dir); len(st) != 1 {
		t.Errorf("files after push = %v", st)
	}

	dst := filepath.Join(t.TempDir(), "out.vouch")
	if _, err := r.Pull(ctx, "credit-risk@2.1.0", dst, "bob"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Error("pulled bytes differ from pushed bytes")
	}
	l, err := r.Load(ctx, "credit-risk@2.1.0", "server")
	if err != nil {
		t.Fatal(err)
	}
	if string(l.Bundle.Plan()) != "plan v2.1" || l.Provenance.Model.Version != "2.1.0" {
		t.Errorf("loaded %+v", l.Provenance)
	}
	if _, err := r.Show(ctx, "credit-risk@2.1.0", "carol"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Load(ctx, "credit-risk@9.9.9", "mallory"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing version: %v", err)
	}

	acc, err := r.Accesses(ctx, "credit-risk")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bob pull 2.1.0 ok", "server load 2.1.0 ok", "carol show 2.1.0 ok", "mallory load  registry: not found: no version credit-risk@9.9.9"}
	if len(acc) != len(want) {
		t.Fatalf("accesses = %+v", acc)
	}
	for i, a := range acc {
		if got := a.Principal + " " + a.Action + " " + a.Version + " " + a.Outcome; got != want[i] {
			t.Errorf("access %d = %q, want %q", i, got, want[i])
		}
		if a.At.IsZero() || (a.Version != "" && a.Digest != v.Digest) {
			t.Errorf("access %d = %+v", i, a)
		}
	}
	if _, err := r.Load(ctx, "credit-risk@2.1.0", ""); err == nil {
		t.Error("a read without a principal succeeded")
	}
}

func TestDuplicateVersion(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	r, dir := openTest(t, k)
	first := makeBundle(t, k, "credit-risk", "2.1.0", "plan A")
	if _, err := r.Push(ctx, bytes.NewReader(first), PushOptions{Principal: "alice"}); err != nil {
		t.Fatal(err)
	}
	before := dirState(t, dir)
	for _, tt := range []struct {
		name string
		data []byte
		want string
	}{
		{"same bundle", first, "the same bundle"},
		{"different bundle", makeBundle(t, k, "credit-risk", "2.1.0", "plan B"), "versions are immutable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Push(ctx, bytes.NewReader(tt.data), PushOptions{Principal: "bob"})
			if !errors.Is(err, ErrVersionExists) || !strings.Contains(err.Error(), tt.want) ||
				!strings.Contains(err.Error(), "credit-risk@2.1.0 is already "+bundle.Digest(first)+", pushed by alice") {
				t.Fatalf("err = %v", err)
			}
			if st := dirState(t, dir); strings.Join(st, " ") != strings.Join(before, " ") {
				t.Errorf("files changed: %v → %v", before, st)
			}
		})
	}
	l, err := r.Load(ctx, "credit-risk@2.1.0", "x")
	if err != nil || string(l.Bundle.Plan()) != "plan A" {
		t.Errorf("version changed after a refused push: %v", err)
	}
}

func TestPushRefuses(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	other := testKey(t, "mallory", 2)
	r, dir := openTest(t, k)
	good := makeBundle(t, k, "credit-risk", "1.0.0", "PLANBYTES")
	tampered := bytes.Replace(good, []byte("PLANBYTES"), []byte("EVILBYTES"), 1)
	for _, tt := range []struct {
		name string
		data []byte
		opts PushOptions
		is   error
		want string
	}{
		{"untrusted key", makeBundle(t, other, "credit-risk", "1.0.0", "plan"), PushOptions{Principal: "a"}, bundle.ErrUntrusted, "signed by " + other.ID() + ", which is not trusted"},
		{"unsigned", makeBundle(t, nil, "credit-risk", "1.0.0", "plan"), PushOptions{Principal: "a"}, bundle.ErrUnsigned, "not signed"},
		{"tampered", tampered, PushOptions{Principal: "a"}, bundle.ErrTampered, "plan.vouchplan has digest"},
		{"truncated", good[:len(good)/2], PushOptions{Principal: "a"}, bundle.ErrFormat, "truncated"},
		{"empty", nil, PushOptions{Principal: "a"}, bundle.ErrFormat, ""},
		{"wrong ref", good, PushOptions{Principal: "a", Ref: "credit-risk@2.0.0"}, ErrInvalidRef, "signed metadata says credit-risk@1.0.0"},
		{"alias-like version", makeBundle(t, k, "credit-risk", "prod", "plan"), PushOptions{Principal: "a"}, ErrInvalidRef, "not NAME@VERSION"},
		{"bad name", makeBundle(t, k, "../etc", "1.0.0", "plan"), PushOptions{Principal: "a"}, ErrInvalidRef, ""},
		{"no principal", good, PushOptions{}, nil, "no principal"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Push(ctx, bytes.NewReader(tt.data), tt.opts)
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.is, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "registry: ") {
				t.Errorf("error lacks the package prefix: %v", err)
			}
			if st := dirState(t, dir); len(st) != 0 {
				t.Errorf("a refused push left %v", st)
			}
		})
	}
	if vs, _ := r.List(ctx, ""); len(vs) != 0 {
		t.Errorf("index holds %v after refused pushes", vs)
	}
}

func TestAliases(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	r, _ := openTest(t, k)
	for _, v := range []string{"1.0.0", "2.0.0"} {
		if _, err := r.Push(ctx, bytes.NewReader(makeBundle(t, k, "m", v, "plan "+v)), PushOptions{Principal: "ci"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Tag(ctx, "m@1.0.0", "prod", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Tag(ctx, "m@2.0.0", "staging", "alice"); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Resolve(ctx, "m@prod"); err != nil || v.Version != "1.0.0" {
		t.Fatalf("m@prod = %v, %v", v, err)
	}
	// Promote staging to prod.
	ev, err := r.Tag(ctx, "m@staging", "prod", "bob")
	if err != nil || ev.Version != "2.0.0" || ev.Previous != "1.0.0" || ev.SetBy != "bob" {
		t.Fatalf("promotion = %+v, %v", ev, err)
	}
	if ev, err := r.Tag(ctx, "m@2.0.0", "prod", "bob"); err != nil || ev != nil {
		t.Errorf("re-tagging the same version = %v, %v", ev, err)
	}
	if l, err := r.Load(ctx, "m@prod", "server"); err != nil || string(l.Bundle.Plan()) != "plan 2.0.0" {
		t.Errorf("load m@prod: %v", err)
	}
	hist, err := r.AliasHistory(ctx, "m", "prod")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].Version != "1.0.0" || hist[0].Previous != "" || hist[1].Version != "2.0.0" || hist[1].Previous != "1.0.0" ||
		!hist[1].SetAt.After(hist[0].SetAt) {
		t.Errorf("history = %+v", hist)
	}
	if all, _ := r.AliasHistory(ctx, "m", ""); len(all) != 3 {
		t.Errorf("all history = %+v", all)
	}
	vs, err := r.List(ctx, "m")
	if err != nil || len(vs) != 2 || len(vs[0].Aliases) != 0 || strings.Join(vs[1].Aliases, ",") != "prod,staging" {
		t.Errorf("list = %+v, %v", vs, err)
	}
	for _, tt := range []struct{ ref, alias, want string }{
		{"m@9.0.0", "prod", "not found"},
		{"m@nope", "prod", "no alias m@nope"},
		{"m@1.0.0", "2.0", "must start with a letter"},
		{"m@1.0.0", "v2", "must not look like a version"},
		{"m@1.0.0", "a/b", "must start with a letter"},
		{"m", "prod", "want NAME@VERSION"},
	} {
		if _, err := r.Tag(ctx, tt.ref, tt.alias, "eve"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Tag(%s, %s) = %v, want %q", tt.ref, tt.alias, err, tt.want)
		}
	}
}

// A blob altered on disk after push is refused on every read, and the
// refusal is recorded.
func TestTamperedBlob(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	r, dir := openTest(t, k)
	data := makeBundle(t, k, "m", "1.0.0", "plan")
	v, err := r.Push(ctx, bytes.NewReader(data), PushOptions{Principal: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(v.Digest, "sha256:"))
	os.Chmod(blob, 0o644)
	// Another validly signed bundle swapped in: the content address catches it.
	swapped := makeBundle(t, k, "m", "1.0.0", "evil plan")
	if err := os.WriteFile(blob, swapped, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = r.Load(ctx, "m@1.0.0", "server")
	if !errors.Is(err, ErrIntegrity) || !strings.Contains(err.Error(), bundle.Digest(swapped)) || !strings.Contains(err.Error(), v.Digest) {
		t.Fatalf("err = %v", err)
	}
	dst := filepath.Join(t.TempDir(), "x.vouch")
	if _, err := r.Pull(ctx, "m@1.0.0", dst, "bob"); !errors.Is(err, ErrIntegrity) {
		t.Errorf("pull: %v", err)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Error("a refused pull wrote its destination")
	}
	acc, _ := r.Accesses(ctx, "m")
	if len(acc) != 2 || !strings.Contains(acc[0].Outcome, "does not match its digest") {
		t.Errorf("accesses = %+v", acc)
	}
	os.Remove(blob)
	if _, err := r.Load(ctx, "m@1.0.0", "server"); !errors.Is(err, ErrIntegrity) {
		t.Errorf("missing blob: %v", err)
	}
}

func TestParseRef(t *testing.T) {
	for _, tt := range []struct {
		in      string
		ok      bool
		version bool
	}{
		{"credit-risk@2.1.0", true, true},
		{"credit-risk@v3", true, true},
		{"credit-risk@prod", true, false},
		{"Bert_base.v2@1.0.0-rc.1+build", true, true},
		{"credit-risk", false, false},
		{"credit-risk@", false, false},
		{"@1.0.0", false, false},
		{"../x@1.0.0", false, false},
		{"a/b@1.0.0", false, false},
		{"m@-1", false, false},
		{"m@prod/x", false, false},
	} {
		r, err := ParseRef(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseRef(%q) err = %v", tt.in, err)
			continue
		}
		if err == nil && (r.String() != tt.in || r.IsVersion() != tt.version) {
			t.Errorf("ParseRef(%q) = %v, version %v", tt.in, r, r.IsVersion())
		}
		if err != nil && !errors.Is(err, ErrInvalidRef) {
			t.Errorf("ParseRef(%q) err = %v, want ErrInvalidRef", tt.in, err)
		}
	}
}

func TestReopen(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	dir := t.TempDir()
	opts := Options{Dir: dir, TrustedKeys: []*bundle.PublicKey{k.Public()}}
	r, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Push(ctx, bytes.NewReader(makeBundle(t, k, "m", "1.0.0", "p")), PushOptions{Principal: "ci"}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(ctx, "m@1.0.0"); err != nil {
		t.Error(err)
	}
	r.db.Exec("PRAGMA user_version = 7")
	r.Close()
	if _, err := Open(opts); err == nil || !strings.Contains(err.Error(), "schema version 7") {
		t.Errorf("newer schema: %v", err)
	}
	if _, err := Open(Options{Dir: dir}); err == nil {
		t.Error("Open without trusted keys succeeded")
	}
	if _, err := Open(Options{TrustedKeys: opts.TrustedKeys}); err == nil {
		t.Error("Open without a directory succeeded")
	}
}

// Concurrent pushes of one version, from two registries on one directory:
// exactly one wins.
func TestConcurrentPush(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	r1, dir := openTest(t, k)
	r2, err := Open(Options{Dir: dir, TrustedKeys: []*bundle.PublicKey{k.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := r1
			if i%2 == 1 {
				r = r2
			}
			_, errs[i] = r.Push(ctx, bytes.NewReader(makeBundle(t, k, "m", "1.0.0", "plan "+string(rune('a'+i)))), PushOptions{Principal: "ci"})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else if !errors.Is(err, ErrVersionExists) {
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d pushes succeeded, want 1", ok)
	}
	if st := dirState(t, dir); len(st) != 1 {
		t.Errorf("files = %v, want one blob", st)
	}
}
