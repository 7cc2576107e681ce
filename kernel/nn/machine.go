package nn

import (
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
)

// machine is how one kernel call runs, read from its kernel.Ctx: the
// worker pool (embedded, so Run and Workers are the pool's; a nil pool runs
// every range on the caller) and which twins it may use. The package's
// internal functions take it where they would take the pool (under the
// name pool); nothing here lives in package variables, so calls with
// different contexts run side by side.
type machine struct {
	*parallel.Pool
	// fast selects the AVX2+FMA twins (the CPU has them, the Ctx allows
	// them); z the AVX-512 kernels among them.
	fast, z bool
	vec     vmath.Vec
	// force is what a test of this package forces (Ctx.Test); nil
	// everywhere else.
	force *forced
	// k is the call's context, for its kernel.State (nil: none).
	k *kernel.Ctx
}

// forced holds the choices between same-bits code paths that only this
// package's tests and benchmarks make, through kernel.Ctx.Test. Each one
// changes which kernel or tile computes an output, never the output.
type forced struct {
	// noDwFlat skips the AVX-512 flat depthwise kernels (dwFlatJob,
	// dwFlatS2Job), noDwZ the AVX-512 stride-2 row kernel DwS2P1Z, so
	// that the AVX2 row kernels run; dwZRows runs DwS2P1Z per plane and
	// run of rows.
	noDwFlat, noDwZ, dwZRows bool
	// packA and packB pack the GEMM's A and B into panels even where they
	// could be read in place.
	packA, packB bool
	// tileZ and tileZB force a ConvZ tile (conv.direct, blocked).
	tileZ, tileZB zShape
	// noPF turns unitZ's prefetch of the next row group's A off, noPanelPF
	// the direct kernels' prefetch of the next panel (as pfMax 0 would).
	noPF, noPanelPF bool
	// dirKB, when set, overrides the AVX2 direct kernel's k block (steps,
	// dirKB): tests split small layers' chains into several blocks.
	dirKB int
	// gemmZ, when set, overrides the AVX-512 GEMM's register blocking
	// (benchmarks of the tile choice).
	gemmZ *gemmZShape
}

// machineOf reads c's pool and instruction set (c may be nil).
func machineOf(c *kernel.Ctx) machine {
	m := machine{Pool: c.Workers(), fast: c.AVX2() && amd64.Enabled, vec: c.Vec(), k: c}
	m.z = m.fast && c.AVX512() && amd64.EnabledZ
	if c != nil {
		m.force, _ = c.Test.(*forced)
	}
	return m
}

// f returns the forced choices (the zero ones when none are).
func (m machine) f() *forced {
	if m.force == nil {
		return &noForce
	}
	return m.force
}

// noForce is the zero set of forced choices; it is never written.
var noForce forced
