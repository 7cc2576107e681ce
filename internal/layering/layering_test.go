package layering

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// goList returns the import graph of the whole module and everything it
// depends on, production files only, under the given build tags.
func goList(t *testing.T, tags string) map[string][]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("layering: the go command is needed to list the module's packages: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-deps", "-e", "-tags", tags,
		"-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", Module+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("layering: go list -tags %q: %v\n%s", tags, err, stderr.Bytes())
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		graph[f[0]] = f[1:]
	}
	return graph
}

func TestModuleRules(t *testing.T) {
	for _, tags := range []string{"", "cuda", "ort", "purego"} {
		graph := goList(t, tags)
		// The rules must have something to check: each From names a
		// package that exists (a renamed package would make its rule
		// pass silently).
		for _, r := range Rules {
			found := false
			for p := range graph {
				found = found || match(r.From, p, false)
			}
			if !found {
				t.Errorf("layering: rule %q matches no package of the module", r.From)
			}
		}
		for _, v := range Check(Rules, graph) {
			t.Errorf("tags %q: %v", tags, v)
		}
	}
}

// Check finds a rule broken at any depth, and reports the chain.
func TestCheckFindsBrokenRules(t *testing.T) {
	m := func(p string) string { return Module + "/" + p }
	pb := "google.golang.org/protobuf/proto"
	graph := map[string][]string{
		m("exec"):          {m("plan"), m("kernel"), "fmt"},
		m("plan"):          {m("tensor"), m("onnx")},
		m("onnx"):          {m("onnx/onnxpb"), m("tensor")},
		m("onnx/onnxpb"):   {pb},
		m("kernel"):        {m("tensor")},
		m("kernel/nn"):     {m("kernel"), m("audit")},
		m("server"):        {m("exec"), m("registry")},
		m("registry"):      {m("compile/pass")},
		m("compile/pass"):  {m("ir")},
		m("tensor"):        {"fmt"},
		m("audit"):         {m("tensor")},
		m("ir"):            {m("tensor")},
		pb:                 nil,
		"fmt":              nil,
		m("replay"):        {m("onnx")}, // no rule forbids this
		m("exec/internal"): {m("compile/pass")},
	}
	var got []string
	for _, v := range Check(Rules, graph) {
		got = append(got, strings.Join(v.Chain, " "))
	}
	want := []string{
		m("exec") + " " + m("plan") + " " + m("onnx"),
		m("exec/internal") + " " + m("compile/pass"),
		m("plan") + " " + m("onnx"),
		m("server") + " " + m("registry") + " " + m("compile/pass"),
		m("kernel/nn") + " " + m("audit"),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// With plan fixed, neither exec nor plan breaks a rule any more.
	graph[m("plan")] = []string{m("tensor")}
	for _, v := range Check(Rules, graph) {
		if v.Chain[0] == m("exec") || v.Chain[0] == m("plan") {
			t.Errorf("after the fix: %v", v)
		}
	}
}
