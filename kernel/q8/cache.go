package q8

import (
	"runtime"
	"sync"
	"weak"

	"github.com/vouchml/vouch/ir"
)

// nodeCache holds derived per-node data (packed weights, converted
// tensors) for as long as the node lives: entries are keyed by a weak
// pointer and dropped when the node is collected (a plan unloaded).
type nodeCache[T any] struct{ m sync.Map }

func (c *nodeCache[T]) get(n *ir.Node) (T, bool) {
	v, ok := c.m.Load(weak.Make(n))
	if !ok {
		var z T
		return z, false
	}
	return v.(T), true
}

func (c *nodeCache[T]) put(n *ir.Node, v T) T {
	k := weak.Make(n)
	got, loaded := c.m.LoadOrStore(k, v)
	if !loaded {
		runtime.AddCleanup(n, func(k weak.Pointer[ir.Node]) { c.m.Delete(k) }, k)
	}
	return got.(T)
}
