//go:build race

package fused_test

// The race detector's instrumentation allocates: allocation counts are
// only asserted without it.
const raceEnabled = true
