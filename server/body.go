package server

import (
	"errors"
	"io"
	"net/http"
)

// readBody reads a request body of at most limit bytes. The buffer grows
// with what the client has actually sent, doubling up to its
// Content-Length, so a client that claims 64 MiB and trickles a few bytes
// holds a few bytes of memory, not 64 MiB; a body that arrives whole costs
// its size and at most one copy.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	if r.ContentLength > limit {
		return nil, errf(413, "request body of %d bytes exceeds %d bytes", r.ContentLength, limit)
	}
	rd := http.MaxBytesReader(w, r.Body, limit)
	want := r.ContentLength
	if want < 0 {
		want = limit
	}
	buf := make([]byte, 0, min(want, 64<<10))
	var err error
	for {
		if int64(len(buf)) >= want {
			// All that was claimed has come: only the end may follow.
			var one [1]byte
			n, rerr := rd.Read(one[:])
			if n > 0 {
				if r.ContentLength < 0 {
					return nil, errf(413, "request body exceeds %d bytes", limit)
				}
				return nil, errf(400, "request body longer than its Content-Length")
			}
			if err = rerr; err == nil {
				continue
			}
			break
		}
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(want, max(2*int64(cap(buf)), 64<<10)))
			copy(grown, buf)
			buf = grown
		}
		var n int
		n, err = rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
		if r.ContentLength >= 0 && int64(len(buf)) != r.ContentLength {
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, errf(413, "request body exceeds %d bytes", limit)
		}
		return nil, errf(400, "reading request body: %v", err)
	}
	return buf, nil
}
