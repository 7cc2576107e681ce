package audit

import (
	"io/fs"
	"net/http"
	"strings"
)

// Handler serves the log's public files read-only, at their C2SP
// tlog-tiles paths ("checkpoint", "tile/…"), so that standard verifiers
// and `vouch audit verify --log URL` can check it. Nothing else in the
// directory (the write-ahead log, the index, tessera's state) is served.
// Mount it under a prefix with http.StripPrefix.
func (l *Log) Handler() http.Handler { return FSHandler(l.fsys) }

// FSHandler serves a log's checkpoint and tiles from fsys (at the C2SP
// tlog-tiles paths) read-only, and nothing else of it: what Log.Handler
// serves for a directory, for any log that reads back as an fs.FS (the
// shared log in a database, package audit/sqllog). The checkpoint is
// text/plain; charset=utf-8, as C2SP tlog-checkpoint asks.
func FSHandler(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(r.URL.Path, "/")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if p != "checkpoint" && (!strings.HasPrefix(p, "tile/") || strings.HasSuffix(p, "/") || strings.Contains(p, "..")) {
			http.NotFound(w, r)
			return
		}
		switch {
		case p == "checkpoint":
			w.Header().Set("Cache-Control", "no-cache")
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		case !strings.Contains(p, ".p/"):
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			w.Header().Set("Content-Type", "application/octet-stream")
		default:
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		files.ServeHTTP(w, r)
	})
}
