package ir

import (
	"fmt"
	"sort"
)

// Verify checks that g is well formed and sorts its nodes topologically:
// every node input is defined (by a graph input, an initializer, an earlier
// node or, for subgraphs, a name in outer), no value is produced twice, every
// graph output is produced, and there are no cycles. Subgraphs in attributes
// are verified recursively with g's names visible to them. Errors name the
// node and the value.
func Verify(g *Graph, outer map[string]bool) error {
	defined := map[string]bool{}
	for k := range outer {
		defined[k] = true
	}
	local := map[string]string{} // name -> who defines it in this graph
	define := func(name, by string) error {
		if name == "" {
			return nil
		}
		if prev, ok := local[name]; ok {
			return fmt.Errorf("ir: graph %q: value %q defined twice (by %s and %s)", g.Name, name, prev, by)
		}
		local[name] = by
		defined[name] = true
		return nil
	}
	for _, v := range g.Inputs {
		if err := define(v.Name, "graph input"); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(g.Initializers))
	for name := range g.Initializers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := local[name]; ok {
			continue // legacy models list initializers among inputs
		}
		if err := define(name, "initializer"); err != nil {
			return err
		}
	}
	// Kahn's algorithm over producer edges, stable in the file's order.
	producer := map[string]int{}
	for i, n := range g.Nodes {
		if n.OpType == "" {
			return fmt.Errorf("ir: graph %q: node %d has no op_type", g.Name, i)
		}
		for _, o := range n.Outputs {
			if o == "" {
				continue
			}
			if prev, ok := local[o]; ok {
				return fmt.Errorf("ir: graph %q: %s: output %q already defined by %s", g.Name, n.Label(), o, prev)
			}
			if j, ok := producer[o]; ok {
				return fmt.Errorf("ir: graph %q: %s: output %q already produced by %s", g.Name, n.Label(), o, g.Nodes[j].Label())
			}
			producer[o] = i
		}
	}
	deps := make([][]int, len(g.Nodes))
	indeg := make([]int, len(g.Nodes))
	users := make([][]int, len(g.Nodes))
	for i, n := range g.Nodes {
		for _, in := range nodeRefs(n) {
			if j, ok := producer[in]; ok {
				if j == i {
					return fmt.Errorf("ir: graph %q: %s uses its own output %q", g.Name, n.Label(), in)
				}
				deps[i] = append(deps[i], j)
				users[j] = append(users[j], i)
				indeg[i]++
			} else if !defined[in] {
				return fmt.Errorf("ir: graph %q: %s: input %q is not defined by any graph input, initializer or node", g.Name, n.Label(), in)
			}
		}
	}
	order := make([]*Node, 0, len(g.Nodes))
	ready := []int{}
	for i := range g.Nodes {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		sort.Ints(ready)
		i := ready[0]
		ready = ready[1:]
		order = append(order, g.Nodes[i])
		for _, u := range users[i] {
			indeg[u]--
			if indeg[u] == 0 {
				ready = append(ready, u)
			}
		}
	}
	if len(order) != len(g.Nodes) {
		for i, d := range indeg {
			if d > 0 {
				return fmt.Errorf("ir: graph %q: cycle through %s", g.Name, g.Nodes[i].Label())
			}
		}
	}
	g.Nodes = order
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			if o != "" {
				defined[o] = true
			}
		}
	}
	for _, n := range g.Nodes {
		for _, a := range n.Attrs {
			subs := a.Graphs
			if a.G != nil {
				subs = append([]*Graph{a.G}, subs...)
			}
			for _, sg := range subs {
				if err := Verify(sg, defined); err != nil {
					return fmt.Errorf("ir: in subgraph %q of %s: %w", a.Name, n.Label(), err)
				}
			}
		}
	}
	for _, o := range g.Outputs {
		if !defined[o.Name] {
			return fmt.Errorf("ir: graph %q: output %q is not produced", g.Name, o.Name)
		}
	}
	return nil
}

// nodeRefs lists the names a node reads: its inputs plus the outer-scope
// names its subgraphs use (so the producer of those runs first).
func nodeRefs(n *Node) []string {
	var refs []string
	for _, in := range n.Inputs {
		if in != "" {
			refs = append(refs, in)
		}
	}
	return append(refs, Captures(n)...)
}

// Captures lists the outer-scope names n's subgraphs (a Loop's or an If's
// bodies) read without n taking them as inputs, per subgraph in first-use
// order; a name read by two subgraphs appears twice.
func Captures(n *Node) []string {
	var refs []string
	for _, a := range n.Attrs {
		subs := a.Graphs
		if a.G != nil {
			subs = append([]*Graph{a.G}, subs...)
		}
		for _, sg := range subs {
			refs = append(refs, FreeVars(sg)...)
		}
	}
	return refs
}

// FreeVars returns the names a graph reads that it does not define itself
// (references to enclosing scopes), in first-use order.
func FreeVars(g *Graph) []string {
	local := map[string]bool{}
	for _, v := range g.Inputs {
		local[v.Name] = true
	}
	for k := range g.Initializers {
		local[k] = true
	}
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			local[o] = true
		}
	}
	seen := map[string]bool{}
	var free []string
	add := func(name string) {
		if name != "" && !local[name] && !seen[name] {
			seen[name] = true
			free = append(free, name)
		}
	}
	for _, n := range g.Nodes {
		for _, in := range nodeRefs(n) {
			add(in)
		}
	}
	for _, o := range g.Outputs {
		add(o.Name)
	}
	return free
}
