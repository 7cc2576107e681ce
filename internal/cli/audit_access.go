package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/capture"
	"github.com/vouchml/vouch/server"
)

// The access trail, from the command line.
//
// Every read of audit data (show, query, export, replay) leaves an access
// record in the log before the data is shown. Only the process that holds
// the log's write lock can append, so the record goes through whoever
// holds it:
//
//   - no server runs (the log is not locked): the command opens the log
//     writable, appends the access record itself (durably), and reads;
//   - a server holds the log: the command asks it to append the record
//     (POST /v1/audit/access with --url and a token of role audit; the
//     principal is the token's), then reads the files read-only;
//   - no local log, only --url: the command reads through the server's
//     audit API, which appends the record itself.
//
// A read that cannot be recorded is refused. Verification (vouch audit
// verify) reads the public log, which anyone may fetch from /log/, and is
// not recorded.

// auditConn is an open way to the audit data: a local log, a server, or
// both (a local log held by a server, read-only).
type auditConn struct {
	log      *audit.Log // nil: remote only
	writable bool
	url      string
	token    string
	who      string // principal for records appended locally
}

type auditFlags struct {
	DataDir   string
	URL       string
	Token     string
	TokenFile string
	LogKey    logKeyFlags // registered by the audit commands (replay's --log-key is a verifier key)
}

type flagRegistrar interface {
	StringVar(p *string, name, value, usage string)
	BoolVar(p *bool, name string, value bool, usage string)
}

func (f *auditFlags) register(fs flagRegistrar) {
	fs.StringVar(&f.DataDir, "data", defaultDataDir(), "vouch's data directory (the log is DATA/audit)")
	fs.StringVar(&f.URL, "url", "", "a server holding the log (records the access, or serves the data when there is no local log)")
	fs.StringVar(&f.Token, "token", "", "bearer token of role audit (prefer --token-file)")
	fs.StringVar(&f.TokenFile, "token-file", "", "file holding the bearer token")
}

func auditDir(data string) string { return filepath.Join(data, "audit") }

// logKeyFlags say where the log's checkpoint signing key is.
type logKeyFlags struct {
	Path        string // default DATA/keys/audit-log.key
	AllowLegacy bool   // use DATA/audit/log.key where it is
}

func (f *logKeyFlags) register(fs flagRegistrar) {
	fs.StringVar(&f.Path, "log-key", "", "the audit log's checkpoint signing key file, mode 0600, outside the log directory (default DATA/keys/audit-log.key, made on first use)")
	fs.BoolVar(&f.AllowLegacy, "allow-legacy-log-key", false, "use a signing key kept inside the log directory (DATA/audit/log.key, as older versions made it), with a warning")
}

func defaultLogKey(data string) string { return filepath.Join(data, "keys", "audit-log.key") }

// loadLogKey returns the log's signer key. A new data directory gets its
// key at --log-key (default DATA/keys/audit-log.key), outside the log
// directory. A data directory made by an older vouch keeps the key in
// DATA/audit/log.key, where whoever can write the log could also re-sign
// a rewritten history: that key is refused, with the command that moves
// it, unless --allow-legacy-log-key says to use it. origin "" loads only.
func loadLogKey(stderr io.Writer, data string, f logKeyFlags, origin string) (string, error) {
	dir := auditDir(data)
	legacy := filepath.Join(dir, audit.KeyFile)
	path := f.Path
	if path == "" {
		path = defaultLogKey(data)
	}
	if _, err := os.Stat(legacy); err == nil {
		if f.AllowLegacy {
			fmt.Fprintf(stderr, "WARNING: the audit log's signing key is %s, inside the log directory: whoever can write the log can rewrite and re-sign its history. Move it (mkdir -m 700 -p %s && mv %s %s) and drop --allow-legacy-log-key.\n",
				legacy, filepath.Dir(defaultLogKey(data)), legacy, defaultLogKey(data))
			return audit.LoadOrCreateKey(dir, origin)
		}
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("%w: the audit log's signing key is %s, inside the log directory, where whoever can write the log can rewrite and re-sign its history; move it with\n\tmkdir -m 700 -p %s && mv %s %s\n(or give --log-key FILE, or --allow-legacy-log-key to use it where it is)",
				audit.ErrKeyPlacement, legacy, filepath.Dir(path), legacy, path)
		}
		fmt.Fprintf(stderr, "WARNING: %s is still in the log directory; %s is used. Remove the old copy.\n", legacy, path)
	}
	return audit.LoadKeyFile(path, origin, dir)
}

// openAuditConn opens the audit data for a read.
func openAuditConn(ctx context.Context, f auditFlags) (*auditConn, error) {
	tok, err := readToken(f.Token, f.TokenFile)
	if err != nil {
		return nil, err
	}
	c := &auditConn{url: strings.TrimRight(f.URL, "/"), token: tok, who: "local:" + defaultPrincipal()}
	dir := auditDir(f.DataDir)
	if _, err := os.Stat(filepath.Join(dir, "checkpoint")); err != nil {
		if c.url != "" {
			return c, nil
		}
		return nil, fmt.Errorf("no audit log in %s (give --data DIR, or --url of a server)", dir)
	}
	skey, kerr := loadLogKey(io.Discard, f.DataDir, f.LogKey, "")
	if kerr == nil {
		c.log, err = audit.Open(ctx, dir, audit.Options{SignerKey: skey})
		if err == nil {
			c.writable = true
			return c, nil
		}
		if !errors.Is(err, audit.ErrLocked) {
			return nil, err
		}
	}
	if c.url == "" {
		if kerr != nil {
			return nil, fmt.Errorf("this read cannot be recorded: %w; give --url of the server that holds the log", kerr)
		}
		return nil, fmt.Errorf("the log in %s is held by a running server: give --url (and --token-file, role audit) so that the server records this read", dir)
	}
	c.log, err = audit.Open(ctx, dir, audit.Options{})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *auditConn) close() error {
	if c.log == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.log.Close(ctx)
}

// remote reports whether reads go through the server's API (which records
// them itself).
func (c *auditConn) remote() bool { return c.log == nil }

// recordAccess appends the access record of a read about to happen, unless
// the server's API will record it (remote reads). It returns a line saying
// where the record went.
func (c *auditConn) recordAccess(ctx context.Context, action, target string) (string, error) {
	switch {
	case c.remote():
		return "", nil
	case c.writable:
		rec := &audit.Record{Kind: audit.KindAccess, TraceID: newTraceID(), Time: time.Now().UTC(),
			Principal: c.who, Access: &audit.Access{Action: action, Target: target}}
		idx, _, err := c.log.Append(ctx, rec)
		if err != nil {
			return "", fmt.Errorf("recording this read in the audit log: %w", err)
		}
		return fmt.Sprintf("access recorded: log index %d (%s %s by %s)", idx, action, target, c.who), nil
	}
	var resp server.AccessResponse
	body, _ := json.Marshal(server.AccessRequest{Action: action, Target: target})
	if err := c.do(ctx, "POST", "/v1/audit/access", bytes.NewReader(body), &resp); err != nil {
		return "", fmt.Errorf("recording this read through %s: %w", c.url, err)
	}
	return fmt.Sprintf("access recorded by %s: log index %d", c.url, resp.LogIndex), nil
}

// do calls the server's audit API and decodes a JSON answer into out (or
// copies the body to out when it is an io.Writer).
func (c *auditConn) do(ctx context.Context, method, path string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, body)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s: %s", resp.Status, e.Error)
		}
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	if w, ok := out.(io.Writer); ok {
		_, err = io.Copy(w, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// showLocal finds a record in the local log. Read-only, beside a server,
// the newest records reach the index and a checkpoint a moment after they
// were answered (tessera's batching and checkpoint interval), so it waits
// a little for them.
func (c *auditConn) showLocal(ctx context.Context, trace string) (*audit.Inclusion, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		inc, err := c.log.Show(ctx, trace)
		if err == nil || c.writable || !errors.Is(err, audit.ErrNotFound) || time.Now().After(deadline) {
			return inc, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func newTraceID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// checkAuditFlags checks serve's audit flags before anything is loaded.
func checkAuditFlags(o ServeOptions) error {
	if o.AuditFailure != "closed" && o.AuditFailure != "open" && o.AuditFailure != "" {
		return fmt.Errorf("%w: --audit-failure %q: want closed or open", ErrUsage, o.AuditFailure)
	}
	if _, err := audit.ParseDurability(o.AuditDurability); err != nil {
		return fmt.Errorf("%w: --audit-durability: %v", ErrUsage, err)
	}
	switch o.Audit {
	case "on", "off", "true", "false", "":
	default:
		return fmt.Errorf("%w: --audit %q: want on or off", ErrUsage, o.Audit)
	}
	if o.Audit == "off" && o.CaptureInputs {
		return fmt.Errorf("%w: --capture-inputs needs the audit log (drop --audit=off)", ErrUsage)
	}
	if _, err := capture.ParseRetain(o.Retain); err != nil {
		return fmt.Errorf("%w: --retain: %v", ErrUsage, err)
	}
	return nil
}

// serveAudit sets up the server's audit hook from the flags and returns
// what closes it once the server has drained.
func (m *Main) serveAudit(ctx context.Context, o ServeOptions, so *server.Options) (func(), error) {
	nop := func() {}
	failOpen := false
	switch o.AuditFailure {
	case "", "closed":
	case "open":
		failOpen = true
	default:
		return nil, fmt.Errorf("%w: --audit-failure %q: want closed or open", ErrUsage, o.AuditFailure)
	}
	so.AuditFailOpen = failOpen
	if o.AuditLog != "" {
		fa, err := server.OpenFileAppender(o.AuditLog, o.AuditFsync)
		if err != nil {
			return nil, err
		}
		so.Appender = fa
		fmt.Fprintf(m.Stderr, "audit   %s (JSON lines, no proofs)\n", o.AuditLog)
		return func() { fa.Close() }, nil
	}
	switch o.Audit {
	case "off", "false":
		if o.CaptureInputs {
			return nil, fmt.Errorf("%w: --capture-inputs needs the audit log (drop --audit=off)", ErrUsage)
		}
		fmt.Fprintln(m.Stderr, "audit   off: requests leave no audit record")
		return nop, nil
	case "":
		if o.DataDir == "" {
			return nop, nil
		}
	case "on", "true":
	default:
		return nil, fmt.Errorf("%w: --audit %q: want on or off", ErrUsage, o.Audit)
	}
	if o.DataDir == "" {
		return nil, fmt.Errorf("%w: the audit log lives in the data directory: give --data DIR", ErrUsage)
	}
	dur, err := audit.ParseDurability(o.AuditDurability)
	if err != nil {
		return nil, fmt.Errorf("%w: --audit-durability: %v", ErrUsage, err)
	}
	origin := o.AuditOrigin
	if origin == "" {
		origin = "vouch.local/audit"
	}
	dir := auditDir(o.DataDir)
	skey, err := loadLogKey(m.Stderr, o.DataDir, logKeyFlags{Path: o.LogKey, AllowLegacy: o.AllowLegacyLogKey}, origin)
	if err != nil {
		return nil, err
	}
	var logger = so.Logger
	l, err := audit.Open(ctx, dir, audit.Options{SignerKey: skey, Durability: dur, Logger: logger,
		Witnesses: o.Witnesses, WitnessQuorum: o.WitnessQuorum})
	if err != nil {
		return nil, err
	}
	so.Appender = l
	so.Audit = l
	fmt.Fprintf(m.Stderr, "audit   %s (origin %s, %s, fail %s; verifier key %s)\n", dir, origin, dur, map[bool]string{false: "closed", true: "open"}[failOpen], filepath.Join(dir, "log.pub"))
	closeLog := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := l.Close(cctx); err != nil {
			fmt.Fprintf(m.Stderr, "audit log close: %v\n", err)
		}
	}
	if !o.CaptureInputs {
		return closeLog, nil
	}
	retain, err := capture.ParseRetain(o.Retain)
	if err != nil {
		closeLog()
		return nil, fmt.Errorf("%w: --retain: %v", ErrUsage, err)
	}
	store, err := capture.OpenOptions(filepath.Join(o.DataDir, "capture"), capture.Options{Retain: retain})
	if err != nil {
		closeLog()
		return nil, err
	}
	so.Capture = store
	stopPurge := m.purgeDaily(store.Purge)
	fmt.Fprintf(m.Stderr, "capture %s (AES-256-GCM, key per model, retain %s)\n", filepath.Join(o.DataDir, "capture"), retainText(retain))
	return func() { stopPurge(); closeLog() }, nil
}

func retainText(d time.Duration) string {
	if d == 0 {
		return "forever"
	}
	return d.String()
}
