package bundle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	privPath, pubPath := filepath.Join(dir, "ci.key"), filepath.Join(dir, "ci.pub")
	pub, err := Keygen(KeygenOptions{Name: "vouch-ci", PrivateKeyPath: privPath, PublicKeyPath: pubPath})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(privPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %04o, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(privPath)
	if !strings.HasPrefix(string(data), "PRIVATE+KEY+vouch-ci+") {
		t.Errorf("private key file = %q", data)
	}
	pubText, _ := os.ReadFile(pubPath)
	if strings.TrimSpace(string(pubText)) != pub.String() {
		t.Errorf("public key file %q, returned %q", pubText, pub)
	}
	// The public key is a signed-note verifier key.
	v, err := note.NewVerifier(pub.String())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pub.ID(), v.Name()+"+") || len(pub.ID()) != len("vouch-ci+")+8 {
		t.Errorf("ID = %q", pub.ID())
	}
	priv, err := ReadPrivateKey(privPath)
	if err != nil {
		t.Fatal(err)
	}
	if priv.Public().String() != pub.String() || priv.ID() != pub.ID() {
		t.Error("private key does not match the public key")
	}
	for _, s := range []string{pub.String(), pubPath} {
		got, err := ReadPublicKey(s)
		if err != nil || got.String() != pub.String() {
			t.Errorf("ReadPublicKey(%q) = %v, %v", s, got, err)
		}
	}

	// No overwriting without Force.
	if _, err := Keygen(KeygenOptions{Name: "vouch-ci", PrivateKeyPath: privPath}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("overwrite: err = %v", err)
	}
	if _, err := Keygen(KeygenOptions{Name: "vouch-ci", PrivateKeyPath: privPath, Force: true}); err != nil {
		t.Errorf("Force: %v", err)
	}
	if _, err := Keygen(KeygenOptions{Name: "bad name", PrivateKeyPath: filepath.Join(dir, "x")}); err == nil {
		t.Error("a name with a space was accepted")
	}

	// A private key others can read is refused.
	os.Chmod(privPath, 0o644)
	if _, err := ReadPrivateKey(privPath); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable key: err = %v", err)
	}
}

func TestParseKeysRefuse(t *testing.T) {
	_, k, err := GenerateKey(nil, "k")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "k+00000000+AAAA", k.Public().String() + "x", "PRIVATE+KEY+k+00000000+AAAA"} {
		if _, err := ParsePublicKey(s); err == nil {
			t.Errorf("ParsePublicKey(%q) succeeded", s)
		}
	}
	for _, s := range []string{"", k.Public().String(), "PRIVATE+KEY+k+00000000+AAAA"} {
		_, err := ParsePrivateKey(s)
		if err == nil {
			t.Errorf("ParsePrivateKey(%q) succeeded", s)
		} else if !strings.HasPrefix(err.Error(), "bundle: ") {
			t.Errorf("error without prefix: %v", err)
		}
	}
	if _, err := ReadPublicKey(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("ReadPublicKey of a missing file succeeded")
	}
}
