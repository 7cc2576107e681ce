// Package cli implements vouch's command line: one file per subcommand,
// each parsing its own flags into an options struct. Nothing else in vouch
// reads flags or the environment.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"k8s.io/klog/v2"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// ErrUsage marks an error in how a command was invoked; it exits with 2.
var ErrUsage = errors.New("usage error")

// Main is the vouch program.
type Main struct {
	Stdout, Stderr io.Writer

	help bool // the command line asked for help: usage goes to Stdout
}

// NewMain returns a Main writing to the given streams.
func NewMain(stdout, stderr io.Writer) *Main { return &Main{Stdout: stdout, Stderr: stderr} }

type command struct {
	summary string
	run     func(ctx context.Context, m *Main, args []string) error
}

func (m *Main) commands() map[string]command {
	return map[string]command{
		"run":         {"run a model (ONNX file, plan or verified bundle) on input tensors and print the outputs", runRun},
		"build":       {"compile an ONNX model into a deterministic engine plan", runBuild},
		"inspect":     {"print a plan's layers (kind, fused from, tactic, precision, shape, FLOPs)", runInspect},
		"bench":       {"measure a model's latency against ONNX Runtime and onnx-gomlx, per layer, or GEMM GFLOP/s", runBench},
		"gputest":     {"run the GPU suite: exact CUDA kernels against their CPU twins, bit for bit, and the SGEMM benchmark", runGPUTest},
		"conformance": {"run the ONNX backend test suite and write conformance.md", runConformance},
		"version":     {"print vouch's version and build information", runVersion},
		"serve":       {"serve plans over the Open Inference Protocol (HTTP and gRPC) with an audit record per request", runServe},
		"infer":       {"send one inference request to a server and print the outputs and trace id", runInfer},
		"loadtest":    {"measure a server's throughput and latency at several concurrency levels", runLoadtest},
		"keygen":      {"generate an Ed25519 key pair for signing bundles", runKeygen},
		"sign":        {"sign a bundle's provenance", runSign},
		"verify":      {"verify a bundle's signature, digests and compatibility, and print its provenance", runVerify},
		"registry":    {"push, pull, list, show and tag signed bundles in the local registry", runRegistry},
		"demo":        {"run the whole story on embedded defaults: build, sign, serve, audit, replay, catch tampering", runDemo},
		"replay":      {"prove a past decision: re-run a recorded request on its signed engine and compare bit for bit", runReplay},
		"audit":       {"verify, show, query and export the audit log; shred and purge captured inputs", runAudit},
	}
}

// quietKlog keeps the transparency-log library's informational klog lines
// (it logs every directory initialization and checkpoint) off the terminal;
// its errors still reach stderr.
func quietKlog() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "ERROR")
	klog.SetOutput(io.Discard)
}

// Run executes the command named by args[0].
func (m *Main) Run(ctx context.Context, args []string) int {
	quietKlog()
	cmds := m.commands()
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args[0] = "version"
	}
	m.help = len(args) > 0 && slices.ContainsFunc(args, func(a string) bool {
		return a == "help" || a == "-h" || a == "--help" || a == "-help"
	})
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if c, ok := cmds[args[1]]; ok {
				_ = c.run(ctx, m, []string{"-h"})
				return ExitOK
			}
		}
		m.usage(cmds)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(m.Stderr, "vouch: unknown command %q\n\n", args[0])
		m.usage(cmds)
		return ExitUsage
	}
	err := c.run(ctx, m, args[1:])
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(m.Stderr, "vouch %s: %v\nRun 'vouch %s -h' for help.\n", args[0], err, args[0])
		return ExitUsage
	default:
		fmt.Fprintf(m.Stderr, "vouch %s: %v\n", args[0], err)
		return ExitError
	}
}

func (m *Main) usage(cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("vouch: an auditable inference engine.\n\nUsage:\n\n\tvouch <command> [arguments]\n\nCommands:\n\n")
	for _, n := range names {
		fmt.Fprintf(&b, "\t%-12s %s\n", n, cmds[n].summary)
	}
	b.WriteString("\nRun 'vouch <command> -h' for a command's flags.\n")
	fmt.Fprint(m.usageOut(), b.String())
}

// usageOut is where usage goes: standard output when it was asked for,
// standard error when it answers a mistake.
func (m *Main) usageOut() io.Writer {
	if m.help {
		return m.Stdout
	}
	return m.Stderr
}

// newFlagSet returns a FlagSet whose usage prints the synopsis and a
// description before the flags.
func (m *Main) newFlagSet(name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		w := m.usageOut()
		fmt.Fprintf(w, "Usage: vouch %s\n\n%s\n\nFlags:\n", synopsis, strings.TrimSpace(about))
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(m.Stderr)
	}
	return fs
}

// parseInterleaved parses flags that may appear before or after positional
// arguments (vouch run model.onnx --input x=a.pb) and returns the positionals.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", ErrUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// multiFlag collects a repeated string flag.
type multiFlag []string

func (f *multiFlag) String() string     { return strings.Join(*f, ",") }
func (f *multiFlag) Set(v string) error { *f = append(*f, v); return nil }
