package server

import (
	"bufio"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Roles a principal may hold. RoleAdmin implies the others.
const (
	RoleInfer = "infer" // inference, model and server metadata
	RoleAudit = "audit" // reading audit data
	RoleAdmin = "admin" // the model repository (load, unload, index)
)

// Principal is an authenticated caller.
type Principal struct {
	Name  string
	Roles []string
}

// Has reports whether p holds role (admin holds every role).
func (p *Principal) Has(role string) bool {
	return p != nil && (slices.Contains(p.Roles, role) || slices.Contains(p.Roles, RoleAdmin))
}

// Credentials map bearer-token hashes and client-certificate names to
// principals. Tokens are never stored, only their SHA-256.
//
// The credentials file has one principal a line, '#' comments and blank
// lines ignored:
//
//	NAME  ROLES  CREDENTIAL
//
// ROLES is a comma-separated subset of infer, audit, admin. CREDENTIAL is
// either "sha256:" followed by the 64 hex digits of SHA-256(token) (compute
// it with `printf %s "$TOKEN" | sha256sum`), or "cert:" followed by the
// subject common name of a client certificate that the TLS layer verified.
type Credentials struct {
	tokens map[[32]byte]*Principal
	certs  map[string]*Principal
}

// HashToken returns the credential-file form of a bearer token.
func HashToken(token string) string {
	s := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(s[:])
}

// LoadCredentials reads a credentials file.
func LoadCredentials(path string) (*Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	defer f.Close()
	c, err := ParseCredentials(f)
	if err != nil {
		return nil, fmt.Errorf("server: %s: %w", path, err)
	}
	return c, nil
}

// ParseCredentials parses the credentials file format.
func ParseCredentials(r io.Reader) (*Credentials, error) {
	c := &Credentials{tokens: map[[32]byte]*Principal{}, certs: map[string]*Principal{}}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		f := strings.Fields(s)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want NAME ROLES CREDENTIAL, got %d fields", line, len(f))
		}
		p := &Principal{Name: f[0]}
		for _, role := range strings.Split(f[1], ",") {
			switch role {
			case RoleInfer, RoleAudit, RoleAdmin:
				p.Roles = append(p.Roles, role)
			default:
				return nil, fmt.Errorf("line %d: unknown role %q (want infer, audit or admin)", line, role)
			}
		}
		switch kind, val, _ := strings.Cut(f[2], ":"); kind {
		case "sha256":
			b, err := hex.DecodeString(val)
			if err != nil || len(b) != 32 {
				return nil, fmt.Errorf("line %d: credential must be sha256: and 64 hex digits", line)
			}
			if _, dup := c.tokens[[32]byte(b)]; dup {
				return nil, fmt.Errorf("line %d: token hash given twice", line)
			}
			c.tokens[[32]byte(b)] = p
		case "cert":
			if val == "" {
				return nil, fmt.Errorf("line %d: cert: needs a common name", line)
			}
			c.certs[val] = p
		default:
			return nil, fmt.Errorf("line %d: credential must start with sha256: or cert:", line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// authResult is what authentication concluded about a request.
type authResult struct {
	p    *Principal
	code int    // 0, 401 or 403
	msg  string // why not
}

// authenticate identifies a caller from an Authorization header value and
// the verified client certificate chain, if any. With no credentials
// configured every caller is "anonymous" with the infer role only (the
// server's Options.AnonymousRoles may grant more).
func (c *Credentials) authenticate(authz string, peer []*x509.Certificate) authResult {
	if c == nil {
		return authResult{p: &Principal{Name: "anonymous", Roles: []string{RoleInfer}}}
	}
	if authz != "" {
		scheme, tok, ok := strings.Cut(authz, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return authResult{code: 401, msg: "authorization must be a bearer token"}
		}
		p, ok := c.tokens[sha256.Sum256([]byte(strings.TrimSpace(tok)))]
		if !ok {
			return authResult{code: 401, msg: "invalid bearer token"}
		}
		return authResult{p: p}
	}
	if len(peer) > 0 {
		cn := peer[0].Subject.CommonName
		if p, ok := c.certs[cn]; ok {
			return authResult{p: p}
		}
		return authResult{p: &Principal{Name: "cert:" + cn}, code: 403, msg: fmt.Sprintf("client certificate %q is not mapped to a principal", cn)}
	}
	return authResult{code: 401, msg: "authentication required: send Authorization: Bearer TOKEN"}
}

// Authenticate identifies a caller, as the API does, from an Authorization
// header value ("Bearer TOKEN", or "") and the verified client certificate
// chain (nil without mTLS). It returns the principal, or an error saying why
// not (the principal is then set only for an unmapped certificate, named
// "cert:CN"). For front ends such as the audit console, which take a token
// in a form.
func (c *Credentials) Authenticate(authz string, peer []*x509.Certificate) (*Principal, error) {
	a := c.authenticate(authz, peer)
	if a.code != 0 {
		return a.p, fmt.Errorf("server: %s", a.msg)
	}
	return a.p, nil
}

// HasRole reports whether some principal holds role (admin holds every
// role).
func (c *Credentials) HasRole(role string) bool {
	if c == nil {
		return false
	}
	for _, p := range c.tokens {
		if p.Has(role) {
			return true
		}
	}
	for _, p := range c.certs {
		if p.Has(role) {
			return true
		}
	}
	return false
}

// authorize checks a role after authenticate.
func (a authResult) authorize(role string) authResult {
	if a.code != 0 {
		return a
	}
	if !a.p.Has(role) {
		return authResult{p: a.p, code: 403, msg: fmt.Sprintf("principal %q lacks role %q", a.p.Name, role)}
	}
	return a
}

func (a authResult) name() string {
	if a.p == nil {
		return ""
	}
	return a.p.Name
}
