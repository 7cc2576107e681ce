//go:build race

package nn

// The race detector's instrumentation allocates: allocation counts are
// only asserted without it.
const raceEnabled = true
