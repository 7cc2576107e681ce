package bundle

import (
	"bytes"
	"testing"
)

// FuzzRead feeds arbitrary bytes to Read and Verify: they must return an
// error or a bundle, never panic, and a bundle that reads must re-encode to
// bytes that read back to the same files.
func FuzzRead(f *testing.F) {
	k := testKey(f, "vouch-ci", 1)
	good := signedBundle(f, k)
	enc := good.Encode()
	f.Add(enc)
	f.Add(enc[:len(enc)/2])
	f.Add(testBundle(f).Encode())
	es := entries(good)
	f.Add(makeTar(f, append(es, reg("../x", []byte("x")))))
	f.Add(makeTar(f, append(es, reg(PlanFile, []byte("x")))))
	f.Add(makeTar(f, replace(es, PlanFile, []byte("tampered"))))
	f.Add(makeTar(f, replace(es, ProvenanceFile, []byte(`{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"keyid":"x","sig":"AAAA"}]}`))))
	trusted := []*PublicKey{k.Public()}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Read(bytes.NewReader(data), Limits{MaxFileSize: 1 << 20, MaxTotalSize: 4 << 20})
		if err != nil {
			return
		}
		Verify(b, trusted)
		Check(b, CheckOptions{PlanFormats: []string{"1"}, CPUFeatures: []string{}, VouchVersion: "0.1.0"})
		again, err := Read(bytes.NewReader(b.Encode()), Limits{})
		if err != nil {
			t.Fatalf("re-encoded bundle does not read: %v", err)
		}
		for _, n := range b.Names() {
			x, _ := again.File(n)
			if !bytes.Equal(x, b.files[n]) {
				t.Fatalf("%s changed in the round trip", n)
			}
		}
	})
}
