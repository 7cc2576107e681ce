package kernels

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The golden PTX must have been made from the current source: editing
// exact.cu without regenerating it (go test -tags cuda -run Golden
// -update, on a machine with the header's NVRTC) fails here, on any CPU.
func TestGoldenMatchesSource(t *testing.T) {
	b, err := os.ReadFile("testdata/exact.ptx")
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseGolden(b)
	if err != nil {
		t.Fatal(err)
	}
	if g.Source != Name || g.Digest != Digest() {
		t.Fatalf("testdata/exact.ptx was made from %s sha256 %s, the source is now %s: regenerate it (go test -tags cuda ./cuda/kernels -run Golden -update)", g.Source, g.Digest, Digest())
	}
	// Every kernel is an entry of the PTX, and the PTX fuses only where
	// the source says so: no mad/fma without an explicit rounding mode,
	// no flush-to-zero, no approximate division or square root.
	for _, k := range All {
		if !strings.Contains(string(g.PTX), ".entry "+k+"(") {
			t.Errorf("golden PTX has no entry %s", k)
		}
	}
	for _, bad := range []string{`\bmad\.f32`, `\bmad\.rn\.f32`, `\.ftz\b`, `\bdiv\.approx`, `\bdiv\.full`, `\bsqrt\.approx`, `\bex2\.approx`, `\blg2\.approx`, `\brcp\.approx`} {
		if m := regexp.MustCompile(bad).FindString(string(g.PTX)); m != "" {
			t.Errorf("golden PTX contains %q (non-IEEE or contracted float32 arithmetic)", m)
		}
	}
}

func TestParseGoldenRejects(t *testing.T) {
	for _, in := range []string{"", "no header\n", "// vouch golden PTX: nvrtc 13.0\n", "// vouch golden PTX: nvrtc 13.0 compute_90 source exact.cu sha256 abc\n"} {
		if _, err := ParseGolden([]byte(in)); err == nil {
			t.Errorf("ParseGolden(%q) = nil error", in)
		}
	}
	b := FormatGolden("13.0", "compute_90", []byte(".version 9.0\n\x00"))
	g, err := ParseGolden(b)
	if err != nil || g.NVRTC != "13.0" || g.Arch != "compute_90" || string(g.PTX) != ".version 9.0\n" || g.Digest != Digest() {
		t.Fatalf("round trip: %+v, %v", g, err)
	}
}

func TestOptionsKeepIEEE(t *testing.T) {
	want := map[string]bool{"--fmad=false": true, "--ftz=false": true, "--prec-div=true": true, "--prec-sqrt=true": true}
	for _, o := range Options {
		delete(want, o)
		if strings.Contains(o, "fast-math") {
			t.Errorf("option %q", o)
		}
	}
	if len(want) != 0 {
		t.Errorf("Options lack %v", want)
	}
}
