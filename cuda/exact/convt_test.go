package exact

import (
	"strings"
	"testing"
)

func convtGeom() ConvTGeom {
	return ConvTGeom{Rank: 2, N: 1, C: 4, D: 1, H: 5, W: 6, M: 2, OD: 1, OH: 10, OW: 12, G: 1, KD: 1, KH: 2, KW: 2, SD: 1, SH: 2, SW: 2, DD: 1, DH: 1, DW: 1}
}

// Tiled is exactly kernel/nn's convTransposeTiled condition: each part of
// it, changed, turns it off.
func TestConvTTiled(t *testing.T) {
	if !convtGeom().Tiled() {
		t.Fatal("2x2/2 without pads is not tiled")
	}
	for name, f := range map[string]func(*ConvTGeom){
		"1-D":            func(g *ConvTGeom) { g.Rank, g.H, g.OH, g.KH, g.SH = 1, 1, 1, 1, 1 },
		"3-D":            func(g *ConvTGeom) { g.Rank = 3 },
		"groups":         func(g *ConvTGeom) { g.G = 2 },
		"stride":         func(g *ConvTGeom) { g.SW = 1; g.OW = 7 },
		"dilation":       func(g *ConvTGeom) { g.DH = 2; g.OH = 11 },
		"leading pad":    func(g *ConvTGeom) { g.PH = 1; g.OH = 9 },
		"trailing pad":   func(g *ConvTGeom) { g.PEW = 1; g.OW = 11 },
		"output_padding": func(g *ConvTGeom) { g.OW = 13 },
	} {
		g := convtGeom()
		f(&g)
		if g.Tiled() {
			t.Errorf("%s: %+v is tiled", name, g)
		}
	}
}

// Bad geometries and modes are refused before anything reaches the
// driver (a zero Engine), and an empty output launches nothing.
func TestConvTArgumentErrors(t *testing.T) {
	e := &Engine{}
	bad := func(f func(*ConvTGeom)) ConvTGeom {
		g := convtGeom()
		f(&g)
		return g
	}
	general := bad(func(g *ConvTGeom) { g.PH, g.OH = 1, 9 })
	for name, err := range map[string]error{
		"rank 4":           e.ConvT(nil, bad(func(g *ConvTGeom) { g.Rank = 4 }), 0, 0, 0, 1, 0),
		"2-D with depth":   e.ConvT(nil, bad(func(g *ConvTGeom) { g.D, g.OD = 2, 2 }), 0, 0, 0, 1, 0),
		"depth stride":     e.ConvT(nil, bad(func(g *ConvTGeom) { g.SD = 0; g.Rank = 3 }), 0, 0, 0, 1, 0),
		"1-D with rows":    e.ConvT(nil, bad(func(g *ConvTGeom) { g.Rank = 1 }), 0, 0, 0, 1, 0),
		"group":            e.ConvT(nil, bad(func(g *ConvTGeom) { g.G = 3 }), 0, 0, 0, 1, 0),
		"zero stride":      e.ConvT(nil, bad(func(g *ConvTGeom) { g.SH = 0 }), 0, 0, 0, 1, 0),
		"huge pad":         e.ConvT(nil, bad(func(g *ConvTGeom) { g.PW = -1 << 30 }), 0, 0, 0, 1, 0),
		"huge output":      e.ConvT(nil, bad(func(g *ConvTGeom) { g.N, g.M = 1<<20, 1<<20 }), 0, 0, 0, 1, 0),
		"mode":             e.ConvTWith(nil, convtGeom(), ConvTMode(7), 0, 0, 0, 1, 0),
		"live, general":    e.ConvTWith(nil, general, ConvTLive, 0, 0, 0, 1, 0),
		"checked, no flag": e.ConvT(nil, convtGeom(), 0, 0, 0, 0, 0),
	} {
		if err == nil || !strings.HasPrefix(err.Error(), "exact: ") {
			t.Errorf("%s: err = %v, want an exact: error", name, err)
		}
	}
	empty := convtGeom()
	empty.N = 0
	if err := e.ConvT(nil, empty, 0, 0, 0, 1, 0); err != nil {
		t.Errorf("an empty output: %v", err)
	}
}
