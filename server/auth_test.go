package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
)

const credFile = `# name roles credential
alice    infer         %s
auditor  audit         %s
ops      admin         %s
scoring  infer         cert:scoring-svc
`

func testCredentials(t *testing.T) *Credentials {
	t.Helper()
	text := credFile
	for _, tok := range []string{"alice-token", "auditor-token", "ops-token"} {
		text = strings.Replace(text, "%s", HashToken(tok), 1)
	}
	c, err := ParseCredentials(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseCredentialsErrors(t *testing.T) {
	for _, bad := range []string{
		"alice infer",
		"alice superuser sha256:" + strings.Repeat("0", 64),
		"alice infer sha256:1234",
		"alice infer plain:token",
		"alice infer cert:",
	} {
		if _, err := ParseCredentials(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestAuthHTTP(t *testing.T) {
	app := &memAppender{}
	s := New(Options{Credentials: testCredentials(t), Appender: app})
	if err := s.AddModel(&slowRunner{}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	body := `{"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","data":[1,2]}]}`
	for _, c := range []struct {
		method, path, token string
		code                int
	}{
		{"GET", "/v2/health/live", "", 200},
		{"GET", "/v2/health/ready", "", 200},
		{"GET", "/metrics", "", 200},
		{"GET", "/v2", "", 401},
		{"GET", "/v2", "wrong", 401},
		{"GET", "/v2", "alice-token", 200},
		{"GET", "/v2/models/slow", "auditor-token", 403},
		{"POST", "/v2/models/slow/infer", "", 401},
		{"POST", "/v2/models/slow/infer", "wrong", 401},
		{"POST", "/v2/models/slow/infer", "auditor-token", 403},
		{"POST", "/v2/models/slow/infer", "alice-token", 200},
		{"POST", "/v2/models/slow/infer", "ops-token", 200},
		{"POST", "/v2/repository/index", "alice-token", 403},
		{"POST", "/v2/repository/index", "ops-token", 200},
		{"POST", "/v2/repository/models/slow/load", "ops-token", 200},
	} {
		req, _ := http.NewRequest(c.method, hs.URL+c.path, strings.NewReader(body))
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%s %s as %q: %d, want %d (%s)", c.method, c.path, c.token, resp.StatusCode, c.code, raw)
			continue
		}
		if c.code == 401 || c.code == 403 {
			var v map[string]string
			if json.Unmarshal(raw, &v) != nil || v["error"] == "" || v["trace_id"] == "" {
				t.Errorf("%s %s: error body %s", c.method, c.path, raw)
			}
			if c.code == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
		}
	}
	// Every inference attempt, refused or served, left a record with its
	// principal.
	if app.len() != 5 {
		t.Fatalf("%d records for 5 inference requests", app.len())
	}
	if r := app.recs[2]; r.Code != 403 || r.Principal != "auditor" || r.Status != audit.StatusError {
		t.Errorf("403 record: %+v", r)
	}
	if r := app.recs[3]; r.Code != 200 || r.Principal != "alice" || r.InputDigest == "" {
		t.Errorf("200 record: %+v", r)
	}
}

// A client certificate verified by the TLS layer maps to a principal.
func TestAuthClientCertificate(t *testing.T) {
	ca, caKey := newCert(t, "test-ca", nil, nil)
	client, clientKey := newCert(t, "scoring-svc", ca, caKey)
	stranger, strangerKey := newCert(t, "stranger", ca, caKey)
	app := &memAppender{}
	s := New(Options{Credentials: testCredentials(t), Appender: app})
	if err := s.AddModel(&slowRunner{}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(s.Handler())
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	hs.TLS = &tls.Config{ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	hs.StartTLS()
	defer hs.Close()
	post := func(cert *x509.Certificate, key *ecdsa.PrivateKey) int {
		tr := hs.Client().Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.Certificates = []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: key}}
		c := &http.Client{Transport: tr}
		resp, err := c.Post(hs.URL+"/v2/models/slow/infer", "application/json",
			strings.NewReader(`{"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","data":[1,2]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(client, clientKey); code != 200 {
		t.Fatalf("mapped client certificate: %d", code)
	}
	if r := app.last(); r.Principal != "scoring" {
		t.Errorf("principal %q, want scoring", r.Principal)
	}
	if code := post(stranger, strangerKey); code != 403 {
		t.Fatalf("unmapped client certificate: %d, want 403", code)
	}
	if r := app.last(); r.Principal != "cert:stranger" {
		t.Errorf("principal %q, want cert:stranger", r.Principal)
	}
}

func newCert(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	} else {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

// When the audit log refuses a record, the request is refused too.
func TestAuditFailureRefuses(t *testing.T) {
	app := &memAppender{fail: errors.New("disk full")}
	s := New(Options{Appender: app})
	if err := s.AddModel(&slowRunner{}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	resp, err := http.Post(hs.URL+"/v2/models/slow/infer", "application/json",
		strings.NewReader(`{"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","data":[1,2]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
}
