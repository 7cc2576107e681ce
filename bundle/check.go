package bundle

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
)

// CheckOptions describe the running engine and machine to Check.
type CheckOptions struct {
	// PlanFormats lists the plan format versions this engine decodes.
	// It must not be empty.
	PlanFormats []string
	// CPUFeatures lists this machine's CPU features in cpuinfo spelling;
	// nil means HostCPUFeatures().
	CPUFeatures []string
	// AllowTwinFallback lets a plan whose required CPU features are missing
	// run through the portable twins of its kernels (same bits, slower).
	AllowTwinFallback bool
	// VouchVersion is the running vouch's version; it must be compatible
	// with the version that built the bundle (see Check).
	VouchVersion string
	// AnyVouchVersion skips the vouch version check.
	AnyVouchVersion bool
}

// Compatibility is the outcome of a successful Check.
type Compatibility struct {
	// MissingCPUFeatures are the plan's required features that this
	// machine lacks; non-empty only when the twin fallback was allowed.
	MissingCPUFeatures []string
	// TwinFallback reports that the plan must run on portable twins.
	TwinFallback bool
}

// Check compares what the bundle's metadata requires with the running
// engine and machine, and refuses, with an *IncompatibleError naming what
// differs, a plan format this engine does not decode, required CPU features
// this machine lacks (unless the twin fallback is allowed), or a bundle
// built by an incompatible vouch. Two vouch versions are compatible when
// both are semantic versions ("v" optional) with the same major version
// (for 0.x, the same major and minor version), or when they are the same
// string. Check does not verify signatures: call Verify first, or Load.
func Check(b *Bundle, opts CheckOptions) (*Compatibility, error) {
	m := b.meta
	if len(opts.PlanFormats) == 0 {
		return nil, fmt.Errorf("bundle: Check: CheckOptions.PlanFormats is empty")
	}
	if !slices.Contains(opts.PlanFormats, m.Plan.FormatVersion) {
		return nil, &IncompatibleError{
			What: "plan format version", Bundle: fmt.Sprintf("%q", m.Plan.FormatVersion),
			Here: quoteList(opts.PlanFormats), Hint: "rebuild the plan with this vouch, or load it with a vouch that reads that format",
		}
	}
	if !opts.AnyVouchVersion && !compatibleVersions(m.Environment.VouchVersion, opts.VouchVersion) {
		return nil, &IncompatibleError{
			What: "vouch version", Bundle: fmt.Sprintf("vouch %s (the version that built it)", m.Environment.VouchVersion),
			Here: "vouch " + opts.VouchVersion, Hint: "versions must share the major version (major.minor before 1.0)",
		}
	}
	have := opts.CPUFeatures
	if have == nil {
		have = HostCPUFeatures()
	}
	var missing []string
	for _, f := range m.Plan.RequiredCPUFeatures {
		if !slices.Contains(have, strings.ToLower(f)) && !slices.Contains(have, f) {
			missing = append(missing, f)
		}
	}
	c := &Compatibility{}
	if len(missing) > 0 {
		if !opts.AllowTwinFallback {
			return nil, &IncompatibleError{
				What:   "CPU features",
				Bundle: strings.Join(m.Plan.RequiredCPUFeatures, ", "),
				Here:   "a CPU without " + strings.Join(missing, ", "),
				Hint:   "allow the portable twin fallback to run it, bit for bit the same but slower",
			}
		}
		c.MissingCPUFeatures = missing
		c.TwinFallback = true
	}
	return c, nil
}

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func compatibleVersions(built, running string) bool {
	if built == running {
		return true
	}
	b, r := canonVersion(built), canonVersion(running)
	if !semver.IsValid(b) || !semver.IsValid(r) {
		return false
	}
	if semver.Major(b) != semver.Major(r) {
		return false
	}
	if semver.Major(b) == "v0" {
		return semver.MajorMinor(b) == semver.MajorMinor(r)
	}
	return true
}

func canonVersion(v string) string {
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	return v
}

// LoadOptions configure Load.
type LoadOptions struct {
	TrustedKeys []*PublicKey // at least one
	Limits      Limits
	Check       CheckOptions
}

// Loaded is a bundle that passed every load-time check.
type Loaded struct {
	Bundle        *Bundle
	Provenance    *Provenance
	Compatibility *Compatibility
}

// Load reads a bundle from r, verifies it against the trusted keys and
// checks it against the running engine: what a runtime calls before it
// decodes a plan.
func Load(r io.Reader, opts LoadOptions) (*Loaded, error) {
	if len(opts.TrustedKeys) == 0 {
		return nil, fmt.Errorf("bundle: Load: no trusted keys")
	}
	b, err := Read(r, opts.Limits)
	if err != nil {
		return nil, err
	}
	prov, err := Verify(b, opts.TrustedKeys)
	if err != nil {
		return nil, err
	}
	c, err := Check(b, opts.Check)
	if err != nil {
		return nil, err
	}
	return &Loaded{Bundle: b, Provenance: prov, Compatibility: c}, nil
}

// LoadFile is Load of the file at path; errors name the file.
func LoadFile(path string, opts LoadOptions) (*Loaded, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	l, err := Load(f, opts)
	if err != nil {
		return nil, fmt.Errorf("%w (loading %s)", err, path)
	}
	return l, nil
}
