// Package tune chooses among a layer's tactics by timing them on this
// machine, and keeps the timings in a timing cache so that a rebuild with
// the same cache makes the same choices (and so a byte-identical plan).
//
// # Timing cache format, version 1
//
// A text file:
//
//	vouch-timing-cache 1
//	<key> TAB <tactic> TAB <nanoseconds: the fastest timed run>
//	...
//
// one line per (key, tactic), sorted. The key describes the layer
// completely (op type, attributes, input types) and the machine (CPU model
// and the features the kernels may use), so a cache carried to another kind
// of machine is simply not hit.
package tune

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vouchml/vouch/buildlog"
)

const header = "vouch-timing-cache 1"

// Cache holds measured times (the fastest run) per key and tactic.
type Cache struct {
	m map[string]map[string]int64
}

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{m: map[string]map[string]int64{}} }

// ReadCache parses a timing cache.
func ReadCache(r io.Reader) (*Cache, error) {
	c := NewCache()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			if text != header {
				return nil, fmt.Errorf("tune: not a timing cache (first line %q, want %q)", text, header)
			}
			continue
		}
		if text == "" {
			continue
		}
		parts := strings.Split(text, "\t")
		if len(parts) != 3 {
			return nil, fmt.Errorf("tune: timing cache line %d: want KEY TAB TACTIC TAB NANOSECONDS", line)
		}
		ns, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil || ns < 0 {
			return nil, fmt.Errorf("tune: timing cache line %d: bad time %q", line, parts[2])
		}
		c.put(parts[0], parts[1], ns)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tune: reading timing cache: %w", err)
	}
	if line == 0 {
		return nil, fmt.Errorf("tune: empty timing cache")
	}
	return c, nil
}

func (c *Cache) put(key, tactic string, ns int64) {
	if c.m[key] == nil {
		c.m[key] = map[string]int64{}
	}
	c.m[key][tactic] = ns
}

func (c *Cache) get(key, tactic string) (int64, bool) {
	ns, ok := c.m[key][tactic]
	return ns, ok
}

// Len returns the number of (key, tactic) timings.
func (c *Cache) Len() int {
	n := 0
	for _, t := range c.m {
		n += len(t)
	}
	return n
}

// Encode writes the cache in its text format, sorted.
func (c *Cache) Encode(w io.Writer) error {
	var lines []string
	for k, ts := range c.m {
		for t, ns := range ts {
			lines = append(lines, fmt.Sprintf("%s\t%s\t%d", k, t, ns))
		}
	}
	sort.Strings(lines)
	_, err := io.WriteString(w, header+"\n"+strings.Join(lines, "\n")+"\n")
	return err
}

// Candidate is one tactic and a function that runs it once.
type Candidate struct {
	Tactic string
	Run    func() error
}

// Tuner times candidates.
type Tuner struct {
	Cache *Cache
	// Reps is the number of timed runs per candidate (after one warm-up);
	// the fastest is kept: on a shared machine other work only ever adds
	// time, so the minimum is the steadiest estimate of the kernel's own
	// cost (a median still moves with a burst of interference).
	Reps int
	Log  *buildlog.Log
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Choose returns the fastest candidate's tactic for the layer, timing the
// ones the cache does not know and logging every timing. Ties go to the
// earlier candidate, so the choice is deterministic given the timings.
func (t *Tuner) Choose(layer, key string, cands []Candidate) (string, error) {
	if len(cands) == 0 {
		return "", fmt.Errorf("tune: layer %s: no candidates", layer)
	}
	now := t.Now
	if now == nil {
		now = time.Now
	}
	reps := max(t.Reps, 1)
	best, bestNS := "", int64(-1)
	for _, c := range cands {
		ns, cached := t.Cache.get(key, c.Tactic)
		if !cached {
			if err := c.Run(); err != nil { // warm-up
				return "", fmt.Errorf("tune: layer %s: tactic %s: %w", layer, c.Tactic, err)
			}
			times := make([]int64, reps)
			for i := range times {
				start := now()
				if err := c.Run(); err != nil {
					return "", fmt.Errorf("tune: layer %s: tactic %s: %w", layer, c.Tactic, err)
				}
				times[i] = int64(now().Sub(start))
			}
			ns = slices.Min(times)
			t.Cache.put(key, c.Tactic, ns)
		}
		t.Log.Info("tactics", "timed", map[string]any{"layer": layer, "tactic": c.Tactic, "best_ns": ns, "cached": cached, "reps": reps})
		if bestNS < 0 || ns < bestNS {
			best, bestNS = c.Tactic, ns
		}
	}
	return best, nil
}
