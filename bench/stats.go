package bench

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Summary describes a set of latency samples.
type Summary struct {
	N      int           `json:"n"`
	Median time.Duration `json:"median_ns"`
	P90    time.Duration `json:"p90_ns"`
	Min    time.Duration `json:"min_ns"`
	Max    time.Duration `json:"max_ns"`
	Mean   time.Duration `json:"mean_ns"`
}

// Summarize returns the summary of samples; it does not modify samples.
// The median of an even count is the mean of the two middle samples; p90
// is the nearest-rank percentile (the smallest sample with at least 90% of
// the samples at or below it).
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := append([]time.Duration(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Summary{N: n, Median: med, P90: Percentile(s, 90), Min: s[0], Max: s[n-1], Mean: sum / time.Duration(n)}
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, which must be in ascending order and non-empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		panic("bench: Percentile of no samples")
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

// Ratio returns a/b as a float (vouch/peer: below 1 means vouch is faster),
// or NaN when b is zero.
func Ratio(a, b time.Duration) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// FormatDuration prints d with three significant figures in a unit that
// suits it (µs below 1 ms, ms below 1 s).
func FormatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.3gµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.3gs", d.Seconds())
}
