package bundle

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

func reread(t *testing.T, es []entry) *Bundle {
	t.Helper()
	b, err := Read(bytes.NewReader(makeTar(t, es)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSignVerify(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	b := signedBundle(t, k)
	b = reread(t, entries(b))
	p, err := Verify(b, []*PublicKey{k.Public()})
	if err != nil {
		t.Fatal(err)
	}
	if p.Model.Name != "credit-risk" || p.Model.Version != "2.1.0" {
		t.Errorf("model = %+v", p.Model)
	}
	if p.Plan.Digest != Digest(testContents().Plan) {
		t.Errorf("plan digest = %s", p.Plan.Digest)
	}
	if !slicesEqual(p.SignedBy, []string{k.ID()}) {
		t.Errorf("signed by %v, want %s", p.SignedBy, k.ID())
	}
	if len(p.Files) != len(fileOrder)-1 {
		t.Errorf("files = %v", p.Files)
	}
	if want := BuilderID("0.1.0-dev", "f09c0fe"); p.BuilderID != want {
		t.Errorf("builder id = %s, want %s", p.BuilderID, want)
	}
	s := p.String()
	for _, want := range []string{
		"credit-risk@2.1.0", p.Plan.Digest, "needs avx2, fma",
		"credit_risk.onnx " + Digest([]byte("onnx bytes")) + " (revision 0123abcd)",
		"calib.npz", "vouch 0.1.0-dev (f09c0fe, go1.26.8)", "linux/amd64, AMD EPYC",
		"2026-03-01T12:00:00Z", "(2.5s)", `"precision": "fp32"`, "signed by    vouch-ci+",
		"plan.vouchplan", "timing.cache",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("provenance text lacks %q:\n%s", want, s)
		}
	}
}

// The signed statement is an in-toto Statement v1 with a SLSA v1 predicate
// laid out as the package documentation says.
func TestStatement(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	b := signedBundle(t, k)
	var env dsse.Envelope
	if err := json.Unmarshal(b.files[ProvenanceFile], &env); err != nil {
		t.Fatal(err)
	}
	if env.PayloadType != PayloadType || len(env.Signatures) != 1 || env.Signatures[0].KeyID != k.ID() {
		t.Fatalf("envelope = %+v", env)
	}
	payload, _ := base64.StdEncoding.DecodeString(env.Payload)
	var st struct {
		Type          string `json:"_type"`
		PredicateType string
		Subject       []struct {
			Name   string
			Digest map[string]string
		}
		Predicate struct {
			BuildDefinition struct {
				BuildType            string
				ExternalParameters   map[string]any
				InternalParameters   map[string]map[string]any
				ResolvedDependencies []struct {
					Name        string
					Digest      map[string]string
					Annotations map[string]string
				}
			}
			RunDetails struct {
				Builder    struct{ ID string }
				Metadata   struct{ StartedOn, FinishedOn string }
				Byproducts []struct {
					Name   string
					Digest map[string]string
				}
			}
		}
	}
	if err := json.Unmarshal(payload, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != "https://slsa.dev/provenance/v1" {
		t.Errorf("type %q, predicate type %q", st.Type, st.PredicateType)
	}
	var names []string
	for _, s := range st.Subject {
		names = append(names, s.Name)
		if "sha256:"+s.Digest["sha256"] != Digest(b.files[s.Name]) {
			t.Errorf("subject %s digest %s", s.Name, s.Digest)
		}
	}
	if !slicesEqual(names, fileOrder[:len(fileOrder)-1]) {
		t.Errorf("subjects = %v", names)
	}
	bd := st.Predicate.BuildDefinition
	if bd.BuildType != BuildType || bd.ExternalParameters["precision"] != "fp32" {
		t.Errorf("build definition = %+v", bd)
	}
	if bd.InternalParameters["environment"]["cpuModel"] != "AMD EPYC" {
		t.Errorf("internal parameters = %v", bd.InternalParameters)
	}
	if len(bd.ResolvedDependencies) != 2 || bd.ResolvedDependencies[0].Name != "credit_risk.onnx" ||
		bd.ResolvedDependencies[0].Annotations["revision"] != "0123abcd" || bd.ResolvedDependencies[1].Name != "calib.npz" {
		t.Errorf("resolved dependencies = %+v", bd.ResolvedDependencies)
	}
	rd := st.Predicate.RunDetails
	if rd.Builder.ID != BuilderID("0.1.0-dev", "f09c0fe") || rd.Metadata.StartedOn != "2026-03-01T12:00:00Z" {
		t.Errorf("run details = %+v", rd)
	}
	if len(rd.Byproducts) != 2 || rd.Byproducts[0].Name != BuildLogFile || rd.Byproducts[1].Name != ReportFile {
		t.Errorf("byproducts = %+v", rd.Byproducts)
	}
	// The payload is canonical: compact, sorted keys.
	again, err := canonicalJSON(payload)
	if err != nil || !bytes.Equal(again, payload) {
		t.Error("payload is not in canonical form")
	}
}

func TestVerifyRefuses(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	other := testKey(t, "mallory", 2)
	trusted := []*PublicKey{k.Public()}
	good := entries(signedBundle(t, k))
	plan := testContents().Plan

	t.Run("tampered plan", func(t *testing.T) {
		evil := append(append([]byte{}, plan...), '!')
		_, err := Verify(reread(t, replace(good, PlanFile, evil)), trusted)
		var dm *DigestMismatchError
		if !errors.As(err, &dm) || !errors.Is(err, ErrTampered) {
			t.Fatalf("err = %v, want a DigestMismatchError", err)
		}
		want := "bundle: plan.vouchplan has digest " + Digest(evil) + ", but the signed provenance says " + Digest(plan)
		if err.Error() != want {
			t.Errorf("err = %q\nwant  %q", err, want)
		}
	})
	t.Run("tampered report", func(t *testing.T) {
		_, err := Verify(reread(t, replace(good, ReportFile, []byte(`{"layers":2}`))), trusted)
		if err == nil || !strings.Contains(err.Error(), "report.json has digest "+Digest([]byte(`{"layers":2}`))) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		_, err := Verify(reread(t, good), []*PublicKey{other.Public()})
		var ue *UntrustedError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUntrusted) {
			t.Fatalf("err = %v, want an UntrustedError", err)
		}
		if want := "bundle: provenance.json is signed by " + k.ID() + ", which is not trusted"; err.Error() != want {
			t.Errorf("err = %q, want %q", err, want)
		}
	})
	t.Run("no trusted keys", func(t *testing.T) {
		if _, err := Verify(reread(t, good), nil); !errors.Is(err, ErrUntrusted) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unsigned", func(t *testing.T) {
		if _, err := Verify(testBundle(t), trusted); !errors.Is(err, ErrUnsigned) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("altered statement", func(t *testing.T) {
		var env dsse.Envelope
		json.Unmarshal(good[len(good)-1].data, &env)
		p, _ := base64.StdEncoding.DecodeString(env.Payload)
		p = bytes.Replace(p, []byte("fp32"), []byte("int8"), 1)
		env.Payload = base64.StdEncoding.EncodeToString(p)
		data, _ := json.Marshal(env)
		_, err := Verify(reread(t, replace(good, ProvenanceFile, data)), trusted)
		if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "signature by "+k.ID()+" does not verify") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("file not covered", func(t *testing.T) {
		b := testBundle(t)
		delete(b.files, ReportFile)
		if err := Sign(b, k); err != nil {
			t.Fatal(err)
		}
		es := append(entries(b), reg(ReportFile, []byte("{}")))
		_, err := Verify(reread(t, es), trusted)
		if !errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), "report.json ("+Digest([]byte("{}"))+") is not covered") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("file missing", func(t *testing.T) {
		_, err := Verify(reread(t, without(good, TimingCacheFile)), trusted)
		if !errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), "timing.cache (sha256:") || !strings.Contains(err.Error(), "missing from the bundle") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("not an envelope", func(t *testing.T) {
		if _, err := Verify(reread(t, replace(good, ProvenanceFile, []byte("[]"))), trusted); !errors.Is(err, ErrFormat) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("no signatures", func(t *testing.T) {
		var env dsse.Envelope
		json.Unmarshal(good[len(good)-1].data, &env)
		env.Signatures = nil
		data, _ := json.Marshal(env)
		if _, err := Verify(reread(t, replace(good, ProvenanceFile, data)), trusted); !errors.Is(err, ErrUnsigned) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestCoSign(t *testing.T) {
	k1 := testKey(t, "builder", 1)
	k2 := testKey(t, "reviewer", 2)
	b := signedBundle(t, k1)
	if err := Sign(b, k2); err != nil {
		t.Fatal(err)
	}
	if err := Sign(b, k2); err != nil { // idempotent
		t.Fatal(err)
	}
	p, err := Verify(b, []*PublicKey{k1.Public(), k2.Public()})
	if err != nil {
		t.Fatal(err)
	}
	if !slicesEqual(p.SignedBy, []string{k1.ID(), k2.ID()}) {
		t.Errorf("signed by %v", p.SignedBy)
	}
	if p, err := Verify(b, []*PublicKey{k2.Public()}); err != nil || !slicesEqual(p.SignedBy, []string{k2.ID()}) {
		t.Errorf("verify with the second key only: %v, %v", p, err)
	}

	// Changing a file and signing again replaces the stale envelope.
	b.files[ReportFile] = []byte(`{"layers":4}`)
	if err := Sign(b, k2); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(b, []*PublicKey{k1.Public()}); !errors.Is(err, ErrUntrusted) {
		t.Errorf("old signer still accepted after the contents changed: %v", err)
	}
	if _, err := Verify(b, []*PublicKey{k2.Public()}); err != nil {
		t.Error(err)
	}
}
