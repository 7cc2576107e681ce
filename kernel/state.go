package kernel

import "sync"

// State is what kernels keep for one node between calls: the values they
// prepare once and reuse (packed weights, geometry tables, a fused layer's
// parsed body, quantized weights), each under a key the kernel chooses.
// The executor owns one State per node of a bound plan (exec.Bound: one
// per step) and of an Executor, and hands it to the node's kernel in
// Ctx.State, so that prepared state lives exactly as long as the plan that
// uses it and is freed with it; no kernel keeps per-node state in package
// variables (a cache keyed by node pointers outlives plans and hides the
// memory from the memory plan: ONNX Runtime's PrePack keeps it in the
// kernel object for the same reason).
//
// A State is safe for concurrent use. Prepared values MUST be immutable
// once built (or synchronise their own mutable parts, such as buffer free
// lists): concurrent runs of one Executor share them.
type State struct {
	m sync.Map // key -> value
}

// Prepared returns the value kept in c's State under key, building it
// with build (and keeping it) when there is none yet or when valid (nil:
// always valid) reports the kept one stale, for instance built for other
// input shapes. Without a State (c or c.State nil: a caller that keeps
// none) it builds a fresh value on every call, which gives the same bits.
// A kernel that runs another node's kernel under its own Ctx (a fused
// layer's parts) keys the parts' values by their own nodes, so keys must
// be distinct per kernel: a key type of the kernel's package, holding the
// node.
func Prepared[T any](c *Ctx, key any, valid func(T) bool, build func() (T, error)) (T, error) {
	if c == nil || c.State == nil {
		return build()
	}
	if v, ok := c.State.m.Load(key); ok {
		if t := v.(T); valid == nil || valid(t) {
			return t, nil
		}
	}
	t, err := build()
	if err != nil {
		return t, err
	}
	c.State.m.Store(key, t)
	return t, nil
}

// Len reports how many values s holds (tests and memory accounting).
func (s *State) Len() int {
	n := 0
	s.m.Range(func(any, any) bool { n++; return true })
	return n
}
