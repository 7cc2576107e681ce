package audit

import (
	"net/http"
	"strings"
)

// Handler serves the log's public files read-only, at their C2SP
// tlog-tiles paths ("checkpoint", "tile/…"), so that standard verifiers
// and `vouch audit verify --log URL` can check it. Nothing else in the
// directory (the write-ahead log, the index, tessera's state) is served.
// Mount it under a prefix with http.StripPrefix.
func (l *Log) Handler() http.Handler {
	files := http.FileServerFS(l.fsys)
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
		if p == "checkpoint" {
			w.Header().Set("Cache-Control", "no-cache")
		} else if !strings.Contains(p, ".p/") {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		files.ServeHTTP(w, r)
	})
}
