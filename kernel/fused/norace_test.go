//go:build !race

package fused_test

const raceEnabled = false
