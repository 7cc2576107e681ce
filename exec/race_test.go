//go:build race

package exec_test

// The race detector's instrumentation allocates: allocation counts are
// only asserted without it.
const raceEnabled = true
