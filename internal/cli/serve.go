package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/explain"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/registry"
	"github.com/vouchml/vouch/server"
	"github.com/vouchml/vouch/tracing"
)

// ServeOptions are the settings of `vouch serve`.
type ServeOptions struct {
	Plans           []string // FILE[,NAME[@VERSION]]
	Bundles         []string // signed bundle files
	Models          []string // NAME@REF in the registry
	Registry        string   // a registry directory (default DATA/registry); alone, serves every model
	Device          string   // --device: where the plans run (device.go)
	Keys            string   // trusted public keys
	DataDir         string
	Labels          []string // MODEL=FILE, one label a line
	Listen          string
	GRPC            string
	Credentials     string
	TLSCert, TLSKey string
	ClientCA        string
	RequireCert     bool
	AuditLog        string // JSON lines file instead of the transparency log
	AuditFsync      bool
	Audit           string // "on" (the transparency log under DataDir/audit) or "off"
	AuditOrigin     string
	AuditDurability string // durable or async
	AuditFailure    string // closed or open

	// the audit log's signing key and witnesses (internal/cli/audit_access.go)
	LogKey            string   // signing key file (default DATA/keys/audit-log.key)
	AllowLegacyLogKey bool     // use DATA/audit/log.key where older versions made it
	Witnesses         []string // URL=VERIFIERKEY: witnesses that cosign each checkpoint
	WitnessQuorum     int      // cosignatures needed to publish (default: all)

	CaptureInputs   bool
	Retain          string // capture retention: 7y, 30d, 36h; "" forever
	Workers         int
	Queue           int
	MaxBatch        int
	MaxDelay        time.Duration
	MaxBody         int64
	AccessLog       string
	ShutdownTimeout time.Duration
	Limits          serveLimits   // request sizes, budget, timeouts, connections, anonymous roles
	Exports         []string      // audit stream targets: kafka://, nats://, http(s)://
	LogFormat       string        // text or json: the server's log (alarms, errors)
	DrainDelay      time.Duration // readiness false this long before the listeners close
	AuditDB         string        // the shared log of several replicas, in MariaDB/MySQL (DSN)
	OTLPEndpoint    string        // OpenTelemetry collector (OTLP/gRPC) for request spans
	OTLPInsecure    bool
	Console         string   // audit console: on, off, auto (on when some principal has the audit role)
	ConsoleKey      string   // private key that signs the console's reports (default DATA/console/report.key)
	Features        []string // MODEL=FILE: input feature names, one a line, for the console

	ready func(httpAddr, grpcAddr string) // tests: called once listening
}

func runServe(ctx context.Context, m *Main, args []string) error {
	o := ServeOptions{}
	fs := m.newFlagSet("serve", "serve (--bundle FILE | --model NAME@REF | --plan FILE) ... --key PUB [--listen ADDR] [--grpc ADDR] [flags]", `
Serves engine plans (from signed bundles, verified before they load:
signature, digests, plan format, CPU features, vouch version) over the Open Inference Protocol (KServe v2): HTTP/JSON
with the binary tensor extension on --listen, gRPC on --grpc, Prometheus
metrics on --listen at /metrics. SIGINT or SIGTERM drains requests in
flight, then exits.

Audit: every inference request, served or refused, leaves one record in the
transparency log under DATA/audit (C2SP tlog-tiles, checkpoints signed with
--log-key, default DATA/keys/audit-log.key, made on first use; auditors get
DATA/audit/log.pub; --witness has them cosigned).
--audit-durability=durable answers only once the record is on disk; async
queues it (bounded). When the log cannot take records, --audit-failure=closed
answers 503; open serves, counts vouch_audit_failures_total and raises
vouch_audit_alarm. The audit API (role audit) is under /v1/audit, every read
itself recorded; the log's checkpoint and tiles are public under /log/.
The audit console (--console, on by default when a principal has the audit
role) serves web pages under /console/ to the audit and admin roles: search,
decisions with their inputs and proofs, replay, log, models, export.
--audit-log FILE keeps plain JSON lines instead; --audit=off keeps nothing.
--capture-inputs keeps every served input, AES-256-GCM encrypted with a key
per model, under DATA/capture (vouch audit shred MODEL erases a model's;
--retain bounds how long, vouch audit purge deletes the expired).

Credentials (--credentials) turn on bearer-token and client-certificate
auth; see the server package for the file format. Without them every
caller is "anonymous" with the roles of --anonymous-roles (default infer:
no audit reads, no repository changes), and binding a non-loopback address
is warned about. Listen on loopback unless TLS and credentials are
configured. Addresses are bound before anything is written under DATA.

Limits: --max-body/--max-json/--max-grpc-message bound request sizes per
protocol; --max-request-tensors is one request's memory budget, checked
from the shapes it declares before allocating (413); --read-header-timeout,
--read-timeout and --idle-timeout cut slow clients; --max-conns and
--max-conns-per-ip bound connections; --request-timeout answers 504 and
records the request when the engine has not answered.

Example:
  vouch serve --plan bc.plan,breast_cancer_mlp --labels breast_cancer_mlp=labels.txt \
      --listen 127.0.0.1:8080 --grpc 127.0.0.1:8081`)
	var plans, labels multiFlag
	fs.Var(&plans, "plan", "an unsigned plan to serve as FILE[,NAME[@VERSION]]; repeat for each")
	var bundles, models multiFlag
	fs.Var(&bundles, "bundle", "a signed bundle to serve (verified with --key first); repeat for each")
	fs.Var(&models, "model", "a model from the registry as NAME@VERSION or NAME@ALIAS (verified with --key); repeat")
	fs.StringVar(&o.Registry, "registry", "", "a registry directory (default DATA/registry); without --model, serve each model's prod alias, else its newest version")
	deviceFlag(fs, &o.Device)
	fs.StringVar(&o.Keys, "key", "", "trusted public key(s) that bundles must be signed by")
	fs.StringVar(&o.DataDir, "data", defaultDataDir(), "vouch's data directory (the registry for --model)")
	fs.Var(&labels, "labels", "class labels as MODEL=FILE (one label a line, in output order); repeat")
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "HTTP listen address")
	fs.StringVar(&o.GRPC, "grpc", "127.0.0.1:8081", `gRPC listen address ("" for none)`)
	fs.StringVar(&o.Credentials, "credentials", "", "credentials file (NAME ROLES sha256:HEX|cert:CN per line)")
	fs.StringVar(&o.TLSCert, "tls-cert", "", "TLS certificate (PEM) for both listeners")
	fs.StringVar(&o.TLSKey, "tls-key", "", "TLS private key (PEM)")
	fs.StringVar(&o.ClientCA, "client-ca", "", "CA bundle (PEM) that verifies client certificates (mTLS)")
	fs.BoolVar(&o.RequireCert, "require-client-cert", false, "refuse TLS clients without a verified certificate")
	fs.StringVar(&o.Audit, "audit", "on", `"on": the transparency log under DATA/audit; "off": no audit records`)
	fs.StringVar(&o.AuditOrigin, "audit-origin", "vouch.local/audit", "the log's origin (its checkpoints' name), fixed when its key is made")
	fs.StringVar(&o.AuditDurability, "audit-durability", "durable", "durable (answer once the record is on disk) or async (queued, bounded)")
	fs.StringVar(&o.AuditFailure, "audit-failure", "closed", "when the log cannot take records: closed (503) or open (serve, count, alarm)")
	fs.StringVar(&o.LogKey, "log-key", "", "the audit log's checkpoint signing key file, mode 0600, outside the log directory (default DATA/keys/audit-log.key, made on first use)")
	fs.BoolVar(&o.AllowLegacyLogKey, "allow-legacy-log-key", false, "use a signing key inside the log directory (DATA/audit/log.key, as older versions made it), with a warning")
	fs.Var((*multiFlag)(&o.Witnesses), "witness", "a C2SP tlog-witness that cosigns each new checkpoint, as URL=VERIFIERKEY; repeat")
	fs.IntVar(&o.WitnessQuorum, "witness-quorum", 0, "cosignatures a checkpoint needs before it is published (default: one from every --witness)")
	fs.StringVar(&o.AuditLog, "audit-log", "", "keep audit records as JSON lines in FILE instead of the transparency log")
	fs.BoolVar(&o.AuditFsync, "audit-fsync", true, "with --audit-log: fsync the file before answering each request")
	fs.BoolVar(&o.CaptureInputs, "capture-inputs", false, "keep served inputs, encrypted per model, under DATA/capture (for replay)")
	fs.StringVar(&o.Retain, "retain", "", "with --capture-inputs: keep inputs this long (7y, 30d, 36h; default forever)")
	fs.IntVar(&o.Workers, "workers", runtime.GOMAXPROCS(0), "engine runs at once per model")
	fs.IntVar(&o.Queue, "queue", 64, "requests that may wait per model; more get 503")
	fs.IntVar(&o.MaxBatch, "max-batch", 0, "dynamic batching: rows per run (0 or 1: off)")
	fs.DurationVar(&o.MaxDelay, "max-delay", 2*time.Millisecond, "dynamic batching: longest wait for a batch to fill")
	fs.Int64Var(&o.MaxBody, "max-body", 64<<20, "largest request body in bytes")
	o.Limits.flags(fs)
	fs.StringVar(&o.AccessLog, "access-log", "-", `JSON access log file ("-" stderr, "" none)`)
	fs.Var((*multiFlag)(&o.Exports), "export", "stream every audit record to kafka://HOST:PORT/TOPIC, nats://HOST:PORT/SUBJECT[?stream=NAME] or http(s)://URL (CloudEvents); repeat for several")
	fs.StringVar(&o.LogFormat, "log-format", "text", "the server's log (alarms, errors, exporter warnings) on stderr: text or json (the access log is JSON either way)")
	fs.DurationVar(&o.DrainDelay, "drain-delay", 0, "on SIGTERM, report not ready (HTTP and gRPC health) this long before closing the listeners, so load balancers stop sending first (Kubernetes: 5s)")
	fs.StringVar(&o.AuditDB, "audit-db", "", "append to the transparency log that several replicas share, in MariaDB or MySQL (DSN user:pass@tcp(host:3306)/db); every replica needs the same --log-key FILE")
	fs.StringVar(&o.OTLPEndpoint, "otlp-endpoint", "", "send a span per request, continuing the caller's traceparent, to this OpenTelemetry collector (OTLP/gRPC, HOST:PORT)")
	fs.BoolVar(&o.OTLPInsecure, "otlp-insecure", false, "with --otlp-endpoint: plaintext gRPC (a collector on loopback or in the pod)")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to drain on shutdown")
	fs.StringVar(&o.Console, "console", "auto", "the audit console at /console/: on, off, or auto (on when a principal has the audit role)")
	fs.StringVar(&o.ConsoleKey, "console-key", "", "private key (vouch keygen) that signs console reports and exports (default DATA/console/report.key, made on first use)")
	var features multiFlag
	fs.Var(&features, "features", "input feature names as MODEL=FILE (one a line, in column order), shown by the console; repeat")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q (plans are given with --plan)", ErrUsage, pos[0])
	}
	o.Plans, o.Labels, o.Bundles, o.Models, o.Features = plans, labels, bundles, models, features
	if len(o.Plans)+len(o.Bundles)+len(o.Models) == 0 && o.Registry == "" {
		return fmt.Errorf("%w: nothing to serve: give --bundle FILE, --model NAME@REF (from the registry) or --plan FILE", ErrUsage)
	}
	if (len(o.Bundles)+len(o.Models) > 0 || o.Registry != "") && o.Keys == "" {
		return fmt.Errorf("%w: bundles are verified before they are served: give --key PUB", ErrUsage)
	}
	if err := checkAuditFlags(o); err != nil {
		return err
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return fmt.Errorf("%w: --tls-cert and --tls-key go together", ErrUsage)
	}
	if o.ClientCA != "" && o.TLSCert == "" {
		return fmt.Errorf("%w: --client-ca needs --tls-cert and --tls-key", ErrUsage)
	}
	return m.serve(ctx, o)
}

func (m *Main) serve(ctx context.Context, o ServeOptions) error {
	labels := map[string][]string{}
	for _, l := range o.Labels {
		name, file, ok := strings.Cut(l, "=")
		if !ok {
			return fmt.Errorf("%w: --labels %q: want MODEL=FILE", ErrUsage, l)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if labels[name], err = explain.ParseLabels(b); err != nil {
			return fmt.Errorf("--labels %s: %w", l, err)
		}
	}
	var runners []server.Runner
	bundled, err := m.bundleRunners(ctx, o, labels)
	if err != nil {
		return err
	}
	runners = append(runners, bundled...)
	for _, spec := range o.Plans {
		file, nv, _ := strings.Cut(spec, ",")
		name, version, _ := strings.Cut(nv, "@")
		po := server.PlanOptions{Name: name, Version: version, Device: o.Device}
		r, err := server.LoadPlan(file, po)
		if err != nil {
			return err
		}
		if l, ok := labels[r.Info().Name]; ok {
			po.Name, po.Labels = r.Info().Name, l
			if r, err = server.LoadPlan(file, po); err != nil {
				return err
			}
		}
		runners = append(runners, r)
	}
	var access *slog.Logger
	switch o.AccessLog {
	case "":
	case "-":
		access = slog.New(slog.NewJSONHandler(m.Stderr, nil))
	default:
		f, err := os.OpenFile(o.AccessLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		access = slog.New(slog.NewJSONHandler(f, nil))
	}
	so := server.Options{Version: Version, MaxBodyBytes: o.MaxBody, AccessLog: access,
		Pool: server.PoolOptions{Workers: o.Workers, Queue: o.Queue, MaxBatch: o.MaxBatch, MaxDelay: o.MaxDelay}}
	if err := o.Limits.apply(&so); err != nil {
		return err
	}
	// Bind before anything is written under DATA (keys, the log).
	hl, gl, err := m.bindListeners(o)
	if err != nil {
		return err
	}
	defer hl.Close()
	if gl != nil {
		defer gl.Close()
	}
	switch o.LogFormat {
	case "", "text":
		so.Logger = slog.New(slog.NewTextHandler(m.Stderr, nil))
	case "json":
		so.Logger = slog.New(slog.NewJSONHandler(m.Stderr, nil))
	default:
		return fmt.Errorf("%w: --log-format %q: want text or json", ErrUsage, o.LogFormat)
	}
	serveAudit := m.serveAudit
	if o.AuditDB != "" {
		serveAudit = m.serveSharedAudit
	}
	closeAudit, err := serveAudit(ctx, o, &so)
	if err != nil {
		return err
	}
	defer closeAudit()
	closeJournal, err := m.serveJournal(ctx, o, &so)
	if err != nil {
		return err
	}
	defer closeJournal()
	if o.OTLPEndpoint != "" {
		tx, err := tracing.New(ctx, tracing.Options{Endpoint: o.OTLPEndpoint, Insecure: o.OTLPInsecure, Version: Version})
		if err != nil {
			return err
		}
		so.Spans = tx
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			tx.Shutdown(sctx)
		}()
		fmt.Fprintf(m.Stderr, "traces  OTLP/gRPC to %s\n", o.OTLPEndpoint)
	}
	stopExport, err := m.startExporters(ctx, o.Exports, o.DataDir, &so, so.Logger)
	if err != nil {
		return err
	}
	defer stopExport()
	if o.Credentials != "" {
		c, err := server.LoadCredentials(o.Credentials)
		if err != nil {
			return err
		}
		so.Credentials = c
	}
	s := server.New(so)
	for _, r := range runners {
		info := r.Info()
		start := time.Now()
		if err := s.AddModel(r); err != nil {
			return err
		}
		fmt.Fprintf(m.Stderr, "model   %s@%s ready (plan %s, warm-up %v, max batch %d)\n", info.Name, info.Version, shortDigest(info.PlanDigest), time.Since(start).Round(time.Millisecond), info.MaxBatch)
	}
	handler := s.Handler()
	ch, closeConsole, err := m.serveConsole(ctx, o, &so, runners)
	if err != nil {
		return err
	}
	defer closeConsole()
	if ch != nil {
		mux := http.NewServeMux()
		mux.Handle("/console/", ch)
		mux.Handle("GET /console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
		mux.Handle("/", handler)
		handler = mux
	}
	tlsConf, err := serveTLS(o)
	if err != nil {
		return err
	}
	hl = s.Listener(hl)
	scheme := "http"
	if tlsConf != nil {
		hl, scheme = tls.NewListener(hl, tlsConf), "https"
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	o.Limits.configure(hs, s)
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(hl) }()
	fmt.Fprintf(m.Stderr, "http    %s://%s\n", scheme, hl.Addr())
	var gs *grpc.Server
	grpcAddr := ""
	if o.GRPC != "" {
		var opts []grpc.ServerOption
		if tlsConf != nil {
			opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConf)))
		}
		gs = s.NewGRPCServer(opts...)
		go func() { errc <- gs.Serve(s.Listener(gl)) }()
		grpcAddr = gl.Addr().String()
		fmt.Fprintf(m.Stderr, "grpc    %s\n", grpcAddr)
	}
	if o.ready != nil {
		o.ready(hl.Addr().String(), grpcAddr)
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	s.BeginDrain()
	if o.DrainDelay > 0 {
		fmt.Fprintf(m.Stderr, "not ready; closing the listeners in %v…\n", o.DrainDelay)
		time.Sleep(o.DrainDelay)
	}
	fmt.Fprintln(m.Stderr, "draining requests in flight…")
	sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
	defer cancel()
	herr := hs.Shutdown(sctx)
	if gs != nil {
		stopped := make(chan struct{})
		go func() { gs.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-sctx.Done():
			gs.Stop()
		}
	}
	derr := s.Drain(sctx)
	fmt.Fprintln(m.Stderr, "stopped")
	return errors.Join(herr, derr)
}

func serveTLS(o ServeOptions) (*tls.Config, error) {
	if o.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	if o.ClientCA != "" {
		pem, err := os.ReadFile(o.ClientCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificates", o.ClientCA)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.VerifyClientCertIfGiven
		if o.RequireCert {
			c.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return c, nil
}

func shortDigest(digest string) string {
	d := strings.TrimPrefix(digest, "sha256:")
	if len(d) > 16 {
		d = d[:16]
	}
	return d
}

// bundleRunners verifies and loads every --bundle and --model.
func (m *Main) bundleRunners(ctx context.Context, o ServeOptions, labels map[string][]string) ([]server.Runner, error) {
	if len(o.Bundles)+len(o.Models) == 0 && o.Registry == "" {
		return nil, nil
	}
	keys, err := readKeys(o.Keys)
	if err != nil {
		return nil, err
	}
	var out []server.Runner
	add := func(l *bundle.Loaded, bundleDigest, where string) error {
		meta := l.Bundle.Metadata()
		p, err := plan.Decode(l.Bundle.Plan())
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		po := server.PlanOptions{Name: meta.Model.Name, Version: meta.Model.Version, BundleDigest: bundleDigest, Labels: labels[meta.Model.Name], Device: o.Device}
		if b, ok := l.Bundle.File(bundle.ExplainFile); ok {
			// The signed explanation data: feature names, background rows
			// (tree covers, KernelSHAP), so that reasons name the features.
			if po.Explain, err = explain.DecodeData(b); err != nil {
				return fmt.Errorf("%s: %s: %w", where, bundle.ExplainFile, err)
			}
		}
		r, err := server.NewPlanRunner(p, "sha256:"+plan.Digest(l.Bundle.Plan()), where, po)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stderr, "verified %s: %s@%s signed by %s\n", where, meta.Model.Name, meta.Model.Version, strings.Join(l.Provenance.SignedBy, ", "))
		out = append(out, r)
		return nil
	}
	for _, path := range o.Bundles {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		l, err := bundle.Load(bytes.NewReader(raw), bundle.LoadOptions{TrustedKeys: keys, Check: checkOptions(false)})
		if err != nil {
			return nil, fmt.Errorf("refusing %s: %w", path, err)
		}
		if err := add(l, "sha256:"+plan.Digest(raw), path); err != nil {
			return nil, err
		}
	}
	if len(o.Models) > 0 || o.Registry != "" {
		dir := o.Registry
		if dir == "" {
			dir = filepath.Join(o.DataDir, "registry")
		}
		reg, err := registry.Open(registry.Options{Dir: dir, TrustedKeys: keys})
		if err != nil {
			return nil, err
		}
		defer reg.Close()
		refs := o.Models
		if len(refs) == 0 {
			if refs, err = defaultRefs(ctx, reg); err != nil {
				return nil, err
			}
		}
		for _, ref := range refs {
			l, err := reg.Load(ctx, ref, "vouch-serve")
			if err != nil {
				return nil, fmt.Errorf("refusing %s: %w", ref, err)
			}
			if _, err := bundle.Check(l.Bundle, checkOptions(false)); err != nil {
				return nil, fmt.Errorf("refusing %s: %w", ref, err)
			}
			if err := add(&bundle.Loaded{Bundle: l.Bundle, Provenance: l.Provenance}, l.Version.Digest, ref); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// defaultRefs names what `vouch serve --registry DIR` serves without
// --model: each model's prod alias, or its most recently pushed version.
func defaultRefs(ctx context.Context, reg *registry.Registry) ([]string, error) {
	versions, err := reg.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var names []string
	ref := map[string]string{}
	newest := map[string]*registry.Version{}
	for _, v := range versions {
		if _, seen := newest[v.Name]; !seen {
			names = append(names, v.Name)
			newest[v.Name] = v
		}
		if v.PushedAt.After(newest[v.Name].PushedAt) {
			newest[v.Name] = v
		}
		if slices.Contains(v.Aliases, "prod") {
			ref[v.Name] = v.Name + "@prod"
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("the registry holds no model: push one with vouch registry push")
	}
	refs := make([]string, len(names))
	for i, n := range names {
		refs[i] = ref[n]
		if refs[i] == "" {
			refs[i] = n + "@" + newest[n].Version
		}
	}
	return refs, nil
}
