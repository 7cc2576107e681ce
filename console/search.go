package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vouchml/vouch/audit/index"
)

// maxDigestScan bounds how many records one search page reads from the log
// when it filters by input digest (the index has no digest column).
const maxDigestScan = 20000

// searchForm is the search page's query, as typed.
type searchForm struct {
	Since, Until, Model, Version, Outcome, Status, Principal, Trace, Digest, Kind string
	Before                                                                        index.Cursor
}

func parseSearch(q url.Values) (searchForm, index.Filter, error) {
	f := searchForm{Since: q.Get("since"), Until: q.Get("until"), Model: strings.TrimSpace(q.Get("model")),
		Version: strings.TrimSpace(q.Get("version")), Outcome: strings.TrimSpace(q.Get("outcome")), Status: q.Get("status"),
		Principal: strings.TrimSpace(q.Get("principal")), Trace: strings.ToLower(strings.TrimSpace(q.Get("trace"))),
		Digest: strings.ToLower(strings.TrimSpace(q.Get("digest"))), Kind: q.Get("kind")}
	if f.Kind == "" {
		f.Kind = "inference"
	}
	flt := index.Filter{Model: f.Model, Version: f.Version, Label: f.Outcome, Principal: f.Principal, TraceID: f.Trace}
	switch f.Status {
	case "", "ok", "error":
		flt.Status = f.Status
	default:
		return f, flt, fmt.Errorf("status %q: want ok or error", f.Status)
	}
	switch f.Kind {
	case "inference", "access":
		flt.Kind = f.Kind
	case "all":
	default:
		return f, flt, fmt.Errorf("kind %q: want inference, access or all", f.Kind)
	}
	var err error
	if flt.Since, err = parseTime("from", f.Since); err != nil {
		return f, flt, err
	}
	if flt.Until, err = parseTime("to", f.Until); err != nil {
		return f, flt, err
	}
	if f.Digest != "" && !strings.HasPrefix(f.Digest, "sha256:") {
		f.Digest = "sha256:" + f.Digest
	}
	if v := q.Get("before"); v != "" {
		if f.Before, err = parseCursor(v); err != nil {
			return f, flt, err
		}
	}
	flt.Newest, flt.Before = true, f.Before
	return f, flt, nil
}

// A page cursor in a URL is the last row's time (Unix nanoseconds) and
// log index: "1764582000123456789.42".
func formatCursor(c index.Cursor) string {
	return strconv.FormatInt(c.Time.UnixNano(), 10) + "." + strconv.FormatUint(c.Index, 10)
}

func parseCursor(v string) (index.Cursor, error) {
	ns, idx, ok := strings.Cut(v, ".")
	n, err1 := strconv.ParseInt(ns, 10, 64)
	i, err2 := strconv.ParseUint(idx, 10, 64)
	if !ok || err1 != nil || err2 != nil || n <= 0 {
		return index.Cursor{}, fmt.Errorf("page cursor %q: want NANOSECONDS.INDEX (follow the Next page link)", v)
	}
	return index.Cursor{Time: time.Unix(0, n).UTC(), Index: i}, nil
}

// parseTime reads a time typed in the form: the browser's datetime-local
// (taken as UTC), a date, or RFC 3339.
func parseTime(field, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q: want a time such as 2026-12-01T09:30 (UTC) or 2026-12-01", field, s)
}

// query is the canonical form of the search (the access record's target
// and the pager's links), without the page cursor.
func (f searchForm) query() url.Values {
	q := url.Values{}
	for _, kv := range [][2]string{{"since", f.Since}, {"until", f.Until}, {"model", f.Model}, {"version", f.Version},
		{"outcome", f.Outcome}, {"status", f.Status}, {"principal", f.Principal}, {"trace", f.Trace}, {"digest", f.Digest}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	if f.Kind != "inference" {
		q.Set("kind", f.Kind)
	}
	return q
}

type searchResult struct {
	Rows     []index.Row
	Next     string // the next page's URL; "" on the last page
	Scanned  int    // records read for a digest filter
	ScanCut  bool   // the digest scan stopped at maxDigestScan
	Elapsed  time.Duration
	Searched bool
}

func (c *Console) search(w http.ResponseWriter, r *http.Request, s *session) {
	start := time.Now()
	form, flt, err := parseSearch(r.URL.Query())
	target := form.query()
	if !form.Before.Time.IsZero() {
		target.Set("before", formatCursor(form.Before))
	}
	data := map[string]any{"F": form, "Models": c.modelNames()}
	if err != nil {
		if _, ok := c.record(w, r, s, "console-search", target.Encode()); !ok {
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		data["Error"] = err.Error()
		c.render(w, r, s, "search", data)
		return
	}
	res := searchResult{Searched: true}
	page := c.opt.PageSize
	var last index.Cursor
	more := false
	if form.Digest == "" {
		flt.Limit = page + 1
		err = c.opt.Log.Query(r.Context(), flt, func(row index.Row) error {
			if len(res.Rows) == page {
				more = true
				return nil
			}
			res.Rows = append(res.Rows, row)
			last = index.CursorOf(row)
			return nil
		})
	} else {
		// Read the records themselves, a bounded number per page.
		flt.Limit = maxDigestScan
		err = c.opt.Log.Query(r.Context(), flt, func(row index.Row) error {
			if len(res.Rows) == page {
				more = true
				return errStop
			}
			res.Scanned++
			last = index.CursorOf(row)
			b, err := c.opt.Log.Entry(row.Index)
			if err != nil {
				return err
			}
			var d struct {
				InputDigest string `json:"input_digest"`
			}
			if json.Unmarshal(b, &d) == nil && d.InputDigest == form.Digest {
				res.Rows = append(res.Rows, row)
			}
			return nil
		})
		if err == errStop {
			err = nil
		}
		if res.Scanned == maxDigestScan {
			more, res.ScanCut = true, true
		}
	}
	// The rows are read first (the index waits for the log to integrate
	// what was appended before), recorded, and only then shown.
	if _, ok := c.record(w, r, s, "console-search", target.Encode()); !ok {
		return
	}
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		data["Error"] = "the index could not be searched: " + err.Error()
		c.render(w, r, s, "search", data)
		return
	}
	if more {
		q := form.query()
		q.Set("before", formatCursor(last))
		res.Next = "/console/?" + q.Encode()
	}
	if !form.Before.Time.IsZero() {
		data["First"] = "/console/?" + form.query().Encode()
	}
	res.Elapsed = time.Since(start)
	data["R"] = res
	c.render(w, r, s, "search", data)
}

type stopError struct{}

func (stopError) Error() string { return "stop" }

var errStop error = stopError{}

func (c *Console) modelNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, m := range c.opt.Models {
		if !seen[m.Name] {
			seen[m.Name] = true
			names = append(names, m.Name)
		}
	}
	return names
}
