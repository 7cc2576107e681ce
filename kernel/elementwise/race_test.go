//go:build race

package elementwise

// The race detector drops sync.Pool entries at random (and instruments
// allocations): allocation counts are only asserted without it.
const raceEnabled = true
