//go:build !race

package compile_test

const raceOn = false
