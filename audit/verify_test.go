package audit

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// tamperBase is a closed log of 600 entries: bundles 000 and 001 full,
// 002.p/88 partial; level-1 tile 000.p/2.
var tamperBase = struct {
	once sync.Once
	dir  string
	err  error
}{}

func baseLog(t *testing.T) string {
	tamperBase.once.Do(func() {
		dir, err := os.MkdirTemp("", "audit-verify-")
		if err != nil {
			tamperBase.err = err
			return
		}
		l := openTest(t, dir, Options{NoIndex: true})
		appendN(t, l, 0, 600, 4)
		tamperBase.dir, tamperBase.err = dir, l.Close(context.Background())
	})
	if tamperBase.err != nil {
		t.Fatal(tamperBase.err)
	}
	return tamperBase.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tamperBase.dir != "" {
		os.RemoveAll(tamperBase.dir)
	}
	os.Exit(code)
}

func copyDir(t *testing.T, src string) string {
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func modify(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// entryOffset returns the byte offset of entry k's data in a bundle.
func entryOffset(b []byte, k int) int {
	off := 0
	for range k {
		off += 2 + int(binary.BigEndian.Uint16(b[off:]))
	}
	return off + 2
}

func TestVerifyClean(t *testing.T) {
	_, vkey := keys(t)
	rep, err := Verify(context.Background(), os.DirFS(baseLog(t)), VerifyOptions{VerifierKeys: []string{vkey}, CheckRecords: true})
	if err != nil {
		t.Fatalf("%v\n%v", err, rep)
	}
	if rep.Checkpoint.Size != 600 || rep.Root != rep.Checkpoint.Root {
		t.Fatalf("report %v", rep)
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	_, vkey := keys(t)
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, dir string)
		want   error  // errors.Is target
		kind   string // a problem of this kind must be reported
		index  int64  // … about this entry (-2: any)
	}{
		{"flip entry byte", func(t *testing.T, dir string) {
			modify(t, filepath.Join(dir, "tile/entries/001"), func(b []byte) []byte {
				b[entryOffset(b, 5)+10] ^= 1
				return b
			})
		}, ErrTampered, "entry", 261},
		{"flip partial bundle byte", func(t *testing.T, dir string) {
			modify(t, filepath.Join(dir, "tile/entries/002.p/88"), func(b []byte) []byte {
				b[len(b)-3] ^= 0x20
				return b
			})
		}, ErrTampered, "entry", 599},
		{"delete bundle", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "tile/entries/000"))
		}, ErrTampered, "missing", 0},
		{"delete partial bundle", func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "tile/entries/002.p"))
		}, ErrTampered, "missing", 512},
		{"reorder entries", func(t *testing.T, dir string) {
			modify(t, filepath.Join(dir, "tile/entries/001"), func(b []byte) []byte {
				ents, _ := parseBundle(b)
				ents[3], ents[4] = ents[4], ents[3]
				var out []byte
				for _, e := range ents {
					out = binary.BigEndian.AppendUint16(out, uint16(len(e)))
					out = append(out, e...)
				}
				return out
			})
		}, ErrTampered, "entry", 259},
		{"truncate bundle", func(t *testing.T, dir string) {
			modify(t, filepath.Join(dir, "tile/entries/001"), func(b []byte) []byte { return b[:len(b)/2] })
		}, ErrTampered, "missing", 256},
		{"append to full bundle", func(t *testing.T, dir string) {
			modify(t, filepath.Join(dir, "tile/entries/000"), func(b []byte) []byte { return append(b, 0, 1, 'x') })
		}, ErrTampered, "missing", 0},
		{"truncate tile", func(t *testing.T, dir string) {
			modify(t, filepath.Join(dir, "tile/0/001"), func(b []byte) []byte { return b[:100] })
		}, ErrTampered, "tile", 256},
		{"flip tile byte", func(t *testing.T, dir string) {
			modify(t, filepath.Join(dir, "tile/0/000"), func(b []byte) []byte {
				b[32*7] ^= 1
				return b
			})
		}, ErrTampered, "tile", 7},
		{"flip level-1 tile", func(t *testing.T, dir string) {
			modify(t, filepath.Join(dir, "tile/1/000.p/2"), func(b []byte) []byte {
				b[40] ^= 1
				return b
			})
		}, ErrTampered, "tile", 256},
		{"delete level-1 tile", func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "tile/1"))
		}, ErrTampered, "tile", -2},
		{"delete everything but the checkpoint", func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "tile"))
		}, ErrTampered, "missing", 0},
		{"rewrite entry and its tiles", func(t *testing.T, dir string) {
			// A forger without the key rewrites entry 3 and every hash
			// above it, but cannot re-sign the checkpoint.
			modify(t, filepath.Join(dir, "tile/entries/000"), func(b []byte) []byte {
				o := entryOffset(b, 3)
				b[o+20] ^= 1
				return b
			})
			ents, _, _ := readBundle(os.DirFS(dir), 0, 256)
			modify(t, filepath.Join(dir, "tile/0/000"), func(b []byte) []byte {
				h := recordHash(ents[3])
				copy(b[3*32:], h[:])
				return b
			})
		}, ErrTampered, "root", -1},
		{"delete checkpoint", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "checkpoint"))
		}, ErrCheckpoint, "", 0},
		{"edit checkpoint size", func(t *testing.T, dir string) {
			modify(t, filepath.Join(dir, "checkpoint"), func(b []byte) []byte {
				return bytes.Replace(b, []byte("\n600\n"), []byte("\n599\n"), 1)
			})
		}, ErrCheckpoint, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, baseLog(t))
			tc.tamper(t, dir)
			rep, err := Verify(context.Background(), os.DirFS(dir), VerifyOptions{VerifierKeys: []string{vkey}})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v\n%v", err, tc.want, rep)
			}
			t.Logf("%v", err)
			if tc.kind == "" {
				return
			}
			for _, p := range rep.Problems {
				if p.Kind == tc.kind && (tc.index == -2 || p.Index == tc.index) {
					if (p.Kind == "entry" || p.Index == 7) && (len(p.Expected) != 64 || len(p.Found) != 64) {
						t.Fatalf("entry problem without evidence: %v", p)
					}
					return
				}
			}
			t.Fatalf("no %q problem at %d in\n%v", tc.kind, tc.index, rep)
		})
	}
}

func TestVerifyHistory(t *testing.T) {
	ctx := context.Background()
	_, vkey := keys(t)
	base := baseLog(t)
	saved, err := os.ReadFile(filepath.Join(base, "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}

	// The log grew: consistent.
	grown := copyDir(t, base)
	l := openTest(t, grown, Options{NoIndex: true})
	appendN(t, l, 600, 100, 2)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(ctx, os.DirFS(grown), VerifyOptions{VerifierKeys: []string{vkey}, Saved: saved}); err != nil {
		t.Fatalf("grown log: %v\n%v", err, rep)
	}

	// History rewritten by the key holder: a new, validly signed log whose
	// first 600 entries differ.
	forged := t.TempDir()
	l = openTest(t, forged, Options{NoIndex: true})
	appendN(t, l, 1, 700, 2)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, os.DirFS(forged), VerifyOptions{VerifierKeys: []string{vkey}, Saved: saved})
	if !errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), "rewritten") {
		t.Fatalf("forged log: %v\n%v", err, rep)
	}

	// Rolled back: the grown log's checkpoint saved, the old log presented.
	savedGrown, _ := os.ReadFile(filepath.Join(grown, "checkpoint"))
	if _, err := Verify(ctx, os.DirFS(base), VerifyOptions{VerifierKeys: []string{vkey}, Saved: savedGrown}); !errors.Is(err, ErrTampered) {
		t.Fatalf("rolled-back log: %v", err)
	}

	// Signed by someone else.
	_, other, _ := GenerateKey(testOrigin)
	if _, err := Verify(ctx, os.DirFS(base), VerifyOptions{VerifierKeys: []string{other}}); !errors.Is(err, ErrCheckpoint) {
		t.Fatalf("foreign key: %v", err)
	}
}

func FuzzParseBundle(f *testing.F) {
	f.Add([]byte{0, 1, 'x', 0, 0})
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		ents, err := parseBundle(b)
		n := 0
		for _, e := range ents {
			n += 2 + len(e)
		}
		if err == nil && n != len(b) {
			t.Fatalf("parsed %d of %d bytes without error", n, len(b))
		}
	})
}

func recordHash(b []byte) [32]byte { return tlog.RecordHash(b) }
