package bundle

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"
	"golang.org/x/mod/sumdb/note"
)

// An envelope made directly with go-securesystemslib, with its own keyid
// scheme and its own JSON layout of the statement, verifies against the
// same Ed25519 key given to vouch as a signed-note verifier key.
func TestInteropSecureSystemsLibSigner(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(testRand(7))
	if err != nil {
		t.Fatal(err)
	}
	keyJSON := fmt.Sprintf(`{"keytype":"ed25519","scheme":"ed25519","keyid_hash_algorithms":["sha256","sha512"],"keyval":{"public":%q,"private":%q}}`,
		hex.EncodeToString(pub), hex.EncodeToString(priv.Seed()))
	key, err := signerverifier.LoadKeyFromSSLibBytes([]byte(keyJSON))
	if err != nil {
		t.Fatal(err)
	}
	if key.KeyID == "" {
		t.Fatal("securesystemslib computed no keyid")
	}
	sv, err := signerverifier.NewED25519SignerVerifierFromSSLibKey(key)
	if err != nil {
		t.Fatal(err)
	}

	b := testBundle(t)
	payload, err := b.statement()
	if err != nil {
		t.Fatal(err)
	}
	var v any
	json.Unmarshal(payload, &v)
	other, _ := json.MarshalIndent(v, "", "    ") // another tool's layout
	signer, err := dsse.NewEnvelopeSigner(sv)
	if err != nil {
		t.Fatal(err)
	}
	env, err := signer.SignPayload(context.Background(), PayloadType, other)
	if err != nil {
		t.Fatal(err)
	}
	envJSON, _ := json.Marshal(env)
	b.files[ProvenanceFile] = envJSON
	b = reread(t, entries(b))

	vkey, err := note.NewEd25519VerifierKey("external-ci", pub)
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := ParsePublicKey(vkey)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Verify(b, []*PublicKey{trusted})
	if err != nil {
		t.Fatalf("Verify of a go-securesystemslib envelope (keyid %s): %v", key.KeyID, err)
	}
	if !slicesEqual(p.SignedBy, []string{trusted.ID()}) {
		t.Errorf("signed by %v", p.SignedBy)
	}
	// And the other tool's keyid is what an untrusted error names.
	_, err = Verify(b, []*PublicKey{testKey(t, "x", 3).Public()})
	if want := "bundle: provenance.json is signed by " + key.KeyID + ", which is not trusted"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

// vouch's envelopes verify with go-securesystemslib's own verifier.
func TestInteropSecureSystemsLibVerifier(t *testing.T) {
	k := testKey(t, "vouch-ci", 1)
	b := signedBundle(t, k)
	key := &signerverifier.SSLibKey{
		KeyType: "ed25519", Scheme: "ed25519", KeyID: k.ID(),
		KeyVal: signerverifier.KeyVal{Public: hex.EncodeToString(k.Public().Ed25519())},
	}
	sv, err := signerverifier.NewED25519SignerVerifierFromSSLibKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := dsse.NewEnvelopeVerifier(sv)
	if err != nil {
		t.Fatal(err)
	}
	var env dsse.Envelope
	if err := json.Unmarshal(b.files[ProvenanceFile], &env); err != nil {
		t.Fatal(err)
	}
	accepted, body, err := ev.VerifyAndDecode(context.Background(), &env)
	if err != nil || len(accepted) != 1 || accepted[0].KeyID != k.ID() {
		t.Fatalf("go-securesystemslib refused vouch's envelope: %v %v", accepted, err)
	}
	want, _ := b.statement()
	if !bytes.Equal(body, want) {
		t.Error("payload differs")
	}
	if env.Payload != base64.StdEncoding.EncodeToString(want) {
		t.Error("payload is not standard base64")
	}
}
