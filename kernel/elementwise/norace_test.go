//go:build !race

package elementwise

const raceEnabled = false
