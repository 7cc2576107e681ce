package audit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// HTTPFS returns a read-only fs.FS over a log served at C2SP tlog-tiles
// paths under base (such as "https://vouch.example/log/"), so that [Verify]
// and [ParseCheckpoint] read a remote log as they read a directory.
// A 404 is fs.ErrNotExist; any other failure is an error naming the URL.
// Directories cannot be listed. A nil client means http.DefaultClient.
func HTTPFS(ctx context.Context, base string, client *http.Client) (fs.FS, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("audit: log URL %q: want http:// or https://", base)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	if client == nil {
		client = http.DefaultClient
	}
	return &httpFS{ctx: ctx, base: u, client: client}, nil
}

type httpFS struct {
	ctx    context.Context
	base   *url.URL
	client *http.Client
}

// maxResource bounds one file: a full entry bundle is 256 entries of at
// most 64 KiB each.
const maxResource = 256 * (2 + maxEntry)

func (h *httpFS) Open(name string) (fs.File, error) {
	b, err := h.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return &httpFile{name: name, r: bytes.NewReader(b), size: int64(len(b))}, nil
}

// ReadFile implements fs.ReadFileFS: one GET, retried on transient errors.
func (h *httpFS) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	u := h.base.JoinPath(name).String()
	var last error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-h.ctx.Done():
				return nil, h.ctx.Err()
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		b, retry, err := h.get(u)
		if err == nil || !retry {
			if err != nil {
				return nil, &fs.PathError{Op: "open", Path: name, Err: err}
			}
			return b, nil
		}
		last = err
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: last}
}

func (h *httpFS) get(u string) (b []byte, retry bool, err error) {
	req, err := http.NewRequestWithContext(h.ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, h.ctx.Err() == nil, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, false, fs.ErrNotExist
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return nil, true, fmt.Errorf("GET %s: %s", u, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, false, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	b, err = io.ReadAll(io.LimitReader(resp.Body, maxResource+1))
	if err != nil {
		return nil, true, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(b) > maxResource {
		return nil, false, fmt.Errorf("GET %s: more than %d bytes", u, maxResource)
	}
	return b, false, nil
}

type httpFile struct {
	name string
	r    *bytes.Reader
	size int64
}

func (f *httpFile) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *httpFile) Close() error               { return nil }
func (f *httpFile) Stat() (fs.FileInfo, error) { return fileInfo{f}, nil }

type fileInfo struct{ f *httpFile }

func (i fileInfo) Name() string       { return i.f.name[strings.LastIndex(i.f.name, "/")+1:] }
func (i fileInfo) Size() int64        { return i.f.size }
func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }
