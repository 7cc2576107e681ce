package cli

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/capture"
	"github.com/vouchml/vouch/audit/index"
	"github.com/vouchml/vouch/audit/sqlcapture"
	"github.com/vouchml/vouch/audit/sqllog"
	"github.com/vouchml/vouch/replay"
	"github.com/vouchml/vouch/server"
	"github.com/vouchml/vouch/stream"
)

var auditCommands = map[string]struct {
	summary string
	run     func(ctx context.Context, m *Main, args []string) error
}{
	"verify": {"check a log (DIR or URL) or an export file against its signed checkpoint", runAuditVerify},
	"show":   {"print a record by trace id with its inclusion proof", runAuditShow},
	"query":  {"list records by model, time, principal, status", runAuditQuery},
	"export": {"write records with proofs and the checkpoint to one file", runAuditExport},
	"index":  {"rebuild the SQLite index from the log (--rebuild)", runAuditIndex},
	"repair": {"open a log whose write-ahead log is damaged, setting the damage aside and naming what is lost", runAuditRepair},
	"shred":  {"erase a model's captured inputs by destroying its key", runAuditShred},
	"purge":  {"delete captured inputs whose retention has expired", runAuditPurge},
}

// runAudit dispatches `vouch audit SUBCOMMAND`.
func runAudit(ctx context.Context, m *Main, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		var b strings.Builder
		b.WriteString("Usage: vouch audit <command> [flags]\n\nThe audit log: one record per inference, Merkle tree, signed checkpoints.\nEvery read (show, query, export) leaves an access record in the log.\n\nCommands:\n\n")
		for _, n := range []string{"verify", "show", "query", "export", "index", "repair", "shred", "purge"} {
			fmt.Fprintf(&b, "\t%-8s %s\n", n, auditCommands[n].summary)
		}
		fmt.Fprint(m.Stderr, b.String())
		if len(args) == 0 {
			return fmt.Errorf("%w: give a command", ErrUsage)
		}
		return flag.ErrHelp
	}
	c, ok := auditCommands[args[0]]
	if !ok {
		return fmt.Errorf("%w: unknown audit command %q", ErrUsage, args[0])
	}
	return c.run(ctx, m, args[1:])
}

// verifierKeys reads --key: key strings or files holding them, comma
// separated.
func verifierKeys(spec string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(spec, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if b, err := os.ReadFile(s); err == nil {
			s = strings.TrimSpace(string(b))
		} else if !strings.Contains(s, "+") {
			return nil, fmt.Errorf("--key %q: %w", s, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func runAuditVerify(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("audit verify", "audit verify (--log DIR|URL [--checkpoint SAVED] | --export FILE) [--key PUB]", `
Checks a log in C2SP tlog-tiles layout, from a directory or a URL (a
server's /log/): the checkpoint's signature, every entry against the tiles,
every tile, the tree root against the checkpoint. With --checkpoint SAVED,
the log must extend the checkpoint saved there by an earlier run (a
rewritten history is caught); the new checkpoint is then saved in its place.
Tampering is reported with its evidence: index, expected and found hash.
With --export FILE, checks an export file offline instead.

Trust the key (--key), not the directory: DIR/log.pub is used only when no
--key is given, and says so.`)
	logArg := fs.String("log", "", "the log: a directory, or the URL of its tlog-tiles root (http://host:8080/log/)")
	data := fs.String("data", defaultDataDir(), "data directory; the log defaults to DATA/audit")
	saved := fs.String("checkpoint", "", "a checkpoint file saved by an earlier verify: check consistency, then update it")
	keySpec := fs.String("key", "", "the log's verifier key, or a file holding it (default: the log's log.pub)")
	export := fs.String("export", "", "verify an export file instead of a log")
	records := fs.Bool("records", true, "also check that every entry is a canonical record")
	var witnessKeys multiFlag
	fs.Var(&witnessKeys, "witness", "a witness's verifier key (or a file holding it) whose cosignature the checkpoint must carry; repeat")
	quorum := fs.Int("quorum", 0, "with --witness: how many witnesses must have cosigned (default: all)")
	tokenFile := fs.String("token-file", "", "with --log URL: a bearer token of role audit, which a server asks for the entry bundles (the records); checkpoint and tiles are public")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	keys, err := verifierKeys(*keySpec)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if *export != "" {
		if len(keys) == 0 {
			if keys, err = verifierKeys(filepath.Join(auditDir(*data), "log.pub")); err != nil {
				return fmt.Errorf("%w: give --key PUB, the log's verifier key", ErrUsage)
			}
			fmt.Fprintf(m.Stderr, "note: trusting %s (give --key to verify against a key you hold)\n", filepath.Join(auditDir(*data), "log.pub"))
		}
		f, err := os.Open(*export)
		if err != nil {
			return err
		}
		defer f.Close()
		cp, n, err := audit.VerifyExport(bufio.NewReader(f), nil, keys...)
		if err != nil {
			return fmt.Errorf("%s: %w", *export, err)
		}
		fmt.Fprintf(m.Stdout, "OK  %s: %d records proven against checkpoint %s size %d root %x\n", *export, n, cp.Origin, cp.Size, cp.Root[:])
		return nil
	}
	where := *logArg
	if where == "" {
		where = auditDir(*data)
	}
	var fsys iofs.FS
	if u, err := url.Parse(where); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		client, err := bearerClient(*tokenFile)
		if err != nil {
			return err
		}
		if fsys, err = audit.HTTPFS(ctx, where, client); err != nil {
			return err
		}
		if len(keys) == 0 {
			return fmt.Errorf("%w: verifying a remote log needs --key PUB, the log's verifier key", ErrUsage)
		}
	} else {
		fsys = os.DirFS(where)
		if len(keys) == 0 {
			if keys, err = verifierKeys(filepath.Join(where, "log.pub")); err != nil {
				return fmt.Errorf("%w: give --key PUB, the log's verifier key", ErrUsage)
			}
			fmt.Fprintf(m.Stderr, "note: trusting %s (give --key to verify against a key you hold)\n", filepath.Join(where, "log.pub"))
		}
	}
	vo := audit.VerifyOptions{VerifierKeys: keys, CheckRecords: *records, Quorum: *quorum}
	for _, w := range witnessKeys {
		k, err := verifierKeys(w)
		if err != nil {
			return fmt.Errorf("%w: --witness: %v", ErrUsage, err)
		}
		vo.Witnesses = append(vo.Witnesses, k...)
	}
	if *saved != "" {
		b, err := os.ReadFile(*saved)
		switch {
		case err == nil:
			vo.Saved = b
		case errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(m.Stderr, "note: %s does not exist yet; it will hold this checkpoint for the next run\n", *saved)
		default:
			return err
		}
	}
	if vo.Saved == nil && len(vo.Witnesses) == 0 {
		fmt.Fprintln(m.Stderr, "warning: no earlier checkpoint of this log is held (--checkpoint FILE): a history rewritten and signed again with the log's key would pass; keep one from run to run, or require witness cosignatures (--witness)")
	}
	start := time.Now()
	rep, err := audit.Verify(ctx, fsys, vo)
	if rep != nil && len(rep.Problems) > 0 {
		fmt.Fprint(m.Stdout, "TAMPERED\n"+rep.String())
	}
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	cp := rep.Checkpoint
	fmt.Fprintf(m.Stdout, "OK  %s: %d entries, root %x, checkpoint %s signed (%v)\n", where, cp.Size, cp.Root[:], cp.Origin, time.Since(start).Round(time.Millisecond))
	if rep.Saved != nil {
		fmt.Fprintf(m.Stdout, "    extends the saved checkpoint of %d entries\n", rep.Saved.Size)
	}
	if len(rep.Cosigned) > 0 {
		fmt.Fprintf(m.Stdout, "    cosigned by %s\n", strings.Join(rep.Cosigned, ", "))
	}
	if *saved != "" {
		out := cp.Note
		// The same checkpoint may have been saved with cosignatures the log
		// does not serve: keep them.
		if vo.Saved != nil {
			if merged, err := audit.MergeSignatures(cp.Note, vo.Saved); err == nil {
				out = merged
			}
		}
		if err := writeFileAtomic(*saved, out, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "    checkpoint saved to %s\n", *saved)
	}
	return nil
}

func runAuditShow(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("audit show", "audit show (TRACE | --index N) [--data DIR] [--url URL --token-file FILE] [--json]", `
Prints the record with trace id TRACE (or the one at log index N), its
index in the log, and checks its inclusion proof against the signed
checkpoint. Several records can share a trace id (a client that continues
its caller's traceparent): TRACE shows the first inference record and lists
the others; --index N shows any one of them. The read is recorded in the
log (an access record) before the record is shown.`)
	var af auditFlags
	af.register(fs)
	af.LogKey.register(fs)
	asJSON := fs.Bool("json", false, "print the evidence as JSON (record, index, proof, checkpoint)")
	keySpec := fs.String("key", "", "verifier key for a remote log (default DATA/audit/log.pub)")
	byIndex := fs.Int64("index", -1, "show the record at this log index instead of by trace id (local log)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if (len(pos) != 1) == (*byIndex < 0) {
		return fmt.Errorf("%w: give one trace id, or --index N", ErrUsage)
	}
	trace, target := "", fmt.Sprintf("index %d", *byIndex)
	if *byIndex < 0 {
		trace, target = pos[0], pos[0]
	}
	c, err := openAuditConn(ctx, af)
	if err != nil {
		return err
	}
	defer c.close()
	if *byIndex >= 0 && c.remote() {
		return fmt.Errorf("%w: --index reads the local log: give --data DIR (the server's audit API finds records by trace id)", ErrUsage)
	}
	note, err := c.recordAccess(ctx, "show", target)
	if err != nil {
		return err
	}
	var inc *audit.Inclusion
	var keys []string
	var others []uint64
	if *byIndex >= 0 {
		if inc, err = c.log.ShowIndex(ctx, uint64(*byIndex)); err != nil {
			return err
		}
		keys = c.log.VerifierKeys()
	} else if c.remote() {
		inc = &audit.Inclusion{}
		if err := c.do(ctx, "GET", "/v1/audit/records/"+url.PathEscape(trace), nil, inc); err != nil {
			return err
		}
		if keys, err = verifierKeys(*keySpec); err == nil && len(keys) == 0 {
			keys, err = verifierKeys(filepath.Join(auditDir(af.DataDir), "log.pub"))
		}
		if err != nil || len(keys) == 0 {
			return fmt.Errorf("%w: give --key PUB to check the server's proof", ErrUsage)
		}
	} else {
		if inc, err = c.showLocal(ctx, trace); err != nil {
			return err
		}
		keys = c.log.VerifierKeys()
		if rows, err := c.log.Lookup(ctx, trace); err == nil && len(rows) > 1 {
			for _, r := range rows {
				if r.Index != inc.Index {
					others = append(others, r.Index)
				}
			}
		}
	}
	rec, cp, err := inc.Verify(keys...)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetEscapeHTML(false)
		// No indentation: the record member is the entry byte for byte, and
		// its leaf hash is over those bytes.
		if err := enc.Encode(inc); err != nil {
			return err
		}
	} else {
		printRecord(m.Stdout, inc.Index, inc.LeafHash, rec)
		fmt.Fprintf(m.Stdout, "proof      %d hashes to root %x of checkpoint %s size %d: verified\n", len(inc.Proof), cp.Root[:], cp.Origin, cp.Size)
	}
	if len(others) > 0 {
		fmt.Fprintf(m.Stderr, "note: %d more records share trace id %s, at log indexes %v; show one with --index N\n", len(others), trace, others)
	}
	if note != "" {
		fmt.Fprintln(m.Stderr, note)
	}
	return nil
}

func printRecord(w io.Writer, idx uint64, leaf string, r *audit.Record) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	p("index", fmt.Sprint(idx))
	p("leaf hash", leaf)
	p("kind", r.Kind)
	p("trace id", r.TraceID)
	p("time", r.Time.UTC().Format(time.RFC3339Nano))
	p("principal", r.Principal)
	p("source", r.SourceAddr)
	if r.Model != "" {
		p("model", r.Model+"@"+r.ModelVersion)
	}
	p("bundle", r.BundleDigest)
	p("plan", r.PlanDigest)
	p("backend", r.Backend)
	p("device", r.Device)
	p("input", r.InputDigest)
	p("output", r.OutputDigest)
	if r.OutputLabel != "" {
		conf := ""
		if r.Confidence != nil {
			conf = fmt.Sprintf(" (%.4g)", *r.Confidence)
		}
		p("label", r.OutputLabel+conf)
	}
	if r.LatencyMicros != 0 {
		p("latency", (time.Duration(r.LatencyMicros) * time.Microsecond).String())
	}
	status := r.Status
	if r.Code != 0 {
		status += fmt.Sprintf(" (%d)", r.Code)
	}
	p("status", status)
	p("error", r.Error)
	if r.Access != nil {
		p("access", r.Access.Action+" "+r.Access.Target)
	}
	if r.Rows > 1 || len(r.Decisions) > 1 {
		p("rows", fmt.Sprintf("%d (%d decisions listed; digest %s)", r.Rows, len(r.Decisions), r.DecisionsDigest))
	}
	if x := r.Explanation; x != nil {
		how := x.Method
		if x.Estimate {
			how += " (an estimate)"
		}
		p("reasons by", how+", contributions "+x.Digest)
	}
	for i, d := range r.Decisions {
		if len(r.Decisions) > 1 || d.Label == "" {
			v := d.Label
			if d.Confidence != nil {
				v += fmt.Sprintf(" (%s)", strconv.FormatFloat(*d.Confidence, 'g', -1, 64))
			}
			p(fmt.Sprintf("row %d", i), strings.TrimSpace(v+fmt.Sprintf(" class %d", d.Target)))
		}
		for k, re := range d.Reasons {
			key := ""
			if k == 0 {
				key = "reasons"
				if len(r.Decisions) > 1 {
					key = fmt.Sprintf("row %d reasons", i)
				}
			}
			fmt.Fprintf(tw, "%s\t%d. %s\n", key, k+1, replay.ReasonText(re))
		}
	}
	tw.Flush()
}

// filterFlags are the selection flags of query and export.
type filterFlags struct {
	model, version, principal, status, kind, label, since, until string
	limit                                                        int
}

func (f *filterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.model, "model", "", "model name")
	fs.StringVar(&f.version, "version", "", "model version")
	fs.StringVar(&f.principal, "principal", "", "caller")
	fs.StringVar(&f.status, "status", "", "ok or error")
	fs.StringVar(&f.kind, "kind", "", "inference or access")
	fs.StringVar(&f.label, "label", "", "output label")
	fs.StringVar(&f.since, "since", "", "from this time (RFC 3339, or a duration ago: 24h)")
	fs.StringVar(&f.until, "until", "", "before this time (RFC 3339, or a duration ago)")
	fs.IntVar(&f.limit, "limit", 0, "at most this many records (0: all)")
}

func parseAuditTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: time %q: want RFC 3339 (2025-06-01T12:00:00Z), a date, or a duration ago (24h)", ErrUsage, s)
}

func (f *filterFlags) filter() (index.Filter, error) {
	out := index.Filter{Model: f.model, Version: f.version, Principal: f.principal, Status: f.status,
		Kind: f.kind, Label: f.label, Limit: f.limit}
	now := time.Now()
	var err error
	if out.Since, err = parseAuditTime(f.since, now); err != nil {
		return out, err
	}
	out.Until, err = parseAuditTime(f.until, now)
	return out, err
}

func runAuditQuery(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("audit query", "audit query [--model M] [--since T] [--until T] [--principal P] [--status S] [--format table|jsonl]", `
Lists the records that the filters select, in log order: a table, or the
records as JSON lines ({"index":N,"record":{…}}). The query is recorded in
the log (an access record) before anything is shown.`)
	var af auditFlags
	af.register(fs)
	af.LogKey.register(fs)
	var ff filterFlags
	ff.register(fs)
	format := fs.String("format", "table", "table or jsonl")
	scan := fs.Bool("scan", false, "read the log's entries instead of the index (slower; the index is checked for missing rows and for the rows it returns, not for a row changed to fall outside the filter)")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	if *format != "table" && *format != "jsonl" {
		return fmt.Errorf("%w: --format %q: want table or jsonl", ErrUsage, *format)
	}
	f, err := ff.filter()
	if err != nil {
		return err
	}
	c, err := openAuditConn(ctx, af)
	if err != nil {
		return err
	}
	defer c.close()
	note, err := c.recordAccess(ctx, "query", server.FilterQuery(f))
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(m.Stdout)
	defer bw.Flush()
	var tw *tabwriter.Writer
	if *format == "table" {
		tw = tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "INDEX\tTIME\tKIND\tMODEL\tPRINCIPAL\tSTATUS\tLABEL\tTRACE")
	}
	n := 0
	emit := func(line server.QueryLine) error {
		n++
		if tw == nil {
			b, _ := json.Marshal(line)
			bw.Write(b)
			return bw.WriteByte('\n')
		}
		r, err := audit.Parse(line.Record)
		if err != nil {
			return fmt.Errorf("entry %d: %w", line.Index, err)
		}
		model := r.Model
		if r.ModelVersion != "" {
			model += "@" + r.ModelVersion
		}
		if r.Access != nil {
			model = r.Access.Action + " " + r.Access.Target
		}
		status := r.Status
		if r.Code != 0 {
			status = fmt.Sprintf("%s %d", r.Status, r.Code)
		}
		_, err = fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", line.Index, r.Time.UTC().Format("2006-01-02T15:04:05.000Z"),
			r.Kind, model, r.Principal, status, r.OutputLabel, r.TraceID)
		return err
	}
	if c.remote() {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(c.do(ctx, "GET", "/v1/audit/records?"+server.FilterQuery(f), nil, pw)) }()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
		for sc.Scan() {
			var line server.QueryLine
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Record == nil {
				pr.Close()
				return fmt.Errorf("server answered %q", sc.Text())
			}
			if err := emit(line); err != nil {
				pr.Close()
				return err
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
	} else {
		find := c.log.Query
		if *scan {
			find = c.log.Scan
		}
		err = find(ctx, f, func(row index.Row) error {
			b, err := c.log.Entry(row.Index)
			if err != nil {
				return err
			}
			return emit(server.QueryLine{Index: row.Index, Record: b})
		})
		if err != nil {
			return err
		}
	}
	if tw != nil {
		tw.Flush()
		fmt.Fprintf(bw, "%d records\n", n)
	}
	if note != "" {
		fmt.Fprintln(m.Stderr, note)
	}
	return nil
}

func runAuditExport(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("audit export", "audit export --out FILE [filters]", `
Writes the records that the filters select, each with its inclusion proof,
and the signed checkpoint they are proven against, to one file that
vouch audit verify --export FILE --key PUB checks offline. The export is
recorded in the log (an access record) first.`)
	var af auditFlags
	af.register(fs)
	af.LogKey.register(fs)
	var ff filterFlags
	ff.register(fs)
	out := fs.String("out", "", "the export file (required, unless --to)")
	to := fs.String("to", "", "instead of a file, deliver the whole log (from this target's backfill cursor) to kafka://HOST:PORT/TOPIC, nats://HOST:PORT/SUBJECT or http(s)://URL (CloudEvents), as serve --export does live")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	if *to != "" {
		if *out != "" {
			return fmt.Errorf("%w: --to and --out exclude each other", ErrUsage)
		}
		c, err := openAuditConn(ctx, af)
		if err != nil {
			return err
		}
		_, err = c.recordAccess(ctx, "export", "to "+stream.Name(*to))
		c.close()
		if err != nil {
			return err
		}
		return m.backfill(ctx, auditDir(af.DataDir), *to)
	}
	if *out == "" {
		return fmt.Errorf("%w: give --out FILE (or --to TARGET)", ErrUsage)
	}
	f, err := ff.filter()
	if err != nil {
		return err
	}
	c, err := openAuditConn(ctx, af)
	if err != nil {
		return err
	}
	defer c.close()
	note, err := c.recordAccess(ctx, "export", server.FilterQuery(f))
	if err != nil {
		return err
	}
	if c.writable {
		// The access record itself (and anything before it) under a checkpoint.
		if err := c.log.Sync(ctx); err != nil {
			return err
		}
	}
	file, err := os.OpenFile(*out, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	n := 0
	if c.remote() {
		err = c.do(ctx, "GET", "/v1/audit/export?"+server.FilterQuery(f), nil, file)
	} else {
		n, err = c.log.Export(ctx, file, f)
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if c.remote() {
		if k, kerr := verifierKeys(filepath.Join(auditDir(af.DataDir), "log.pub")); kerr == nil {
			r, _ := os.Open(*out)
			_, n, err = audit.VerifyExport(r, nil, k...)
			r.Close()
			if err != nil {
				return fmt.Errorf("the server's export does not verify: %w", err)
			}
		}
	}
	fmt.Fprintf(m.Stdout, "wrote %s: %d records with proofs\n", *out, n)
	if note != "" {
		fmt.Fprintln(m.Stderr, note)
	}
	return nil
}

func runAuditIndex(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("audit index", "audit index --rebuild [--data DIR]", `
Drops the SQLite index and rebuilds it from the log's entries (the index is
a cache; the log is the truth). The log must not be held by a server.`)
	data := fs.String("data", defaultDataDir(), "data directory (the log is DATA/audit)")
	rebuild := fs.Bool("rebuild", false, "rebuild the index from the log")
	var kf logKeyFlags
	kf.register(fs)
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	if !*rebuild {
		return fmt.Errorf("%w: give --rebuild", ErrUsage)
	}
	dir := auditDir(*data)
	skey, err := loadLogKey(m.Stderr, *data, kf, "")
	if err != nil {
		return err
	}
	l, err := audit.Open(ctx, dir, audit.Options{SignerKey: skey})
	if errors.Is(err, audit.ErrLocked) {
		return fmt.Errorf("%w: stop the server first", err)
	}
	if err != nil {
		return err
	}
	start := time.Now()
	err = l.RebuildIndex(ctx)
	cerr := l.Close(ctx)
	if err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	cp, _ := l.Checkpoint()
	size := uint64(0)
	if cp != nil {
		size = cp.Size
	}
	fmt.Fprintf(m.Stdout, "index rebuilt: %d entries (%v)\n", size, time.Since(start).Round(time.Millisecond))
	return nil
}

func runAuditRepair(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("audit repair", "audit repair [--data DIR] [--log-key FILE]", `
A server refuses to start on a log whose write-ahead log is damaged (a
corrupted frame with acknowledged records after it, a file cut short):
records acknowledged to clients would be lost without a word. This command
opens the log anyway: the records before the damage go into the tree, the
damaged files are kept aside as DATA/audit/wal/*.damaged-<time>, and every
loss is printed. Run it only after the damage has been looked into (and
the files saved elsewhere); the log must not be held by a server.`)
	data := fs.String("data", defaultDataDir(), "data directory (the log is DATA/audit)")
	var kf logKeyFlags
	kf.register(fs)
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	skey, err := loadLogKey(m.Stderr, *data, kf, "")
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(m.Stderr, nil))
	l, err := audit.Open(ctx, auditDir(*data), audit.Options{SignerKey: skey, RepairWAL: true, Logger: logger})
	if err != nil {
		return err
	}
	if err := l.Close(ctx); err != nil {
		return err
	}
	cp, err := l.Checkpoint()
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "the log opens: %d entries under checkpoint %s (what was set aside, if anything, is logged above)\n", cp.Size, cp.Origin)
	return nil
}

func runAuditShred(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("audit shred", "audit shred MODEL [--data DIR] [--url URL --token-file FILE] | --audit-db DSN --log-key FILE", `
Erases every captured input of MODEL by destroying its encryption key
(crypto-shredding) and deleting its blobs. Copies elsewhere (backups) stay
unreadable. The audit log, which holds only digests, still verifies. The
erasure is itself recorded in the log (an access record, action "shred").

With --audit-db DSN and --log-key FILE it acts on the store that replicas
share in the database (vouch serve --audit-db): the erasure holds on every
replica at once, since each reads the keys from the database.`)
	var af auditFlags
	af.register(fs)
	af.LogKey.register(fs)
	dsn := fs.String("audit-db", "", "the shared log's database (as vouch serve --audit-db): shred its capture store")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: give one model name", ErrUsage)
	}
	if *dsn != "" {
		return m.sharedShred(ctx, *dsn, af, pos[0])
	}
	store, err := capture.Open(filepath.Join(af.DataDir, "capture"))
	if err != nil {
		return err
	}
	c, err := openAuditConn(ctx, af)
	if err != nil {
		return err
	}
	defer c.close()
	if c.remote() {
		return fmt.Errorf("the capture store is local: run shred on the machine that holds %s", filepath.Join(af.DataDir, "capture"))
	}
	note, err := c.recordAccess(ctx, "shred", pos[0])
	if err != nil {
		return err
	}
	n, err := store.Shred(pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "shredded %d key(s) of %s: its captured inputs are unreadable\n", n, pos[0])
	fmt.Fprintln(m.Stderr, note)
	return nil
}

// sharedShred shreds a model's captured inputs in the replicas' shared
// store, after appending the access record to the shared log (the log
// key signs it, as a replica's would).
func (m *Main) sharedShred(ctx context.Context, dsn string, af auditFlags, model string) error {
	if af.LogKey.Path == "" {
		return fmt.Errorf("%w: --audit-db needs --log-key FILE (the shared log's signing key) to record the erasure", ErrUsage)
	}
	skey, err := audit.LoadKeyFile(af.LogKey.Path, "", "")
	if err != nil {
		return err
	}
	signer, err := audit.NewSigner(skey)
	if err != nil {
		return err
	}
	l, err := sqllog.Open(ctx, sqllog.Options{DSN: dsn, Signer: signer})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l.Close(cctx)
	}()
	store, err := sqlcapture.Open(ctx, l.DB(), sqlcapture.Options{})
	if err != nil {
		return err
	}
	rec := &audit.Record{Kind: audit.KindAccess, TraceID: newTraceID(), Time: time.Now().UTC(),
		Principal: defaultPrincipal(), Access: &audit.Access{Action: "shred", Target: model}}
	idx, _, err := l.Append(ctx, rec)
	if err != nil {
		return fmt.Errorf("recording the erasure in the shared log: %w", err)
	}
	n, err := store.Shred(model)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "shredded %d key(s) of %s in the shared store: its captured inputs are unreadable on every replica\n", n, model)
	fmt.Fprintf(m.Stderr, "access recorded: shared log index %d (shred %s by %s)\n", idx, model, rec.Principal)
	return nil
}

func runAuditPurge(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("audit purge", "audit purge [--data DIR | --audit-db DSN]", `
Deletes captured inputs whose retention (vouch serve --retain) has expired,
and any left under a shredded key. A running server also purges daily.
--audit-db DSN purges the store replicas share in the database (each
input expires after the --retain of the replica that captured it).`)
	data := fs.String("data", defaultDataDir(), "data directory (captures are DATA/capture)")
	dsn := fs.String("audit-db", "", "the shared log's database: purge its capture store")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	purge := func() (int, error) {
		store, err := capture.Open(filepath.Join(*data, "capture"))
		if err != nil {
			return 0, err
		}
		return store.Purge()
	}
	if *dsn != "" {
		purge = func() (int, error) {
			db, err := sql.Open("mysql", *dsn) // the driver sqllog registers
			if err != nil {
				return 0, err
			}
			defer db.Close()
			store, err := sqlcapture.Open(ctx, db, sqlcapture.Options{})
			if err != nil {
				return 0, err
			}
			return store.Purge()
		}
	}
	n, err := purge()
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "purged %d expired inputs\n", n)
	return nil
}
