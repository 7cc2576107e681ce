package witness_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	_ "modernc.org/sqlite"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/witness"
)

const origin = "vouch.test/witnessed"

func need(t testing.TB, err error, what string) {
	t.Helper()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s: %v", what, err)
	if os.Getenv("VOUCH_CI") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// litewitness builds filippo.io/torchwood v0.6.1's litewitness once, from
// the Go module proxy, in a module of its own.
var litewitness = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "litewitness")
	if err != nil {
		return "", err
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod")
	for _, args := range [][]string{
		{"mod", "init", "lwbuild"},
		{"get", "filippo.io/torchwood/cmd/litewitness@v0.6.1"},
		{"build", "-o", "litewitness", "filippo.io/torchwood/cmd/litewitness"},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return filepath.Join(dir, "litewitness"), nil
})

// startWitness runs a litewitness named name that knows the log of
// origin with verifier key logKey, and returns it as URL=VERIFIERKEY.
func startWitness(t testing.TB, name, logKey string) witness.Witness {
	t.Helper()
	bin, err := litewitness()
	need(t, err, "building litewitness")
	for _, p := range []string{"ssh-agent", "ssh-add", "ssh-keygen"} {
		_, err := exec.LookPath(p)
		need(t, err, "litewitness keeps its key in an ssh-agent (Debian openssh-client)")
	}
	dir := t.TempDir()
	key, sock := filepath.Join(dir, "key"), filepath.Join(dir, "agent.sock")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	agent := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	add := exec.Command("ssh-add", key)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v %s", err, out)
	}
	out, err := exec.Command("ssh-keygen", "-lf", key+".pub").Output()
	if err != nil {
		t.Fatal(err)
	}
	fp := strings.Fields(string(out))[1]

	// The witness's database, as witnessctl add-log and add-key make it.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	emptyRoot := "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=" // SHA-256 of nothing
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS log (origin TEXT PRIMARY KEY, tree_size INTEGER NOT NULL, tree_hash TEXT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS key (origin TEXT NOT NULL, key TEXT NOT NULL, FOREIGN KEY(origin) REFERENCES log(origin))`,
		fmt.Sprintf(`INSERT INTO log (origin, tree_size, tree_hash) VALUES ('%s', 0, '%s')`, origin, emptyRoot),
		fmt.Sprintf(`INSERT INTO key (origin, key) VALUES ('%s', '%s')`, origin, logKey),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "-db", filepath.Join(dir, "w.db"), "-name", name, "-key", fp, "-ssh-agent", sock, "-listen", addr)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	vkeyRE := regexp.MustCompile(`vkey=(\S+)`)
	sc := bufio.NewScanner(stderr)
	var vkey string
	for sc.Scan() {
		if m := vkeyRE.FindStringSubmatch(sc.Text()); m != nil {
			vkey = strings.Trim(m[1], `"`)
		}
		if strings.Contains(sc.Text(), "listening") {
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if vkey == "" {
		t.Fatal("litewitness printed no verifier key")
	}
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	w, err := witness.Parse("http://" + addr + "=" + vkey)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func record(i int) *audit.Record {
	return &audit.Record{Kind: audit.KindInference, TraceID: fmt.Sprintf("%032x", i+1), Time: time.Unix(1700000000+int64(i), 0).UTC(),
		Principal: "app", Model: "m", ModelVersion: "1", Status: audit.StatusOK, Code: 200}
}

func fill(t *testing.T, l *audit.Log, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := from; i < from+n; i++ {
		if _, _, err := l.Append(ctx, record(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// The log's checkpoints are published cosigned by a real litewitness;
// verify requires the cosignature; a log with another history under the
// same key and origin is refused by the witness, loudly, and does not
// verify with the witness required.
func TestWitnessCosigningAndFork(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs litewitness")
	}
	ctx := context.Background()
	skey, vkey, err := audit.GenerateKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	w := startWitness(t, "witness.test/w1", vkey)
	spec := w.URL + "=" + w.Key

	dir := t.TempDir()
	l, err := audit.Open(ctx, dir, audit.Options{SignerKey: skey, CheckpointInterval: 100 * time.Millisecond, NoIndex: true, Witnesses: []string{spec}})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 0, 10)
	fill(t, l, 10, 300) // the witness now checks a consistency proof 10 → 310
	cp, err := l.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cp.Note), "— witness.test/w1 ") {
		t.Fatalf("published checkpoint without the cosignature:\n%s", cp.Note)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(ctx, os.DirFS(dir), audit.VerifyOptions{VerifierKeys: []string{vkey}, Witnesses: []string{w.Key}, Quorum: 1})
	if err != nil || len(rep.Cosigned) != 1 {
		t.Fatalf("verify with the witness required: %v %v", err, rep)
	}

	// Another history: same key, same origin, different entries.
	fork := t.TempDir()
	lf, err := audit.Open(ctx, fork, audit.Options{SignerKey: skey, CheckpointInterval: 100 * time.Millisecond, NoIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close(ctx)
	fill(t, lf, 5000, 400)
	fcp, err := lf.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	c := &witness.Cosigner{Witnesses: []witness.Witness{w}}
	_, errs := c.Cosign(ctx, fcp.Note, fcp.Size, func(old uint64) (tlog.TreeProof, error) {
		p, _, err := lf.ConsistencyProof(old)
		return p, err
	})
	if !errors.Is(errs[0], witness.ErrRefused) || !strings.Contains(errs[0].Error(), "422") {
		t.Fatalf("the witness cosigned (or refused for another reason) a forked history: %v", errs[0])
	}
	if _, err := audit.Verify(ctx, os.DirFS(fork), audit.VerifyOptions{VerifierKeys: []string{vkey}, Witnesses: []string{w.Key}}); !errors.Is(err, audit.ErrCheckpoint) ||
		!strings.Contains(err.Error(), "0 of the 1 witness cosignatures") {
		t.Fatalf("verify of the forked log with the witness required: %v", err)
	}
	// Without the witness the fork verifies: that is what witnesses are for.
	if _, err := audit.Verify(ctx, os.DirFS(fork), audit.VerifyOptions{VerifierKeys: []string{vkey}}); err != nil {
		t.Fatalf("the forked log is well formed: %v", err)
	}
}

// A cosignature that does not verify is refused, not ignored.
func TestCheckQuorumBadCosignature(t *testing.T) {
	skey, _, _ := audit.GenerateKey(origin)
	s, _ := note.NewSigner(skey)
	msg, _ := note.Sign(&note.Note{Text: origin + "\n1\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n"}, s)
	wkey := "witness.test/w2+" + "00000000" + "+" + base64.StdEncoding.EncodeToString(append([]byte{4}, make([]byte, 32)...))
	if _, err := witness.NewVerifier(wkey); err == nil {
		t.Fatal("a key id that does not match the key was accepted")
	}
	if _, err := witness.CheckQuorum(msg, nil, 1); err == nil {
		t.Fatal("quorum of 1 out of no witnesses")
	}
}

// A verifier key whose base64 holds '+' (litewitness printed one).
func TestVerifierKeyWithPlus(t *testing.T) {
	for i := 0; i < 200; i++ {
		pub := make([]byte, 32)
		rand.Read(pub)
		k := append([]byte{4}, pub...)
		name := "witness.test/p"
		vkey := fmt.Sprintf("%s+%08x+%s", name, keyIDForTest(name, pub), base64.StdEncoding.EncodeToString(k))
		if !strings.Contains(vkey[len(name)+10:], "+") {
			continue
		}
		if _, err := witness.NewVerifier(vkey); err != nil {
			t.Fatalf("%s: %v", vkey, err)
		}
		return
	}
	t.Fatal("no key with '+' made")
}

func keyIDForTest(name string, pub []byte) uint32 {
	h := sha256.Sum256(append([]byte(name+"\n\x04"), pub...))
	return binary.BigEndian.Uint32(h[:4])
}
