package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/console"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/registry"
	"github.com/vouchml/vouch/replay"
	"github.com/vouchml/vouch/server"
	"github.com/vouchml/vouch/stream"
)

// consoleOn decides --console: "on", "off", or "auto" (on when the
// credentials give some principal the audit role and the transparency log
// is kept).
func consoleOn(o ServeOptions, so *server.Options) (bool, error) {
	_, isLog := consoleLogOf(o, so.Audit)
	switch o.Console {
	case "off", "false":
		return false, nil
	case "on", "true":
		if !isLog {
			return false, fmt.Errorf("%w: --console needs the transparency log (--audit on or --audit-db, no --audit-log)", ErrUsage)
		}
		if so.Credentials == nil {
			return false, fmt.Errorf("%w: --console needs --credentials: every view is recorded under the viewer's name", ErrUsage)
		}
		return true, nil
	case "", "auto":
		return isLog && so.Credentials.HasRole(server.RoleAudit), nil
	}
	return false, fmt.Errorf("%w: --console %q: want on, off or auto", ErrUsage, o.Console)
}

// serveConsole builds the audit console for the models being served; nil
// when it is off.
func (m *Main) serveConsole(ctx context.Context, o ServeOptions, so *server.Options, runners []server.Runner) (http.Handler, func(), error) {
	nop := func() {}
	on, err := consoleOn(o, so)
	if err != nil || !on {
		return nil, nop, err
	}
	l, _ := consoleLogOf(o, so.Audit)
	co := console.Options{Log: l.Log, Appender: so.Appender, Credentials: so.Credentials, LogKeys: l.keys, Check: checkOptions(false),
		Verify: func(ctx context.Context) (*audit.Report, error) {
			return audit.Verify(ctx, l.files(ctx), audit.VerifyOptions{VerifierKeys: l.keys, CheckRecords: true})
		}}
	if in, ok := so.Capture.(console.Inputs); ok {
		co.Inputs = in
	}
	for _, w := range o.Witnesses { // URL=VERIFIERKEY
		if i := strings.LastIndex(w, "="); i >= 0 {
			co.WitnessKeys = append(co.WitnessKeys, w[i+1:])
		}
	}
	if len(o.Exports) > 0 {
		// Each exporter persists its cursor beside the log; the lag is the
		// log's size past it.
		co.ExporterLag = func() map[string]uint64 {
			cp, err := l.Checkpoint()
			if err != nil {
				return nil
			}
			lags := map[string]uint64{}
			for _, t := range o.Exports {
				name := stream.Name(t)
				cur, err := stream.ReadCursor(filepath.Join(l.exports, name+".cursor"), name)
				if err == nil && cp.Size >= cur {
					lags[name] = cp.Size - cur
				}
			}
			return lags
		}
	}
	features := map[string][]string{}
	for _, f := range o.Features {
		name, file, ok := strings.Cut(f, "=")
		if !ok {
			return nil, nop, fmt.Errorf("%w: --features %q: want MODEL=FILE", ErrUsage, f)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, nop, err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			features[name] = append(features[name], strings.TrimSpace(line))
		}
	}
	// The engines, by plan digest, to show and to replay.
	engines := map[string]console.Model{}
	var keys []*bundle.PublicKey
	if o.Keys != "" {
		if keys, err = readKeys(o.Keys); err != nil {
			return nil, nop, err
		}
	}
	for _, spec := range o.Plans {
		file, _, _ := strings.Cut(spec, ",")
		e, err := replay.LoadEngine(file, nil, checkOptions(false))
		if err != nil {
			return nil, nop, err
		}
		engines[e.PlanDigest] = console.Model{Engine: e}
	}
	for _, path := range o.Bundles {
		e, err := replay.LoadEngine(path, keys, checkOptions(false))
		if err != nil {
			return nil, nop, err
		}
		b, err := bundle.ReadFile(path)
		if err != nil {
			return nil, nop, err
		}
		engines[e.PlanDigest] = console.Model{Engine: e, Bundle: b}
	}
	closeReg := nop
	if len(o.Models) > 0 || o.Registry != "" {
		dir := o.Registry
		if dir == "" {
			dir = filepath.Join(o.DataDir, "registry")
		}
		reg, err := registry.Open(registry.Options{Dir: dir, TrustedKeys: keys})
		if err != nil {
			return nil, nop, err
		}
		co.Registry, closeReg = reg, func() { reg.Close() }
		for _, r := range runners {
			info := r.Info()
			if info.BundleDigest == "" {
				continue
			}
			l, err := reg.Load(ctx, info.Name+"@"+info.Version, "vouch-console")
			if errors.Is(err, registry.ErrNotFound) {
				continue
			} else if err != nil {
				closeReg()
				return nil, nop, err
			}
			p, err := plan.Decode(l.Bundle.Plan())
			if err != nil {
				closeReg()
				return nil, nop, err
			}
			e := &replay.Engine{Plan: p, PlanDigest: "sha256:" + plan.Digest(l.Bundle.Plan()), BundleDigest: l.Version.Digest,
				Provenance: l.Provenance, Source: "registry " + info.Name + "@" + info.Version}
			engines[e.PlanDigest] = console.Model{Engine: e, Bundle: l.Bundle}
		}
	}
	for _, r := range runners {
		info := r.Info()
		md := engines[info.PlanDigest]
		md.Name, md.Version, md.Features = info.Name, info.Version, features[info.Name]
		co.Models = append(co.Models, md)
	}
	if co.SignKey, err = consoleKey(o); err != nil {
		closeReg()
		return nil, nop, err
	}
	c, err := console.New(co)
	if err != nil {
		closeReg()
		return nil, nop, err
	}
	fmt.Fprintf(m.Stderr, "console /console/ (roles audit, admin; reports signed by %s)\n", co.SignKey.ID())
	return c.Handler(), closeReg, nil
}

// consoleKey reads --console-key, or makes DATA/console/report.key on
// first use: the key that signs replay reports and exports.
func consoleKey(o ServeOptions) (*bundle.PrivateKey, error) {
	if o.ConsoleKey != "" {
		return bundle.ReadPrivateKey(o.ConsoleKey)
	}
	path := filepath.Join(o.DataDir, "console", "report.key")
	if k, err := bundle.ReadPrivateKey(path); err == nil {
		return k, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	skey, k, err := bundle.GenerateKey(rand.Reader, "vouch-console")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(skey+"\n"), 0o600); err != nil {
		return nil, err
	}
	pub := k.Public().String()
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "report.pub"), []byte(pub+"\n"), 0o644); err != nil {
		return nil, err
	}
	return k, nil
}
