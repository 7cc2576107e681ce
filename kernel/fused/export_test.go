package fused

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/vmath"
)

// SiLUForm is one SiLU Act, for the external tests.
type SiLUForm struct {
	Name     string
	F        func(vmath.Vec, []float32, []float32)
	V        vmath.Vec
	SigFirst bool
}

// SiLUForms lists every SiLU Act this CPU can run, with the Vec each
// takes.
func SiLUForms() []SiLUForm {
	f := []SiLUForm{
		{"portable", siluXS, vmath.Vec{}, false}, {"portable/sx", siluSX, vmath.Vec{}, true},
		{"avx2", siluXS, vmath.Vector(false), false}, {"avx2/sx", siluSX, vmath.Vector(false), true},
	}
	if amd64.EnabledZ {
		f = append(f, SiLUForm{"avx512", siluXSZ, vmath.Vec{}, false}, SiLUForm{"avx512/sx", siluSXZ, vmath.Vec{}, true})
	}
	return f
}

// SiLUAct is siluAct.
var SiLUAct = siluAct

// HardSwishActs is hardSwishActs.
var HardSwishActs = hardSwishActs

// ChainSteps returns the op types of the steps of a run of the chain
// layer n prepared in ctx's State (nil when none is kept).
func ChainSteps(ctx *kernel.Ctx, n *ir.Node) []string {
	e, _ := kernel.Prepared(ctx, chainKey{n}, nil, func() (*chainEntry, error) { return &chainEntry{}, nil })
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.free) == 0 {
		return nil
	}
	var ops []string
	for _, s := range e.free[0].steps {
		if s.op.Run == nil { // the fused scores step has only Into
			ops = append(ops, "scores")
			continue
		}
		ops = append(ops, s.n.OpType)
	}
	return ops
}
