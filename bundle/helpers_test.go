package bundle

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// testRand is a deterministic randomness source for key generation.
type testRand byte

func (r testRand) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r) + byte(i)
	}
	return len(p), nil
}

func testKey(t testing.TB, name string, seed byte) *PrivateKey {
	t.Helper()
	_, k, err := GenerateKey(testRand(seed), name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testMetadata() Metadata {
	return Metadata{
		Model:       Model{Name: "credit-risk", Version: "2.1.0"},
		Source:      Artifact{Name: "credit_risk.onnx", Digest: Digest([]byte("onnx bytes")), Revision: "0123abcd"},
		Calibration: &Artifact{Name: "calib.npz", Digest: Digest([]byte("calibration data"))},
		Plan:        PlanInfo{FormatVersion: "1", RequiredCPUFeatures: []string{"avx2", "fma"}},
		Options:     json.RawMessage(`{"precision":"fp32","batch":[1,8],"passes":["fold-constants","fuse-gemm"]}`),
		Environment: Environment{
			OS: "linux", Arch: "amd64", CPUModel: "AMD EPYC", CPUFeatures: []string{"avx", "avx2", "fma", "sse2"},
			GoVersion: "go1.26.8", VouchVersion: "0.1.0-dev", VouchRevision: "f09c0fe",
		},
		StartedOn:  time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		FinishedOn: time.Date(2026, 3, 1, 12, 0, 2, 500e6, time.UTC),
	}
}

func testContents() Contents {
	return Contents{
		Plan:             []byte("VOUCHPLAN 1\nlayers...\x00\x01\x02"),
		BuildLog:         []byte(`{"pass":"fuse-gemm","event":"fused"}` + "\n"),
		Report:           []byte(`{"layers":3}`),
		TimingCache:      []byte("timing"),
		CalibrationCache: []byte("calib cache"),
		Explain:          []byte(`{"version":1,"features":["income"]}`),
	}
}

func testBundle(t testing.TB) *Bundle {
	t.Helper()
	b, err := New(testMetadata(), testContents())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func signedBundle(t testing.TB, k *PrivateKey) *Bundle {
	t.Helper()
	b := testBundle(t)
	if err := Sign(b, k); err != nil {
		t.Fatal(err)
	}
	return b
}

// entry is one raw tar entry for hand-made (hostile) archives.
type entry struct {
	hdr  tar.Header
	data []byte
}

func reg(name string, data []byte) entry {
	return entry{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data))}, data}
}

// entries returns b's files as raw entries, in archive order.
func entries(b *Bundle) []entry {
	var es []entry
	for _, n := range b.Names() {
		es = append(es, reg(n, b.files[n]))
	}
	return es
}

func makeTar(t testing.TB, es []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if len(e.data) > 0 {
			if _, err := tw.Write(e.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// replace returns es with the data of the named entry replaced.
func replace(es []entry, name string, data []byte) []entry {
	out := make([]entry, 0, len(es))
	for _, e := range es {
		if e.hdr.Name == name {
			e = reg(name, data)
		}
		out = append(out, e)
	}
	return out
}

func without(es []entry, name string) []entry {
	var out []entry
	for _, e := range es {
		if e.hdr.Name != name {
			out = append(out, e)
		}
	}
	return out
}
