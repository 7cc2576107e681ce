package cli

import (
	"github.com/vouchml/vouch/cuda/engine"
)

// The build's names for cuda/engine's fast-mode API (FastOptions,
// FastNote, PlaceFast, BuildFast).
type (
	fastOptions = engine.FastOptions
	fastNote    = engine.FastNote
)

var (
	placeFast = engine.PlaceFast
	buildFast = engine.BuildFast
)
