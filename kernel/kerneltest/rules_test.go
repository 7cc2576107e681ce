package kerneltest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// pending lists the packages that still break a rule, with the reason; a
// package listed here that no longer breaks it fails the test, so that
// the entry goes.
var pending = map[string]string{}

// TestNoKernelGlobals walks kernel/... and enforces DESIGN.md's rule that
// no kernel state lives in package globals: the instruction set, the
// worker pool and per-node state come in kernel.Ctx. In non-test files it
// forbids package-level sync.Map variables and weak node keys (per-node
// caches), package variables named test* (test switches in production
// code), functions named UsePortable, and calls of parallel.Default
// (kernel/parallel itself defines it for the executor).
func TestNoKernelGlobals(t *testing.T) {
	root := filepath.Join("..")
	broken := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		pkg := filepath.ToSlash(filepath.Join("kernel", filepath.Dir(rel)))
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		report := func(n ast.Node, what string) {
			broken[pkg] = append(broken[pkg], fset.Position(n.Pos()).String()+": "+what)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.Name == "UsePortable" {
					report(d, "a package-level UsePortable switch")
				}
			case *ast.GenDecl:
				if d.Tok != token.VAR {
					continue
				}
				for _, s := range d.Specs {
					vs := s.(*ast.ValueSpec)
					for _, name := range vs.Names {
						if strings.HasPrefix(name.Name, "test") {
							report(name, "a test switch in a package variable: "+name.Name)
						}
					}
					if vs.Type != nil && mentions(vs.Type, "sync", "Map") {
						report(vs, "a package-level sync.Map (a per-node cache?)")
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok {
					switch {
					case x.Name == "parallel" && sel.Sel.Name == "Default" && pkg != "kernel/parallel":
						report(sel, "parallel.Default: the pool comes in kernel.Ctx")
					case x.Name == "weak" && sel.Sel.Name == "Make":
						report(sel, "a weakly keyed cache: per-node state goes in kernel.State")
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(broken) == 0 && len(pending) == 0 {
		return
	}
	var pkgs []string
	for p := range broken {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		if _, ok := pending[p]; ok {
			continue
		}
		t.Errorf("%s keeps kernel state in package globals:\n\t%s", p, strings.Join(broken[p], "\n\t"))
	}
	for p := range pending {
		if _, ok := broken[p]; !ok {
			t.Errorf("%s no longer breaks the rule: remove it from pending", p)
		}
	}
}

// mentions reports whether the type expression refers to pkg.name.
func mentions(e ast.Expr, pkg, name string) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == pkg && sel.Sel.Name == name {
				found = true
			}
		}
		return !found
	})
	return found
}
