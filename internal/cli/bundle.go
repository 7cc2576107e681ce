package cli

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/registry"
)

// checkOptions are the load-time checks of this engine: the plan formats
// it decodes, this machine's CPU features (twin fallback allowed, since
// every fast kernel has a portable twin giving the same bits), and this
// vouch's version.
func checkOptions(anyVersion bool) bundle.CheckOptions {
	return bundle.CheckOptions{
		PlanFormats:       []string{strconv.Itoa(plan.FormatVersion), strconv.Itoa(plan.FormatVersionGPU)},
		AllowTwinFallback: true,
		VouchVersion:      Version,
		AnyVouchVersion:   anyVersion,
	}
}

// readKeys parses a comma-separated list of public keys or key files.
func readKeys(spec string) ([]*bundle.PublicKey, error) {
	if spec == "" {
		return nil, fmt.Errorf("%w: --key is required: the public key(s) you trust (a key string or a .pub file from vouch keygen)", ErrUsage)
	}
	var keys []*bundle.PublicKey
	for _, s := range strings.Split(spec, ",") {
		k, err := bundle.ReadPublicKey(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func runKeygen(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("keygen", "keygen --name NAME [--out DIR] [--force]", `
Generates an Ed25519 signing key. The private key (NAME.key, mode 0600) signs
bundles (vouch build --bundle --key, vouch sign); the public key (NAME.pub, a
signed-note verifier string) is what verifiers trust (vouch verify --key).`)
	name := fs.String("name", "", "the key's name, e.g. vouch-ci (required)")
	out := fs.String("out", ".", "directory for NAME.key and NAME.pub")
	force := fs.Bool("force", false, "overwrite existing key files")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	if *name == "" {
		return fmt.Errorf("%w: --name is required", ErrUsage)
	}
	priv, pub := filepath.Join(*out, *name+".key"), filepath.Join(*out, *name+".pub")
	k, err := bundle.Keygen(bundle.KeygenOptions{Name: *name, PrivateKeyPath: priv, PublicKeyPath: pub, Force: *force})
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "private key  %s (keep it secret)\npublic key   %s\nkey id       %s\n%s\n", priv, pub, k.ID(), k.String())
	return nil
}

func runSign(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("sign", "sign BUNDLE --key PRIVATE.key", `
Signs a bundle's provenance with an Ed25519 key (adding a co-signature when
it is already signed), rewriting the bundle file atomically.`)
	key := fs.String("key", "", "the private key file (from vouch keygen)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *key == "" {
		return fmt.Errorf("%w: want one BUNDLE and --key", ErrUsage)
	}
	k, err := bundle.ReadPrivateKey(*key)
	if err != nil {
		return err
	}
	b, err := bundle.ReadFile(pos[0])
	if err != nil {
		return err
	}
	if err := bundle.Sign(b, k); err != nil {
		return err
	}
	if err := b.WriteFile(pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "signed %s with %s\n", pos[0], k.ID())
	return nil
}

func runVerify(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("verify", "verify BUNDLE --key PUB[,PUB...]", `
Verifies a bundle: every file's SHA-256 against the signed provenance, the
signature against the trusted keys, the plan format, the CPU features it
needs on this machine and the vouch version that built it. Prints the
provenance: what was built, from which source, by which vouch, on which
machine, when and with which options. Exits non-zero on any mismatch.`)
	key := fs.String("key", "", "trusted public key(s): key strings or .pub files, comma-separated")
	anyVersion := fs.Bool("any-version", false, "accept bundles built by any vouch version")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want one BUNDLE", ErrUsage)
	}
	keys, err := readKeys(*key)
	if err != nil {
		return err
	}
	l, err := bundle.LoadFile(pos[0], bundle.LoadOptions{TrustedKeys: keys, Check: checkOptions(*anyVersion)})
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "VERIFIED %s\n\n%s\n", pos[0], l.Provenance.String())
	if l.Compatibility.TwinFallback {
		fmt.Fprintf(m.Stdout, "note: this machine lacks %v; the plan runs on the portable twins (same bits, slower)\n", l.Compatibility.MissingCPUFeatures)
	}
	return nil
}

func defaultDataDir() string {
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".vouch")
	}
	return ".vouch"
}

func defaultPrincipal() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "unknown"
}

func runRegistry(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("registry", "registry push|pull|list|show|tag|history|access [ARGS] --key PUB [--data DIR]", `
A local content-addressed store of signed bundles under DIR/registry.

  vouch registry push BUNDLE [--ref NAME@VERSION]   verify and store; versions are immutable
  vouch registry pull NAME@VERSION|NAME@ALIAS OUT   verify and write the bundle to OUT
  vouch registry list [NAME]                        versions, digests, aliases
  vouch registry show REF                           the verified provenance of one version
  vouch registry tag REF ALIAS                      move an alias (e.g. credit-risk@prod)
  vouch registry history NAME [ALIAS]               every alias move
  vouch registry access [NAME]                      every read: who, what, when

Every read is verified again and recorded with its principal.`)
	key := fs.String("key", "", "trusted public key(s), comma-separated (required)")
	data := fs.String("data", defaultDataDir(), "vouch's data directory")
	principal := fs.String("principal", defaultPrincipal(), "who is acting, for the access trail")
	ref := fs.String("ref", "", "push: the NAME@VERSION the bundle must declare")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("%w: want a subcommand: push, pull, list, show, tag, history or access", ErrUsage)
	}
	keys, err := readKeys(*key)
	if err != nil {
		return err
	}
	reg, err := registry.Open(registry.Options{Dir: filepath.Join(*data, "registry"), TrustedKeys: keys})
	if err != nil {
		return err
	}
	defer reg.Close()
	sub, rest := pos[0], pos[1:]
	need := func(n int, usage string) error {
		if len(rest) != n {
			return fmt.Errorf("%w: usage: vouch registry %s", ErrUsage, usage)
		}
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
	defer tw.Flush()
	switch sub {
	case "push":
		if err := need(1, "push BUNDLE"); err != nil {
			return err
		}
		v, err := reg.PushFile(ctx, rest[0], registry.PushOptions{Principal: *principal, Ref: *ref})
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "pushed %s@%s (%s, signed by %s)\n", v.Name, v.Version, v.Digest, strings.Join(v.SignedBy, ", "))
	case "pull":
		if err := need(2, "pull REF OUT"); err != nil {
			return err
		}
		v, err := reg.Pull(ctx, rest[0], rest[1], *principal)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "pulled %s@%s to %s (%s)\n", v.Name, v.Version, rest[1], v.Digest)
	case "list":
		name := ""
		if len(rest) > 0 {
			name = rest[0]
		}
		vs, err := reg.List(ctx, name)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "NAME\tVERSION\tDIGEST\tALIASES\tPUSHED BY\tPUSHED AT")
		for _, v := range vs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.Name, v.Version, short(v.Digest), strings.Join(v.Aliases, ","), v.PushedBy, v.PushedAt.Format("2006-01-02 15:04:05"))
		}
	case "show":
		if err := need(1, "show REF"); err != nil {
			return err
		}
		l, err := reg.Show(ctx, rest[0], *principal)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "%s@%s  %s  aliases: %s\n\n%s\n", l.Version.Name, l.Version.Version, l.Version.Digest, strings.Join(l.Version.Aliases, ","), l.Provenance.String())
	case "tag":
		if err := need(2, "tag REF ALIAS"); err != nil {
			return err
		}
		ev, err := reg.Tag(ctx, rest[0], rest[1], *principal)
		if err != nil {
			return err
		}
		from := ev.Previous
		if from == "" {
			from = "(new)"
		}
		fmt.Fprintf(m.Stdout, "%s@%s now names %s (was %s)\n", ev.Name, ev.Alias, ev.Version, from)
	case "history":
		if len(rest) < 1 || len(rest) > 2 {
			return fmt.Errorf("%w: usage: vouch registry history NAME [ALIAS]", ErrUsage)
		}
		alias := ""
		if len(rest) == 2 {
			alias = rest[1]
		}
		evs, err := reg.AliasHistory(ctx, rest[0], alias)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "ALIAS\tVERSION\tPREVIOUS\tSET BY\tSET AT")
		for _, e := range evs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Alias, e.Version, e.Previous, e.SetBy, e.SetAt.Format("2006-01-02 15:04:05"))
		}
	case "access":
		name := ""
		if len(rest) > 0 {
			name = rest[0]
		}
		acc, err := reg.Accesses(ctx, name)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "AT\tPRINCIPAL\tACTION\tREF\tVERSION\tOUTCOME")
		for _, a := range acc {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.At.Format("2006-01-02 15:04:05"), a.Principal, a.Action, a.Ref, a.Version, a.Outcome)
		}
	default:
		return fmt.Errorf("%w: unknown registry subcommand %q (push, pull, list, show, tag, history, access)", ErrUsage, sub)
	}
	return nil
}

func short(digest string) string {
	if len(digest) > 19 {
		return digest[:19]
	}
	return digest
}
