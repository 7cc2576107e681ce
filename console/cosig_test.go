package console

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/vouchml/vouch/audit"
)

// TestSignaturesVerifyCosignatureV1: the decision page verifies a
// witness's C2SP cosignature/v1 cosignature (litewitness's kind), built
// here from the spec, beside the log's own signature; a cosignature over
// another checkpoint is listed unverified.
func TestSignaturesVerifyCosignatureV1(t *testing.T) {
	skey, vkey, err := audit.GenerateKey("vouch.test/console")
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	body := "vouch.test/console\n3\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n"
	signed, err := note.Sign(&note.Note{Text: body}, signer)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	const name = "witness.test"
	h := sha256.New()
	h.Write([]byte(name + "\n\x04"))
	h.Write(pub)
	id := h.Sum(nil)[:4]
	wkey := name + "+" + hex.EncodeToString(id) + "+" + base64.StdEncoding.EncodeToString(append([]byte{0x04}, pub...))
	cosign := func(text string) string {
		const ts = 1764633600
		msg := "cosignature/v1\ntime " + strconv.Itoa(ts) + "\n" + text
		sig := binary.BigEndian.AppendUint64(append([]byte{}, id...), ts)
		sig = append(sig, ed25519.Sign(priv, []byte(msg))...)
		return "— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
	}
	c := &Console{opt: Options{LogKeys: []string{vkey}, WitnessKeys: []string{wkey}}}
	sigs := c.signatures(append(signed, cosign(body)...))
	if len(sigs) != 2 || !sigs[0].Verified || !sigs[1].Verified {
		t.Fatalf("signatures %+v: want the log's and the witness's, both verified", sigs)
	}
	logs := 0
	for _, s := range sigs {
		if s.Log {
			logs++
		}
	}
	if logs != 1 {
		t.Errorf("%d signatures marked as the log's", logs)
	}
	forged := c.signatures(append(signed, cosign("vouch.test/console\n4\n"+base64.StdEncoding.EncodeToString(make([]byte, 32))+"\n")...))
	ok := 0
	for _, s := range forged {
		if s.Verified {
			ok++
		}
	}
	if ok != 1 {
		t.Errorf("a cosignature of another checkpoint verified: %+v", forged)
	}
}
