package audit

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func v2Record() *Record {
	p0, p1 := 0.8125, 0.25
	return &Record{
		TraceID:      "0af7651916cd43dd8448eb211c80319c",
		Time:         time.Date(2026, 12, 1, 21, 0, 0, 5000, time.UTC),
		Model:        "credit_xgb",
		ModelVersion: "1",
		InputDigest:  "sha256:1ecc0bdc29fb96d249c058166db012fe2c554016303a540d2ec4be6e05c48f04",
		OutputLabel:  "decline",
		Confidence:   &p0,
		Code:         200,
		Rows:         3,
		Decisions: []Decision{
			{Label: "decline", Confidence: &p0, Target: 1, Reasons: []Reason{
				{Feature: "late_payments", Value: 4, Contribution: 1.25},
				{Feature: "income", Value: 21000.5, Contribution: -0.0625},
				{Feature: "debt_ratio", Value: math.NaN(), Contribution: 1e-7},
			}},
			{Label: "approve", Confidence: &p1},
		},
		DecisionsDigest: "sha256:" + strings.Repeat("ab", 32),
		Explanation: &Explanation{Method: "tree_shap", Covers: "background", Background: "sha256:" + strings.Repeat("cd", 32),
			Score: "margin", Features: 8, Digest: "sha256:" + strings.Repeat("ef", 32)},
	}
}

// The canonical encoding of a schema version 2 record: a golden file
// (go test -run TestCanonicalV2 -update rewrites it), the encoding is
// sorted-key JSON, and it round-trips through Parse.
func TestCanonicalV2(t *testing.T) {
	got, err := v2Record().MarshalCanonical()
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/record_v2.golden"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("canonical v2:\n got %s\nwant %s", got, want)
	}
	for _, frag := range []string{`"schema_version":2`, `"rows":3`, `"direction":"decreases"`, `"contribution":1e-7`,
		`{"contribution":1e-7,"direction":"increases","feature":"debt_ratio"}`, `"target":1`, `"covers":"background"`} {
		if !bytes.Contains(got, []byte(frag)) {
			t.Errorf("encoding lacks %s", frag)
		}
	}
	back, err := Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if back.SchemaVersion != 2 || len(back.Decisions) != 2 || len(back.Decisions[0].Reasons) != 3 || !math.IsNaN(back.Decisions[0].Reasons[2].Value) {
		t.Fatalf("parsed %+v", back)
	}
	again, _ := back.MarshalCanonical()
	if !bytes.Equal(again, got) {
		t.Fatalf("round trip:\n%s", again)
	}
}

// A version 1 record parses as version 1 and re-encodes to its own bytes
// (its leaf hash does not change); it cannot carry version 2 members.
func TestV1StillParses(t *testing.T) {
	const v1 = `{"code":200,"confidence":0.96,"input_digest":"sha256:1ecc0bdc29fb96d249c058166db012fe2c554016303a540d2ec4be6e05c48f04",` +
		`"kind":"inference","model":"credit","output_label":"decline","schema_version":1,"status":"ok","time":"2025-01-02T02:04:05.12Z",` +
		`"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`
	r, err := Parse([]byte(v1))
	if err != nil {
		t.Fatal(err)
	}
	if r.SchemaVersion != 1 {
		t.Fatalf("schema version %d", r.SchemaVersion)
	}
	again, err := r.MarshalCanonical()
	if err != nil || string(again) != v1 {
		t.Fatalf("re-encoded %s (%v)", again, err)
	}
	r.Rows = 1
	if _, err := r.MarshalCanonical(); !errors.Is(err, ErrRecord) {
		t.Fatalf("v1 record with rows: %v", err)
	}
	withRows := strings.Replace(v1, `"schema_version":1`, `"rows":1,"schema_version":1`, 1)
	if _, err := Parse([]byte(withRows)); !errors.Is(err, ErrRecord) {
		t.Fatalf("v1 entry with rows parsed: %v", err)
	}
}

func TestV2Rejects(t *testing.T) {
	good, _ := v2Record().MarshalCanonical()
	for name, b := range map[string]string{
		"direction lies": strings.Replace(string(good), `"direction":"decreases"`, `"direction":"increases"`, 1),
		"unknown reason": strings.Replace(string(good), `"feature":"income"`, `"feature":"income","why":1`, 1),
		"bad method":     strings.Replace(string(good), `"method":"tree_shap"`, `"method":"magic"`, 1),
		"nan value":      strings.Replace(string(good), `"value":4`, `"value":NaN`, 1),
		"zero target":    strings.Replace(string(good), `,"target":1`, `,"target":0`, 1),
	} {
		if b == string(good) {
			t.Fatalf("%s: test input unchanged", name)
		}
		if _, err := Parse([]byte(b)); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: Parse = %v, want ErrRecord", name, err)
		}
	}
	inf := math.Inf(1)
	many := make([]Reason, MaxReasons+1)
	for name, mod := range map[string]func(r *Record){
		"too many rows":     func(r *Record) { r.Decisions = make([]Decision, MaxDecisions+1); r.Rows = MaxDecisions + 1 },
		"more than rows":    func(r *Record) { r.Rows = 1 },
		"too many reasons":  func(r *Record) { r.Decisions[0].Reasons = many },
		"inf contribution":  func(r *Record) { r.Decisions[0].Reasons[0].Contribution = inf },
		"inf confidence":    func(r *Record) { r.Decisions[1].Confidence = &inf },
		"long feature":      func(r *Record) { r.Decisions[0].Reasons[0].Feature = strings.Repeat("x", MaxFeatureName+1) },
		"no digest":         func(r *Record) { r.DecisionsDigest = "" },
		"explanation empty": func(r *Record) { r.Explanation.Digest = "" },
	} {
		r := v2Record()
		mod(r)
		if _, err := r.MarshalCanonical(); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Worked values of the two digests: any change of their encodings changes
// these, and a verifier written elsewhere can check itself against them.
func TestDecisionAndContributionDigests(t *testing.T) {
	c := 0.75
	d := DecisionsDigest([]Decision{{Label: "decline", Confidence: &c}, {Label: "approve"}})
	if d2 := DecisionsDigest([]Decision{{Label: "decline", Confidence: &c}}); d == d2 {
		t.Fatal("decisions digest ignores a row")
	}
	cd, err := ContributionsDigest(2, []int{0, 1}, []float64{1, -2, 0.5, 0, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	neg, _ := ContributionsDigest(2, []int{0, 1}, []float64{1, -2, 0.5, math.Copysign(0, -1), 3, 4})
	if cd == neg {
		t.Fatal("contributions digest does not see the sign of zero")
	}
	if _, err := ContributionsDigest(2, []int{0}, []float64{1, 2}); err == nil {
		t.Fatal("short vector accepted")
	}
	for _, c := range []struct{ got, want string }{
		{d, wantDecisionsDigest}, {cd, wantContributionsDigest},
	} {
		if c.got != c.want {
			t.Errorf("digest %s, want %s", c.got, c.want)
		}
	}
}

// Computed by Python's hashlib and struct from the encodings documented on
// DecisionsDigest and ContributionsDigest.
const (
	wantDecisionsDigest     = "sha256:5094f9867ede525220628952702dd51024e1569000ec6062f0af16c0950a1ca4"
	wantContributionsDigest = "sha256:dee8cac62a9f09988c1f66d3da88ab6ed9a65041662672997b8410e4efdf5d61"
)
