package q8

import (
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
)

// machine is how one kernel call runs, read from its kernel.Ctx: the
// worker pool (embedded: Run and Workers are the pool's; a nil pool runs
// on the caller) and the twins it may use. Internal functions take it
// where they would take the pool; nothing here lives in package variables.
type machine struct {
	*parallel.Pool
	twins
	// force is what a test of this package forces (Ctx.Test); nil
	// everywhere else.
	force *forced
}

// twins is the choice of implementations: fast the AVX2 tile, quantizer, packers and
// epilogue; vnni the AVX512_VNNI tile among them; half the F16C
// conversion. Each is set only where the CPU has the instructions and the
// context's level allows them (VNNI is AVX-512). Jobs carry it to their
// workers.
type twins struct {
	fast, vnni, half bool
	// s7 the AVX2 u8 × s7 tiles (vnni7.go): set by layer.compute for a
	// layer with 7-bit weights where fast is set and vnni is not.
	s7  bool
	vec vmath.Vec // the Ctx's Vec (the activations' Sigmoid)
}

// forced holds the choices between same-bits paths that only this
// package's tests make, through kernel.Ctx.Test.
type forced struct {
	// noDirectQ8 turns the AVX-512 direct convolution off; noDirect the
	// direct stride-1 GEMM path (packed straight from the padded input).
	noDirectQ8, noDirect bool
	// noRowsQ8 turns the linear layers' u8 x s8 tiles (vnni.go) off.
	noRowsQ8 bool
	// noColsQ8 turns the pointwise convolutions' cols tiles off.
	noColsQ8 bool
	// noQuadQ8 turns the direct convolution's quad tiles off (the pair
	// tiles run).
	noQuadQ8 bool
	// noDWQ8 turns the depthwise path off (the grouped GEMM runs).
	noDWQ8 bool
}

// machineOf reads c's pool and instruction set (c may be nil).
func machineOf(c *kernel.Ctx) machine {
	m := machine{Pool: c.Workers(), twins: twinsOf(c)}
	if c != nil {
		m.force, _ = c.Test.(*forced)
	}
	return m
}

func twinsOf(c *kernel.Ctx) twins {
	return twins{fast: c.AVX2() && hasAVX2, vnni: c.AVX512() && hasVNNI, half: c.AVX2() && hasF16C, vec: c.Vec()}
}

// f returns the forced choices (none when no test forces any).
func (m machine) f() forced {
	if m.force == nil {
		return forced{}
	}
	return *m.force
}
