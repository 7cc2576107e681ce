// Package layering states the module's import rules (DESIGN.md: exec and
// server never depend on the compiler; the plan format does not need the
// ONNX decoder) and checks them against a package graph.
//
// The rules are transitive: a package breaks a rule when anything it
// imports, directly or through other packages, matches a forbidden
// pattern. Only production code counts; tests may import what they like.
// The test of this package runs the rules against `go list -deps` of the
// whole module, so a new import that breaks one fails CI with the chain
// of imports that leads to it.
package layering

import (
	"fmt"
	"sort"
	"strings"
)

// Module is the import path of the vouch module.
const Module = "github.com/vouchml/vouch"

// A Rule forbids the packages matching From to depend on any package
// matching one of Not. Patterns are import paths relative to Module
// ("exec", "kernel/...") or, when they hold a dot in their first element,
// absolute ("google.golang.org/protobuf/..."). "p/..." matches p and
// everything under it; a plain path matches only itself and, for Not,
// everything under it too (depending on onnx/onnxpb is depending on onnx).
type Rule struct {
	From string
	Not  []string
	Why  string
}

// Rules are the module's import rules.
var Rules = []Rule{
	{From: "exec/...", Not: []string{"onnx", "compile", "tune", "quant", "google.golang.org/protobuf"},
		Why: "exec runs plans; it never decodes ONNX or compiles (DESIGN.md)"},
	{From: "plan/...", Not: []string{"onnx", "compile", "google.golang.org/protobuf"},
		Why: "the plan format is self-contained: its tensors use package tensor's codec"},
	{From: "server/...", Not: []string{"compile", "tune", "quant"},
		Why: "the server runs plans and never depends on the compiler (DESIGN.md)"},
	{From: "kernel/...", Not: []string{"server", "audit", "replay", "compile"},
		Why: "kernels are leaves under exec: no serving, audit or compiler code"},
	{From: "tensor", Not: []string{Module + "/..."},
		Why: "tensor is the bottom of the module"},
}

// A Violation is a broken rule with the chain of imports that breaks it,
// from the package to the forbidden one.
type Violation struct {
	Rule  Rule
	Chain []string
}

func (v Violation) String() string {
	return fmt.Sprintf("layering: %s depends on %s (%s), against the rule %q: %s",
		v.Chain[0], v.Chain[len(v.Chain)-1], strings.Join(v.Chain, " -> "), v.Rule.From, v.Rule.Why)
}

func abs(pattern string) string {
	first, _, _ := strings.Cut(pattern, "/")
	if strings.Contains(first, ".") {
		return pattern
	}
	return Module + "/" + pattern
}

// match reports whether path matches pattern; sub makes a plain pattern
// match the packages under it too.
func match(pattern, path string, sub bool) bool {
	p := abs(pattern)
	if base, ok := strings.CutSuffix(p, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == p || sub && strings.HasPrefix(path, p+"/")
}

// Check returns every violation of rules in graph, which maps each import
// path to the packages it imports directly. For each package and rule it
// reports one shortest chain, in a stable order.
func Check(rules []Rule, graph map[string][]string) []Violation {
	var pkgs []string
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	var out []Violation
	for _, r := range rules {
		for _, p := range pkgs {
			if !match(r.From, p, false) {
				continue
			}
			if chain := find(graph, p, r.Not); chain != nil {
				out = append(out, Violation{Rule: r, Chain: chain})
			}
		}
	}
	return out
}

// find returns a shortest import chain from start to a package matching
// one of not, or nil.
func find(graph map[string][]string, start string, not []string) []string {
	prev := map[string]string{start: ""}
	queue := []string{start}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range graph[p] {
			if _, seen := prev[q]; seen {
				continue
			}
			prev[q] = p
			for _, n := range not {
				if match(n, q, true) {
					var chain []string
					for c := q; c != ""; c = prev[c] {
						chain = append(chain, c)
					}
					for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
						chain[i], chain[j] = chain[j], chain[i]
					}
					return chain
				}
			}
			queue = append(queue, q)
		}
	}
	return nil
}
