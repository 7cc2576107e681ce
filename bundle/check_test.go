package bundle

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	b := testBundle(t) // needs plan format "1", avx2 and fma, built by 0.1.0-dev
	host := []string{"avx", "avx2", "fma", "sse2"}
	for _, tt := range []struct {
		name     string
		opts     CheckOptions
		want     string // error substring; "" for success
		fallback []string
	}{
		{"ok", CheckOptions{PlanFormats: []string{"1"}, CPUFeatures: host, VouchVersion: "0.1.0-dev"}, "", nil},
		{"ok patch", CheckOptions{PlanFormats: []string{"1", "2"}, CPUFeatures: host, VouchVersion: "v0.1.3"}, "", nil},
		{"plan format", CheckOptions{PlanFormats: []string{"2"}, CPUFeatures: host, VouchVersion: "0.1.0-dev"},
			`plan format version differs: the bundle needs "1", this engine has "2"`, nil},
		{"no plan formats", CheckOptions{CPUFeatures: host, VouchVersion: "0.1.0-dev"}, "PlanFormats is empty", nil},
		{"cpu", CheckOptions{PlanFormats: []string{"1"}, CPUFeatures: []string{"sse2", "avx"}, VouchVersion: "0.1.0-dev"},
			"CPU features differs: the bundle needs avx2, fma, this engine has a CPU without avx2, fma (allow the portable twin fallback", nil},
		{"cpu fallback", CheckOptions{PlanFormats: []string{"1"}, CPUFeatures: []string{"sse2", "avx2"}, VouchVersion: "0.1.0-dev", AllowTwinFallback: true},
			"", []string{"fma"}},
		{"minor version", CheckOptions{PlanFormats: []string{"1"}, CPUFeatures: host, VouchVersion: "0.2.0"},
			"vouch version differs: the bundle needs vouch 0.1.0-dev (the version that built it), this engine has vouch 0.2.0", nil},
		{"devel", CheckOptions{PlanFormats: []string{"1"}, CPUFeatures: host, VouchVersion: "(devel)"}, "vouch version differs", nil},
		{"any version", CheckOptions{PlanFormats: []string{"1"}, CPUFeatures: host, VouchVersion: "(devel)", AnyVouchVersion: true}, "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Check(b, tt.opts)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want one containing %q", err, tt.want)
				}
				if tt.name != "no plan formats" && !errors.Is(err, ErrIncompatible) {
					t.Errorf("err does not wrap ErrIncompatible: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.TwinFallback != (tt.fallback != nil) || !slicesEqual(c.MissingCPUFeatures, tt.fallback) {
				t.Errorf("compatibility = %+v, want missing %v", c, tt.fallback)
			}
		})
	}
}

func TestCompatibleVersions(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		ok   bool
	}{
		{"1.2.0", "1.9.1", true},
		{"v1.2.0", "1.0.0", true},
		{"1.2.0", "2.0.0", false},
		{"0.1.0", "0.1.5", true},
		{"0.1.0", "0.2.0", false},
		{"(devel)", "(devel)", true},
		{"(devel)", "1.0.0", false},
		{"1.0.0-rc.1", "1.0.0", true},
	} {
		if got := compatibleVersions(tt.a, tt.b); got != tt.ok {
			t.Errorf("compatibleVersions(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
}

func TestLoad(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	path := filepath.Join(t.TempDir(), "m.vouch")
	if err := signedBundle(t, k).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	opts := LoadOptions{
		TrustedKeys: []*PublicKey{k.Public()},
		Check:       CheckOptions{PlanFormats: []string{"1"}, CPUFeatures: []string{"avx2", "fma"}, VouchVersion: "0.1.0"},
	}
	l, err := LoadFile(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(l.Bundle.Plan(), testContents().Plan) || l.Provenance.Model.Name != "credit-risk" || l.Compatibility.TwinFallback {
		t.Errorf("loaded = %+v", l)
	}

	// Each refusal names the file and what differs.
	bad := opts
	bad.TrustedKeys = []*PublicKey{testKey(t, "other", 2).Public()}
	if _, err := LoadFile(path, bad); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), path) {
		t.Errorf("untrusted: %v", err)
	}
	bad = opts
	bad.Check.CPUFeatures = []string{"sse2"}
	if _, err := LoadFile(path, bad); !errors.Is(err, ErrIncompatible) {
		t.Errorf("cpu: %v", err)
	}
	bad.Check.AllowTwinFallback = true
	if l, err := LoadFile(path, bad); err != nil || !l.Compatibility.TwinFallback {
		t.Errorf("twin fallback: %v", err)
	}
	if _, err := Load(bytes.NewReader(nil), LoadOptions{}); err == nil {
		t.Error("Load without trusted keys succeeded")
	}
	data, _ := os.ReadFile(path)
	if _, err := Load(bytes.NewReader(data[:len(data)/2]), opts); !errors.Is(err, ErrFormat) {
		t.Errorf("truncated: %v", err)
	}
}

func TestParseCPUInfo(t *testing.T) {
	x86 := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse2 avx2 fma avx\n\nprocessor\t: 1\nmodel name\t: other\nflags\t\t: fpu\n"
	model, feat := parseCPUInfo(strings.NewReader(x86))
	if model != "AMD EPYC 7B13" || !slicesEqual(feat, []string{"avx", "avx2", "fma", "fpu", "sse2"}) {
		t.Errorf("x86: %q %v", model, feat)
	}
	arm := "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes\nCPU implementer\t: 0x41\n"
	_, feat = parseCPUInfo(strings.NewReader(arm))
	if !slicesEqual(feat, []string{"aes", "asimd", "evtstrm", "fp"}) {
		t.Errorf("arm64: %v", feat)
	}
}

func TestHostEnvironment(t *testing.T) {
	env := HostEnvironment("9.9.9")
	if env.OS == "" || env.Arch == "" || env.GoVersion == "" || env.VouchVersion != "9.9.9" {
		t.Errorf("env = %+v", env)
	}
	if env.Arch == "amd64" && !strings.Contains(strings.Join(env.CPUFeatures, " "), "sse2") {
		t.Errorf("amd64 without sse2: %v", env.CPUFeatures)
	}
}
