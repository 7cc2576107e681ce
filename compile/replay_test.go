package compile_test

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/vouchml/vouch/compile"
)

var update = flag.Bool("update", false, "rewrite testdata/plan_digests.golden from this build")

// goldenModels are the shared models whose plan digests are committed.
var goldenModels = []string{"breast_cancer_mlp", "cancer_logreg", "digits_cnn", "mobilenet_v2", "resnet18", "tiny_bert"}

// goldenTarget fixes the target features, so that the digests do not
// depend on the host that runs the test.
var goldenTarget = []string{"avx", "avx2", "f16c", "fma"}

const goldenFile = "testdata/plan_digests.golden"

func goldenDigests(t *testing.T) map[string]string {
	got := map[string]string{}
	for _, name := range goldenModels {
		o := compile.DefaultOptions()
		o.TargetFeatures = goldenTarget
		res, _ := build(t, name, o)
		got[name] = res.Digest
	}
	return got
}

func readGolden(t *testing.T) map[string]string {
	f, err := os.Open(goldenFile)
	if err != nil {
		t.Fatalf("%v (run go test ./compile -run TestPlanDigestsGolden -update)", err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, digest, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("%s: bad line %q", goldenFile, line)
		}
		want[name] = strings.TrimSpace(digest)
	}
	return want
}

// TestPlanDigestsGolden is the compiler's "process replay" (tinygrad's
// name): the default build of every shared model must give the committed
// plan digest. A change to the compiler, a kernel's tactic rule or the
// plan format that changes a plan fails here until it is re-recorded with
// -update, so every plan change is a visible, reviewed diff of the golden
// file. The default build is a pure function of model, options, vouch
// version and target features, so the digests hold on any host.
func TestPlanDigestsGolden(t *testing.T) {
	got := goldenDigests(t)
	if *update {
		var b strings.Builder
		b.WriteString("# plan digests of the default build (compile.DefaultOptions, target features " + strings.Join(goldenTarget, ",") + ", producer \"test\")\n")
		b.WriteString("# regenerate: go test ./compile -run TestPlanDigestsGolden -update\n")
		names := make([]string, 0, len(got))
		for n := range got {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(&b, "%s %s\n", n, got[n])
		}
		if err := os.MkdirAll(filepath.Dir(goldenFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readGolden(t)
	for _, n := range goldenModels {
		if got[n] != want[n] {
			t.Errorf("%s: plan digest %s, golden %s: the default build changed (if intended, rerun with -update and say why in the commit)", n, got[n], want[n])
		}
	}
}

// TestBuildReproducible: two default builds in one process, and a build
// in a child process at GOMAXPROCS=1, give byte-identical plans (issue 20
// A5: timed builds differed in 11-36 tactic choices).
func TestBuildReproducible(t *testing.T) {
	if os.Getenv("VOUCH_REPRO_CHILD") == "1" {
		o := compile.DefaultOptions()
		o.TargetFeatures = goldenTarget
		res, _ := build(t, os.Getenv("VOUCH_REPRO_MODEL"), o)
		fmt.Printf("digest=%s procs=%d\n", res.Digest, runtime.GOMAXPROCS(0))
		return
	}
	for _, name := range []string{"mobilenet_v2", "resnet18"} {
		o := compile.DefaultOptions()
		o.TargetFeatures = goldenTarget
		a, _ := build(t, name, o)
		b, _ := build(t, name, o)
		if a.Digest != b.Digest {
			t.Errorf("%s: two builds gave plans %s and %s", name, a.Digest, b.Digest)
		}
		cmd := osexec.Command(os.Args[0], "-test.run=^TestBuildReproducible$")
		cmd.Env = append(os.Environ(), "VOUCH_REPRO_CHILD=1", "VOUCH_REPRO_MODEL="+name, "GOMAXPROCS=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child build: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "digest="+a.Digest+" procs=1") {
			t.Errorf("%s: the build at GOMAXPROCS=1 differs: parent %s, child said\n%s", name, a.Digest, out)
		}
	}
}
