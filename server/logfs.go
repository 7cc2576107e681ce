package server

import (
	"net/http"
	"strings"
)

// logHandler serves the transparency log under /log/: the checkpoint and
// the hash tiles to anyone (witnesses and verifiers need nothing else), the
// entry bundles — the records themselves: principals, source addresses,
// models, decisions — only to the audit role, each read leaving an access
// record and each refusal too. The checkpoint is served as C2SP requires,
// text/plain; charset=utf-8. A path that is no tlog-tiles resource is 404.
func (s *Server) logHandler() http.Handler {
	base := s.opt.PublicLog
	if s.opt.Audit != nil {
		base = s.opt.Audit.Handler()
	}
	h := http.StripPrefix("/log", base)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(r.URL.Path, "/log/")
		if !tilePath(p) {
			writeError(w, r, errf(404, "no log resource %q", p))
			return
		}
		if strings.HasPrefix(p, "tile/entries/") {
			if _, _, ok := s.recordAccess(w, r, "entries", p); !ok {
				return
			}
		}
		if p == "checkpoint" {
			w = &typedWriter{ResponseWriter: w, ct: "text/plain; charset=utf-8"}
		}
		h.ServeHTTP(w, r)
	})
}

// tilePath reports whether p is a C2SP tlog-tiles resource: "checkpoint",
// or "tile/" followed by a level or "entries" and a tile index path made of
// digits, "x", "." and "/" (such as "tile/0/x001/234.p/5").
func tilePath(p string) bool {
	if p == "checkpoint" {
		return true
	}
	rest, ok := strings.CutPrefix(p, "tile/")
	if !ok || rest == "" || len(p) > 128 || strings.Contains(p, "..") || strings.HasSuffix(p, "/") {
		return false
	}
	rest = strings.TrimPrefix(rest, "entries/")
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; !(c >= '0' && c <= '9' || c == 'x' || c == '.' || c == 'p' || c == '/') {
			return false
		}
	}
	return true
}

// typedWriter sets a Content-Type over the one the inner handler chose.
type typedWriter struct {
	http.ResponseWriter
	ct    string
	wrote bool
}

func (w *typedWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if code == http.StatusOK || code == http.StatusNotModified || code == http.StatusPartialContent {
			w.Header().Set("Content-Type", w.ct)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *typedWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}
