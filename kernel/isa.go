package kernel

import (
	"fmt"

	"golang.org/x/sys/cpu"

	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
)

// ISA is an instruction-set level that kernels may use on the CPU. Every
// level computes the same bits (each vectorised kernel has a portable twin
// doing the same operations in the same order); the level only decides
// which twin runs. Levels are ordered: a kernel whose fast form needs
// AVX-512 runs it only at ISAAVX512, one that needs AVX2 at ISAAVX2 and
// above, and the portable Go code everywhere.
type ISA uint8

const (
	// ISABest, the zero value, is the highest level this CPU supports.
	ISABest ISA = iota
	// ISAPortable runs the portable Go twins only (as on a CPU without
	// AVX2, or another architecture).
	ISAPortable
	// ISAAVX2 allows AVX2, FMA and F16C kernels, and no AVX-512 ones.
	ISAAVX2
	// ISAAVX512 allows every kernel the CPU supports, AVX-512 ones
	// (AVX-512F, and VNNI/BW where a kernel needs them) included.
	ISAAVX512
)

var isaNames = [...]string{ISABest: "best", ISAPortable: "portable", ISAAVX2: "avx2", ISAAVX512: "avx512"}

// String returns the level's name as ParseISA reads it.
func (l ISA) String() string {
	if int(l) < len(isaNames) {
		return isaNames[l]
	}
	return fmt.Sprintf("ISA(%d)", uint8(l))
}

// ParseISA reads a level's name: "best" (or ""), "portable", "avx2" or
// "avx512".
func ParseISA(s string) (ISA, error) {
	if s == "" {
		return ISABest, nil
	}
	for l, name := range isaNames {
		if s == name {
			return ISA(l), nil
		}
	}
	return 0, fmt.Errorf("kernel: unknown instruction set %q (want best, portable, avx2 or avx512)", s)
}

// CPUISA returns the highest level this CPU (and OS) supports: ISAAVX512
// where it has AVX-512F on top of AVX2 and FMA, ISAAVX2 where it has AVX2
// and FMA, else ISAPortable. It never returns ISABest.
func CPUISA() ISA {
	x := cpu.X86
	switch {
	case x.HasAVX && x.HasAVX2 && x.HasFMA && x.HasAVX512F:
		return ISAAVX512
	case x.HasAVX && x.HasAVX2 && x.HasFMA:
		return ISAAVX2
	}
	return ISAPortable
}

// ISAs lists the levels this CPU can run, portable first: the
// implementations a twin test compares (see package kerneltest).
func ISAs() []ISA {
	out := []ISA{ISAPortable}
	for l := ISAAVX2; l <= CPUISA(); l++ {
		out = append(out, l)
	}
	return out
}

// Level returns the level the kernels run at under c: c.ISA lowered to
// what the CPU supports, or the CPU's highest level when c is nil or
// c.ISA is ISABest. It never returns ISABest.
func (c *Ctx) Level() ISA {
	cpuL := CPUISA()
	if c == nil || c.ISA == ISABest || c.ISA > cpuL {
		return cpuL
	}
	return c.ISA
}

// AVX2 reports whether kernels may use AVX2 (and FMA, F16C) under c.
// A kernel still checks that the CPU has the exact features it needs.
func (c *Ctx) AVX2() bool { return c.Level() >= ISAAVX2 }

// AVX512 reports whether kernels may use AVX-512 under c.
func (c *Ctx) AVX512() bool { return c.Level() >= ISAAVX512 }

// Vec returns vmath's slice functions at c's level.
func (c *Ctx) Vec() vmath.Vec {
	switch c.Level() {
	case ISAAVX512:
		return vmath.Vector(true)
	case ISAAVX2:
		return vmath.Vector(false)
	}
	return vmath.Vec{}
}

// Workers returns the pool a kernel splits its outputs over: c.Pool, or
// nil (every range runs on the caller) when c or its Pool is nil. It never
// changes a kernel's bits.
func (c *Ctx) Workers() *parallel.Pool {
	if c == nil {
		return nil
	}
	return c.Pool
}

// WithISA returns a copy of c (or of the zero Ctx when c is nil) that runs
// at level l.
func (c *Ctx) WithISA(l ISA) *Ctx {
	var d Ctx
	if c != nil {
		d = *c
	}
	d.ISA = l
	return &d
}
