package console

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/index"
	"github.com/vouchml/vouch/server"
)

// certFor makes a self-signed client certificate with common name cn.
func certFor(t *testing.T, cn string) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}, c
}

// Sign-in with a verified client certificate over TLS: the session cookie
// is Secure, and the access records name the certificate's principal.
func TestSigninClientCertificate(t *testing.T) {
	ctx := context.Background()
	l := openLog(t, audit.Async)
	defer l.Close(ctx)
	creds, err := server.ParseCredentials(strings.NewReader("officer audit cert:officer-1\nscorer infer cert:scorer-1\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Log: l, Appender: l, Credentials: creds, LogKeys: l.VerifierKeys()})
	if err != nil {
		t.Fatal(err)
	}
	officer, officerX := certFor(t, "officer-1")
	scorer, scorerX := certFor(t, "scorer-1")
	pool := x509.NewCertPool()
	pool.AddCert(officerX)
	pool.AddCert(scorerX)
	srv := httptest.NewUnstartedServer(c.Handler())
	srv.TLS = &tls.Config{ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	defer srv.Close()

	signin := func(cert tls.Certificate) (*http.Response, string) {
		tr := srv.Client().Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
		cl := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := cl.Get(srv.URL + "/console/signin")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(page), "Sign in with certificate") {
			t.Fatalf("the sign-in page offers no certificate sign-in:\n%s", page)
		}
		m := csrfRE.FindStringSubmatch(string(page))
		req, _ := http.NewRequest("POST", srv.URL+"/console/signin", strings.NewReader(url.Values{"csrf": {m[1]}, "use_cert": {"1"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for _, ck := range resp.Cookies() {
			req.AddCookie(ck)
		}
		resp, err = cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, _ := signin(officer)
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == cookieSession && ck.Value != "" {
			session = ck
		}
	}
	if resp.StatusCode != http.StatusSeeOther || session == nil || !session.Secure || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("certificate sign-in: %d, cookie %+v", resp.StatusCode, session)
	}
	resp, body := signin(scorer)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `principal &#34;scorer&#34; lacks role &#34;audit&#34;`) {
		t.Fatalf("a certificate without the audit role: %d %s", resp.StatusCode, body)
	}
	seen := map[string]bool{}
	err = l.Query(ctx, indexFilterAccess, func(r indexRow) error {
		b, err := l.Entry(r.Index)
		if err != nil {
			return err
		}
		rec, err := audit.Parse(b)
		if err != nil {
			return err
		}
		seen[rec.Principal+" "+rec.Access.Action+" "+rec.Status] = true
		return nil
	})
	if err != nil || !seen["officer console-signin ok"] || !seen["scorer console-signin error"] {
		t.Fatalf("access records: %v %v", seen, err)
	}
}

// FuzzSearchQuery: any query string gives a filter or an error, never a
// panic, and a parsed cursor survives its round trip.
func FuzzSearchQuery(f *testing.F) {
	f.Add("model=m&since=2026-01-01&until=2026-01-02T10:00&before=1764582000123456789.42")
	f.Add("trace=ABC&digest=00&status=error&kind=all")
	f.Add("before=.&since=2026-13-45")
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		form, flt, err := parseSearch(v)
		if err != nil {
			return
		}
		if !form.Before.Time.IsZero() {
			back, err := parseCursor(formatCursor(form.Before))
			if err != nil || back != flt.Before {
				t.Fatalf("cursor %v round trip: %v %v", form.Before, back, err)
			}
		}
	})
}

type indexRow = index.Row

var indexFilterAccess = index.Filter{Kind: audit.KindAccess}

// A view the audit log cannot record is refused (503), and shows nothing.
func TestViewRefusedWhenUnrecorded(t *testing.T) {
	ctx := context.Background()
	l := openLog(t, audit.Durable)
	creds, _ := server.ParseCredentials(strings.NewReader("auditor audit " + server.HashToken("t") + "\n"))
	c, err := New(Options{Log: l, Appender: l, Credentials: creds, LogKeys: l.VerifierKeys()})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	session := signIn(t, h)
	l.Close(ctx) // the log now refuses appends
	for _, page := range []string{"/console/", "/console/decision/0123456789abcdef0123456789abcdef", "/console/log", "/console/models"} {
		req := httptest.NewRequest("GET", page, nil)
		req.AddCookie(session)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "cannot record this view") || strings.Contains(rec.Body.String(), "<table") {
			t.Errorf("%s with the log closed: %d\n%s", page, rec.Code, rec.Body.String())
		}
	}
}

// The search pages through the index newest first: every decision once.
func TestSearchPaging(t *testing.T) {
	ctx := context.Background()
	l := openLog(t, audit.Async)
	defer l.Close(ctx)
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	var traces []string
	for i := range 5 {
		tr := fmt.Sprintf("%032x", 0xabc0+i)
		traces = append(traces, tr)
		// two records share a time: the log index breaks the tie
		if _, _, err := l.Append(ctx, &audit.Record{TraceID: tr, Time: t0.Add(time.Duration(i/2) * time.Second), Model: "m", ModelVersion: "1",
			Principal: "app", Status: audit.StatusOK, OutputLabel: "approve"}); err != nil {
			t.Fatal(err)
		}
	}
	creds, _ := server.ParseCredentials(strings.NewReader("auditor audit " + server.HashToken("t") + "\n"))
	c, err := New(Options{Log: l, Appender: l, Credentials: creds, LogKeys: l.VerifierKeys(), PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	session := signIn(t, h)
	link := regexp.MustCompile(`href="(/console/\?[^"]*before=[^"]*)" rel="next"`)
	row := regexp.MustCompile(`href="/console/decision/([0-9a-f]{32})"`)
	var seen []string
	next := "/console/?model=m"
	for pages := 0; next != ""; pages++ {
		if pages > 3 {
			t.Fatalf("more pages than rows: %v", seen)
		}
		req := httptest.NewRequest("GET", strings.ReplaceAll(next, "&amp;", "&"), nil)
		req.AddCookie(session)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", next, rec.Code, rec.Body.String())
		}
		for _, m := range row.FindAllStringSubmatch(rec.Body.String(), -1) {
			seen = append(seen, m[1])
		}
		next = ""
		if m := link.FindStringSubmatch(rec.Body.String()); m != nil {
			next = m[1]
		}
	}
	want := []string{traces[4], traces[3], traces[2], traces[1], traces[0]}
	if strings.Join(seen, " ") != strings.Join(want, " ") {
		t.Fatalf("pages gave %v, want %v", seen, want)
	}
}

// signIn signs in with token "t" and returns the session cookie.
func signIn(t testing.TB, h http.Handler) *http.Cookie {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/console/signin", nil))
	m := csrfRE.FindStringSubmatch(rec.Body.String())
	req := httptest.NewRequest("POST", "/console/signin", strings.NewReader(url.Values{"csrf": {m[1]}, "token": {"t"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, ck := range rec.Result().Cookies() {
		req.AddCookie(ck)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == cookieSession && ck.Value != "" {
			return ck
		}
	}
	t.Fatalf("sign-in: %d %s", rec.Code, rec.Body.String())
	return nil
}

// openLog opens a fresh transparency log in a temporary directory.
func openLog(t testing.TB, d audit.Durability) *audit.Log {
	t.Helper()
	dir := t.TempDir()
	skey, err := audit.LoadOrCreateKey(dir, "test.local/audit")
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.Open(context.Background(), dir, audit.Options{SignerKey: skey, Durability: d})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
