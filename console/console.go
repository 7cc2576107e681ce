// Package console is vouch's audit console: web pages for the people who
// answer the regulator. From one search page they find a decision, read what
// the model saw and why it decided, prove that the record is in the
// transparency log, replay it on the exact signed plan, and hand over signed
// reports and exports.
//
// # Pages (all under /console/)
//
//	GET  /console/                      search: time range, model, version, outcome, principal, trace id, input digest; paged
//	GET  /console/decision/{trace}      the record in plain words, the captured input, reasons, inclusion proof, cosignatures
//	POST /console/replay/{trace}        runs the replay; the page shows VERIFIED or MISMATCH
//	GET  /console/replay/{id}/{file}    report.json, report.dsse.json, report.html of a replay run in this session
//	GET  /console/log                   log size, checkpoint age, witnesses, exporter lag, last verification
//	POST /console/log/verify            verifies the whole log now
//	GET  /console/models                registry versions, aliases and their history, provenance, build report, graph (SVG)
//	GET  /console/export                the regulator export form; POST returns a zip: signed JSON lines with proofs, CSV
//	GET  /console/signin, POST          sign in with a bearer token or the verified client certificate
//	POST /console/signout
//	GET  /console/static/style.css      the stylesheet (embedded; the pages fetch nothing else)
//
// # Sessions and safety
//
// Sign-in takes the same bearer tokens and mTLS principals as the API
// (server.Credentials); only principals with the audit or admin role get in,
// and a refused sign-in is recorded in the audit log too. A session is a
// random 256-bit id in a cookie (HttpOnly, SameSite=Strict, Secure when the
// request came over TLS), held in memory for at most Options.SessionTTL. The
// id is minted at sign-in and never taken from the client, so a fixed cookie
// planted before sign-in is worthless (no session fixation). Every form that
// changes anything is a POST carrying the session's CSRF token, compared in
// constant time; the sign-in form carries the token of a pre-session cookie.
// GET requests change nothing but the access trail; a cross-site GET carries
// no cookie (SameSite=Strict) and lands on the sign-in page.
//
// Every page that shows records or inputs first appends an access record
// (audit.Record of kind "access" naming the viewer, the page as the action
// and what was asked as the target) and renders only once the log took it;
// when it cannot, the page is refused with 503.
//
// The pages are html/template, server-rendered, with no script at all; the
// stylesheet is embedded (go:embed) and has print styles, visible keyboard
// focus, and text contrast of at least 4.5:1.
package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/x509"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/index"
	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/registry"
	"github.com/vouchml/vouch/replay"
	"github.com/vouchml/vouch/server"
)

// Log is what the console reads of the audit log; *audit.Log implements it.
type Log interface {
	Query(ctx context.Context, f index.Filter, fn func(index.Row) error) error
	Entry(i uint64) ([]byte, error)
	Show(ctx context.Context, trace string) (*audit.Inclusion, error)
	Export(ctx context.Context, w io.Writer, f index.Filter) (int, error)
	Checkpoint() (*audit.Checkpoint, error)
}

// Inputs returns captured inputs by input digest; *capture.Store implements it.
type Inputs = replay.Inputs

// Model is one model the server serves, for the models page and for replay
// of records served from an unsigned plan.
type Model struct {
	Name, Version string
	Engine        *replay.Engine
	Bundle        *bundle.Bundle // nil for a bare plan
	// Features names the columns of the model's input (one name a
	// column of a [rows, features] input), when known.
	Features []string
}

// Options configure a Console. Log, Appender and Credentials are required
// (without credentials nobody could be named in the access trail).
type Options struct {
	Log      Log
	Appender audit.Appender
	// Credentials authenticate sign-ins (tokens and client certificates).
	Credentials *server.Credentials
	// LogKeys are the trusted verifier keys of the log; WitnessKeys verify
	// witness cosignatures on its checkpoints.
	LogKeys, WitnessKeys []string
	// Inputs are the captured inputs (nil: none kept).
	Inputs Inputs
	// Models are the models served; Registry, when set, is the registry
	// they came from.
	Models   []Model
	Registry *registry.Registry
	// Check is what a replayed bundle is checked against (this machine).
	Check bundle.CheckOptions
	// SignKey signs replay reports and regulator exports (DSSE).
	SignKey *bundle.PrivateKey
	// Verify verifies the whole log (the log page's button); nil hides it.
	Verify func(ctx context.Context) (*audit.Report, error)
	// ExporterLag reports how far each audit stream exporter is behind the
	// log, when the server runs any.
	ExporterLag func() map[string]uint64
	// SessionTTL bounds a session (default 8h).
	SessionTTL time.Duration
	// PageSize is the number of rows on a search page (default 50).
	PageSize int
	// Logger receives errors (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Console serves the audit console. Create it with New and mount Handler
// at /console/.
type Console struct {
	opt Options
	mu  sync.Mutex
	// sessions maps a session id to its state; pre maps a pre-session id
	// (sign-in form only) to its CSRF token.
	sessions map[string]*session
	pre      map[string]preSession
	lastVer  *verification
}

type session struct {
	id, csrf  string
	principal *server.Principal
	expires   time.Time
	replays   map[string]*replayRun // by run id
}

type preSession struct {
	csrf    string
	expires time.Time
}

type verification struct {
	At     time.Time
	By     string
	Report *audit.Report
	Err    string
}

const (
	cookieSession = "vouch_console"
	cookiePre     = "vouch_console_pre"
	maxSessions   = 10000
	maxReplays    = 20 // replay runs kept per session, oldest dropped
)

// New returns a Console.
func New(o Options) (*Console, error) {
	if o.Log == nil || o.Appender == nil {
		return nil, errors.New("console: needs the audit log and its appender")
	}
	if o.Credentials == nil {
		return nil, errors.New("console: needs credentials (--credentials): every view is recorded under the viewer's name")
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 8 * time.Hour
	}
	if o.PageSize <= 0 {
		o.PageSize = 50
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Console{opt: o, sessions: map[string]*session{}, pre: map[string]preSession{}}, nil
}

//go:embed templates/*.html style.css
var files embed.FS

// Handler serves the console; mount it at /console/.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console/static/style.css", c.style)
	mux.HandleFunc("GET /console/signin", c.signinForm)
	mux.HandleFunc("POST /console/signin", c.signin)
	mux.HandleFunc("POST /console/signout", c.authed(c.signout))
	mux.HandleFunc("GET /console/{$}", c.authed(c.search))
	mux.HandleFunc("GET /console/decision/{trace}", c.authed(c.decision))
	mux.HandleFunc("POST /console/replay/{trace}", c.authed(c.replay))
	mux.HandleFunc("GET /console/replay/{id}/{file}", c.authed(c.replayFile))
	mux.HandleFunc("GET /console/log", c.authed(c.logPage))
	mux.HandleFunc("POST /console/log/verify", c.authed(c.verify))
	mux.HandleFunc("GET /console/models", c.authed(c.models))
	mux.HandleFunc("GET /console/export", c.authed(c.exportForm))
	mux.HandleFunc("POST /console/export", c.authed(c.export))
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, nil, http.StatusNotFound, "no page %s %s", r.Method, r.URL.Path)
	})
	return headers(mux)
}

// headers sets what every console response carries: no caching of audit
// data, no framing, no content from elsewhere.
func headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func (c *Console) style(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	io.WriteString(w, replay.CSS)
	b, _ := files.ReadFile("style.css")
	w.Write(b)
}

func randomID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("console: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

func equalToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, ttl time.Duration) {
	ck := &http.Cookie{Name: name, Value: value, Path: "/console/", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode}
	if ttl < 0 {
		ck.MaxAge = -1
	} else {
		ck.MaxAge = int(ttl / time.Second)
	}
	http.SetCookie(w, ck)
}

// current returns the request's live session, or nil.
func (c *Console) current(r *http.Request) *session {
	ck, err := r.Cookie(cookieSession)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[ck.Value]
	if s != nil && c.opt.Now().After(s.expires) {
		delete(c.sessions, ck.Value)
		return nil
	}
	return s
}

type handler func(w http.ResponseWriter, r *http.Request, s *session)

// authed admits requests with a live session, and POSTs only with its CSRF
// token; others go to the sign-in page (GET) or get 403 (POST).
func (c *Console) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.current(r)
		if s == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/console/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.fail(w, r, nil, http.StatusForbidden, "not signed in (or the session expired): sign in again")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if !equalToken(r.PostFormValue("csrf"), s.csrf) {
				c.fail(w, r, s, http.StatusForbidden, "the form's CSRF token is missing or wrong: reload the page and try again")
				return
			}
		}
		h(w, r, s)
	}
}

func (c *Console) signinForm(w http.ResponseWriter, r *http.Request) {
	csrf := randomID()
	pre := randomID()
	c.mu.Lock()
	c.gcLocked()
	c.pre[pre] = preSession{csrf: csrf, expires: c.opt.Now().Add(time.Hour)}
	c.mu.Unlock()
	c.setCookie(w, r, cookiePre, pre, time.Hour)
	var cert string
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		cert = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	c.render(w, r, nil, "signin", map[string]any{"CSRF": csrf, "Next": safeNext(r.URL.Query().Get("next")), "Cert": cert,
		"Error": r.URL.Query().Get("error")})
}

func safeNext(n string) string {
	if !strings.HasPrefix(n, "/console/") || strings.HasPrefix(n, "//") || strings.ContainsAny(n, "\\\r\n") {
		return "/console/"
	}
	return n
}

func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	ck, err := r.Cookie(cookiePre)
	c.mu.Lock()
	var pre preSession
	var ok bool
	if err == nil {
		pre, ok = c.pre[ck.Value]
		delete(c.pre, ck.Value) // one use
	}
	c.mu.Unlock()
	if !ok || c.opt.Now().After(pre.expires) || !equalToken(r.PostFormValue("csrf"), pre.csrf) {
		c.fail(w, r, nil, http.StatusForbidden, "the sign-in form's CSRF token is missing or wrong: open the sign-in page again")
		return
	}
	var peer []*x509.Certificate
	if r.TLS != nil {
		peer = r.TLS.PeerCertificates
	}
	authz := ""
	if tok := strings.TrimSpace(r.PostFormValue("token")); tok != "" {
		authz = "Bearer " + tok
	} else if r.PostFormValue("use_cert") == "" {
		peer = nil
	}
	p, aerr := c.opt.Credentials.Authenticate(authz, peer)
	if aerr == nil && !p.Has(server.RoleAudit) {
		aerr = fmt.Errorf("principal %q lacks role %q (the console is for the audit and admin roles)", p.Name, server.RoleAudit)
	}
	who := ""
	if p != nil {
		who = p.Name
	}
	if aerr != nil {
		// A refused sign-in is evidence too.
		c.appendAccess(r, who, "console-signin", "refused: "+aerr.Error(), aerr)
		c.setCookie(w, r, cookiePre, "", -1)
		w.WriteHeader(http.StatusForbidden)
		c.render(w, r, nil, "signin", map[string]any{"Error": aerr.Error(), "Next": safeNext(r.PostFormValue("next")), "Refused": true})
		return
	}
	if _, err := c.appendAccess(r, p.Name, "console-signin", "", nil); err != nil {
		c.fail(w, r, nil, http.StatusServiceUnavailable, "%v", err)
		return
	}
	// A fresh id, whatever cookie came in: no session fixation. An old
	// session of this browser ends here.
	s := &session{id: randomID(), csrf: randomID(), principal: p, expires: c.opt.Now().Add(c.opt.SessionTTL), replays: map[string]*replayRun{}}
	c.mu.Lock()
	if old, err := r.Cookie(cookieSession); err == nil {
		delete(c.sessions, old.Value)
	}
	c.gcLocked()
	if len(c.sessions) >= maxSessions {
		c.mu.Unlock()
		c.fail(w, r, nil, http.StatusServiceUnavailable, "too many console sessions; try again later")
		return
	}
	c.sessions[s.id] = s
	c.mu.Unlock()
	c.setCookie(w, r, cookiePre, "", -1)
	c.setCookie(w, r, cookieSession, s.id, c.opt.SessionTTL)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// gcLocked drops expired sessions and pre-sessions.
func (c *Console) gcLocked() {
	now := c.opt.Now()
	for id, s := range c.sessions {
		if now.After(s.expires) {
			delete(c.sessions, id)
		}
	}
	for id, p := range c.pre {
		if now.After(p.expires) {
			delete(c.pre, id)
		}
	}
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, s *session) {
	c.mu.Lock()
	delete(c.sessions, s.id)
	c.mu.Unlock()
	c.appendAccess(r, s.principal.Name, "console-signout", "", nil)
	c.setCookie(w, r, cookieSession, "", -1)
	http.Redirect(w, r, "/console/signin?error="+url.QueryEscape("Signed out."), http.StatusSeeOther)
}

// maxTarget bounds the target of an access record (a search query can be
// long); a cut target keeps its start and says how long it was.
const maxTarget = 2048

// appendAccess appends the access record of a console view and returns its
// log index; the view must not render when it fails. refused, when not
// nil, records the view as refused.
func (c *Console) appendAccess(r *http.Request, principal, action, target string, refused error) (uint64, error) {
	if len(target) > maxTarget {
		target = fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(target[:maxTarget], ""), len(target))
	}
	rec := &audit.Record{Kind: audit.KindAccess, TraceID: randomID()[:32], Time: c.opt.Now().UTC(),
		Principal: principal, SourceAddr: r.RemoteAddr, Status: audit.StatusOK,
		Access: &audit.Access{Action: action, Target: target}}
	if refused != nil {
		rec.Status, rec.Code, rec.Error = audit.StatusError, http.StatusForbidden, refused.Error()
	}
	idx, _, err := c.opt.Appender.Append(context.WithoutCancel(r.Context()), rec)
	if err != nil {
		c.opt.Logger.Error("console: access record refused by the audit log; view refused", "principal", principal, "action", action, "err", err.Error())
		return 0, fmt.Errorf("the audit log cannot record this view, so it is refused: %v", err)
	}
	return idx, nil
}

// record appends the access record of the view a signed-in viewer asked
// for; it answers 503 itself and returns false when the view must not
// render.
func (c *Console) record(w http.ResponseWriter, r *http.Request, s *session, action, target string) (uint64, bool) {
	idx, err := c.appendAccess(r, s.principal.Name, action, target, nil)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		c.fail(w, r, s, http.StatusServiceUnavailable, "%v", err)
		return 0, false
	}
	w.Header().Set("Vouch-Access-Index", fmt.Sprint(idx))
	return idx, true
}

// fail renders an error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, code int, format string, args ...any) {
	w.WriteHeader(code)
	c.render(w, r, s, "error", map[string]any{"Code": code, "Status": http.StatusText(code), "Message": fmt.Sprintf(format, args...)})
}

// render executes one page template inside the layout.
func (c *Console) render(w http.ResponseWriter, r *http.Request, s *session, page string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["Page"] = page
	if s != nil {
		data["Viewer"] = s.principal.Name
		data["Session"] = s
		if _, ok := data["CSRF"]; !ok {
			data["CSRF"] = s.csrf
		}
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	}
	var b strings.Builder
	if err := pages[page].ExecuteTemplate(&b, "layout", data); err != nil {
		c.opt.Logger.Error("console: render", "page", page, "err", err.Error())
		io.WriteString(w, "console: the page could not be rendered: "+template.HTMLEscapeString(err.Error()))
		return
	}
	io.WriteString(w, b.String())
}
