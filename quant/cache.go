package quant

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// ErrCache is wrapped by every calibration cache parsing error.
var ErrCache = errors.New("quant: malformed calibration cache")

// CacheVersion is the calibration cache format this package writes.
const CacheVersion = 1

// Cache is a calibration cache: the activation scale of every calibrated
// tensor, and how they were obtained.
//
// # Format, version 1
//
// UTF-8 text, one record per line, '\n' line ends:
//
//	VOUCHCALIB 1 <calibrator>[ <param>]     the version line; a future format changes the number
//	<tensor name>: <scale>                   one line per tensor, sorted by name
//
// <calibrator> is minmax, entropy or percentile (param: the percentile,
// e.g. 99.99). <scale> is the float32 scale as 8 lowercase hex digits of
// its IEEE bits (TensorRT's convention; exact round trip), optionally
// followed by " # " and a comment that Parse ignores. A tensor name is
// everything before the last ": ". Lines that are empty or start with '#'
// are ignored.
type Cache struct {
	Calibrator string
	Param      string
	Scales     map[string]float32
	// Notes are written as trailing comments (e.g. the threshold).
	Notes map[string]string
}

// Format writes c in the cache format.
func (c *Cache) Format(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "VOUCHCALIB %d %s", CacheVersion, c.Calibrator)
	if c.Param != "" {
		b.WriteString(" " + c.Param)
	}
	b.WriteByte('\n')
	for _, name := range SortedNames(c.Scales) {
		if strings.ContainsAny(name, "\n\r") {
			return fmt.Errorf("quant: tensor name %q has a line break", name)
		}
		fmt.Fprintf(&b, "%s: %08x", name, math.Float32bits(c.Scales[name]))
		if n := c.Notes[name]; n != "" {
			b.WriteString(" # " + n)
		}
		b.WriteByte('\n')
	}
	_, err := w.Write(b.Bytes())
	return err
}

// ParseCache reads a calibration cache.
func ParseCache(r io.Reader) (*Cache, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	c := &Cache{Scales: map[string]float32{}}
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		if line == 1 {
			f := strings.Fields(t)
			if len(f) < 3 || f[0] != "VOUCHCALIB" {
				return nil, fmt.Errorf("%w: line 1: want \"VOUCHCALIB %d CALIBRATOR\", got %q", ErrCache, CacheVersion, t)
			}
			if f[1] != strconv.Itoa(CacheVersion) {
				return nil, fmt.Errorf("%w: unsupported version %q (this vouch reads %d)", ErrCache, f[1], CacheVersion)
			}
			c.Calibrator = f[2]
			if len(f) > 3 {
				c.Param = f[3]
			}
			continue
		}
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if i := strings.Index(t, " # "); i >= 0 {
			t = t[:i]
		}
		i := strings.LastIndex(t, ": ")
		if i <= 0 {
			return nil, fmt.Errorf("%w: line %d: want \"NAME: SCALEHEX\", got %q", ErrCache, line, t)
		}
		name, hex := t[:i], strings.TrimSpace(t[i+2:])
		bits, err := strconv.ParseUint(hex, 16, 32)
		if err != nil || len(hex) != 8 {
			return nil, fmt.Errorf("%w: line %d: scale %q of %q is not 8 hex digits", ErrCache, line, hex, name)
		}
		s := math.Float32frombits(uint32(bits))
		if !(s > 0) || math.IsInf(float64(s), 0) {
			return nil, fmt.Errorf("%w: line %d: scale of %q is %v, want a positive finite number", ErrCache, line, name, s)
		}
		if _, dup := c.Scales[name]; dup {
			return nil, fmt.Errorf("%w: line %d: tensor %q listed twice", ErrCache, line, name)
		}
		c.Scales[name] = s
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCache, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("%w: empty file", ErrCache)
	}
	return c, nil
}
