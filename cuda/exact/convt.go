package exact

import (
	"fmt"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/kernels"
)

// ConvTGeom is a ConvTranspose of NCDHW input by ONNX's [C, M/G, KD, KH,
// KW] weights; a 2-D one has D = OD = KD = 1 (and SD = DD = 1, no depth
// pads), a 1-D one H = OH = KH = 1 too. PD, PH and PW are the leading pads
// kernel/nn derives (negative where output_shape asks for more than the
// full result), PED, PEH and PEW the trailing ones; an output o of tap k
// reads input (o + P - k*dilation) / stride where that divides.
type ConvTGeom struct {
	Rank                            int // spatial dimensions, 1 to 3
	N, C, D, H, W, M, OD, OH, OW, G int
	KD, KH, KW, SD, SH, SW          int
	DD, DH, DW                      int
	PD, PH, PW, PED, PEH, PEW       int
}

// OutLen is the number of output floats.
func (g ConvTGeom) OutLen() int { return g.N * g.M * g.OD * g.OH * g.OW }

// Tiled reports whether kernel/nn computes g with convTransposeTiled
// (when every weight is finite): 2-D, one group, the stride equal to the
// kernel, dilation 1, no pads, the output the input times the kernel.
// Each output then has one live tap, and its chain runs over c of that
// tap only.
func (g ConvTGeom) Tiled() bool {
	return g.Rank == 2 && g.G == 1 && g.SH == g.KH && g.SW == g.KW && g.DH == 1 && g.DW == 1 &&
		g.PH == 0 && g.PW == 0 && g.PEH == 0 && g.PEW == 0 && g.OH == g.H*g.KH && g.OW == g.W*g.KW
}

// ConvTMode is which of kernel/nn's chains vx_convt runs.
type ConvTMode int32

// The modes (vx_convt's mode argument).
const (
	// ConvTGeneral is convGEMM's chain: every (c, kh, kw), the taps that
	// hit no input FMA(w, 0, acc).
	ConvTGeneral ConvTMode = iota
	// ConvTLive is convTransposeTiled's chain over c of the one live tap
	// (Tiled geometries with finite weights only).
	ConvTLive
	// ConvTChecked is ConvTLive when every weight is finite, else
	// ConvTGeneral, decided on the device (vx_convt_finite).
	ConvTChecked
)

// check bounds g to what vx_convt takes: sizes that are not negative
// (an empty input or channel set leaves the chain at +0, as on the CPU),
// positive kernels, strides and dilations, groups that divide the
// channels, int32 index arithmetic.
func (g ConvTGeom) check() error {
	unitD := g.D == 1 && g.OD == 1 && g.KD == 1 && g.SD == 1 && g.DD == 1 && g.PD == 0 && g.PED == 0
	unitH := g.H == 1 && g.OH == 1 && g.KH == 1 && g.SH == 1 && g.DH == 1 && g.PH == 0 && g.PEH == 0
	if g.Rank < 1 || g.Rank > 3 || g.Rank < 3 && !unitD || g.Rank == 1 && !unitH {
		return fmt.Errorf("exact: ConvTranspose geometry %+v: rank %d (the GPU takes 1-D to 3-D, the lower ranks with unit leading dimensions)", g, g.Rank)
	}
	if g.N < 0 || g.C < 0 || g.M < 0 || g.G < 1 || g.C%g.G != 0 || g.M%g.G != 0 || g.D < 0 || g.H < 0 || g.W < 0 || g.OD < 0 || g.OH < 0 || g.OW < 0 ||
		g.KD < 1 || g.KH < 1 || g.KW < 1 || g.SD < 1 || g.SH < 1 || g.SW < 1 || g.DD < 1 || g.DH < 1 || g.DW < 1 {
		return fmt.Errorf("exact: ConvTranspose geometry %+v invalid", g)
	}
	const lim = 1 << 30
	for _, d := range [][4]int{{g.D, g.OD, g.KD * g.DD, g.PD}, {g.H, g.OH, g.KH * g.DH, g.PH}, {g.W, g.OW, g.KW * g.DW, g.PW}} {
		if d[0] >= lim || d[1] >= lim || d[2] >= lim || d[3] >= lim || d[3] <= -lim || d[1]+abs(d[3])+d[2] >= lim {
			return fmt.Errorf("exact: ConvTranspose geometry %+v too large", g)
		}
	}
	Cg, Mg := g.C/g.G, g.M/g.G
	big := func(v ...int) bool {
		p := int64(1)
		for _, x := range v {
			if p *= int64(x); p >= 1<<40 {
				return true
			}
		}
		return false
	}
	if big(g.N, g.M, g.OD, g.OH, g.OW) || big(g.N, g.C, g.D, g.H, g.W) || big(g.C, Mg, g.KD, g.KH, g.KW) || g.N >= 1<<31 {
		return fmt.Errorf("exact: ConvTranspose geometry %+v too large", g)
	}
	if int64(g.OD)*int64(g.OH)*int64(g.OW) >= 1<<31 || int64(g.KD)*int64(g.KH)*int64(g.KW) >= 1<<31 || int64(Cg)*int64(Mg) >= 1<<31 {
		return fmt.Errorf("exact: ConvTranspose geometry %+v: an output volume, a kernel or a group passes 2^31", g)
	}
	return nil
}

// ConvT sets y to kernel/nn's ConvTranspose of x by w (+ bias; bias 0:
// none), the chain the CPU runs for g: Tiled geometries check on the
// device whether every weight is finite, writing that to the int32 at
// flag (which must then be a device address), and run the tiled chain or
// the general one accordingly; every other geometry runs the general
// chain. Then y = acc + bias[m].
func (e *Engine) ConvT(s *cuda.Stream, g ConvTGeom, x, w, bias, flag, y uint64) error {
	mode := ConvTGeneral
	if g.Tiled() {
		mode = ConvTChecked
	}
	return e.ConvTWith(s, g, mode, x, w, bias, flag, y)
}

// ConvTWith is ConvT in a given mode (ConvTLive and ConvTChecked only for
// Tiled geometries: the suite checks each against the CPU).
func (e *Engine) ConvTWith(s *cuda.Stream, g ConvTGeom, mode ConvTMode, x, w, bias, flag, y uint64) error {
	if err := g.check(); err != nil {
		return err
	}
	if mode < ConvTGeneral || mode > ConvTChecked {
		return fmt.Errorf("exact: ConvTranspose mode %d", mode)
	}
	if mode != ConvTGeneral && !g.Tiled() {
		return fmt.Errorf("exact: ConvTranspose geometry %+v has no tiled chain on the CPU", g)
	}
	if mode == ConvTChecked && flag == 0 {
		return fmt.Errorf("exact: ConvTranspose's weight check needs a flag buffer")
	}
	if g.OutLen() == 0 {
		return nil
	}
	if mode == ConvTChecked {
		n := int64(g.C) * int64(g.M/g.G) * int64(g.KD) * int64(g.KH) * int64(g.KW)
		a := new(cuda.Args).Ptr(w).I64(n).Ptr(flag)
		if err := e.fn[kernels.ConvTFinite].Launch(s, cuda.D3(1, 1, 1), cuda.D3(256, 1, 1), 0, a); err != nil {
			return err
		}
	}
	geom := []int32{int32(g.C), int32(g.D), int32(g.H), int32(g.W), int32(g.M), int32(g.OD), int32(g.OH), int32(g.OW),
		int32(g.G), int32(g.KD), int32(g.KH), int32(g.KW), int32(g.SD), int32(g.SH), int32(g.SW),
		int32(g.PD), int32(g.PH), int32(g.PW), int32(g.DD), int32(g.DH), int32(g.DW)}
	a := new(cuda.Args).Struct(geom...).I32(int32(g.N)).Ptr(x).Ptr(w).Ptr(bias).I32(int32(mode)).Ptr(flag).Ptr(y)
	return e.fn[kernels.ConvT].Launch(s, cuda.D3(e.grid(int64(g.OutLen()), 256), 1, 1), cuda.D3(256, 1, 1), 0, a)
}
