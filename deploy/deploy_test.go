package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vouchml/vouch/internal/cli"
	"github.com/vouchml/vouch/server"
)

// serveFlags returns `vouch serve`'s flags: name → whether it takes a value.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	var out bytes.Buffer
	cli.NewMain(&out, &out).Run(context.Background(), []string{"serve", "--help"})
	re := regexp.MustCompile(`^  -([a-z0-9-]+)( \S+)?$`)
	flags := map[string]bool{}
	for _, line := range strings.Split(out.String(), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			flags[m[1]] = m[2] != ""
		}
	}
	if len(flags) < 20 || !flags["listen"] {
		t.Fatalf("could not read serve's flags from its help:\n%s", out.String())
	}
	return flags
}

// container is what the tests check of a way to run vouch.
type container struct {
	where string
	args  []string          // after the program name
	ports map[int]bool      // container ports declared
	http  map[string]string // probe kind → HTTP path
	grpc  map[string]int    // probe kind → gRPC health port
}

// checkArgs checks that args is `serve` with flags that exist, each value
// flag with its value, and that the listen and grpc ports are declared.
func checkArgs(t *testing.T, flags map[string]bool, c container) {
	t.Helper()
	if len(c.args) == 0 || c.args[0] != "serve" {
		t.Errorf("%s: args %q do not start with serve", c.where, c.args)
		return
	}
	addrs := map[string]string{}
	for i := 1; i < len(c.args); i++ {
		a := c.args[i]
		name, val, hasEq := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") {
			t.Errorf("%s: stray argument %q", c.where, a)
			continue
		}
		takes, ok := flags[name]
		if !ok {
			t.Errorf("%s: vouch serve has no flag --%s", c.where, name)
			continue
		}
		if takes && !hasEq {
			if i+1 >= len(c.args) || strings.HasPrefix(c.args[i+1], "--") {
				t.Errorf("%s: --%s needs a value", c.where, name)
				continue
			}
			i++
			val = c.args[i]
		}
		addrs[name] = val
	}
	for _, f := range []string{"listen", "grpc"} {
		if addrs[f] == "" {
			t.Errorf("%s: no --%s", c.where, f)
			continue
		}
		host, port, err := net.SplitHostPort(addrs[f])
		if err != nil {
			t.Errorf("%s: --%s %q: %v", c.where, f, addrs[f], err)
			continue
		}
		if host != "0.0.0.0" && host != "" {
			t.Errorf("%s: --%s %q listens on %s only: unreachable from outside the container", c.where, f, addrs[f], host)
		}
		p, _ := strconv.Atoi(port)
		if c.ports != nil && !c.ports[p] && !(f == "listen" && len(c.http) > 0 && c.where == "kserve runtime") {
			t.Errorf("%s: --%s port %d is not a declared container port (%v)", c.where, f, p, c.ports)
		}
	}
	if addrs["credentials"] == "" {
		t.Errorf("%s: no --credentials: every caller would be anonymous", c.where)
	}
	if addrs["log-format"] != "" && addrs["log-format"] != "json" && addrs["log-format"] != "text" {
		t.Errorf("%s: --log-format %q", c.where, addrs["log-format"])
	}
}

// checkProbes asks a real server each HTTP probe path (it must answer,
// not 404) and each gRPC probe the standard health service.
func checkProbes(t *testing.T, c container) {
	t.Helper()
	s := server.New(server.Options{})
	for kind, path := range c.http {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code == 404 || rec.Code == 405 {
			t.Errorf("%s: %s probe %s: the server answers %d", c.where, kind, path, rec.Code)
		}
	}
	if len(c.grpc) == 0 {
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := s.NewGRPCServer()
	go g.Serve(l)
	defer g.Stop()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for kind := range c.grpc {
		r, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
		if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("%s: %s gRPC health probe: %v %v", c.where, kind, r, err)
		}
	}
}

// fromPodContainer reads a Kubernetes container spec.
func fromPodContainer(where string, m map[string]any) container {
	c := container{where: where, ports: map[int]bool{}, http: map[string]string{}, grpc: map[string]int{}}
	for _, a := range list(m["args"]) {
		c.args = append(c.args, a.(string))
	}
	for _, p := range list(m["ports"]) {
		c.ports[toInt(p.(map[string]any)["containerPort"])] = true
	}
	for _, kind := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
		p, ok := m[kind].(map[string]any)
		if !ok {
			continue
		}
		if h, ok := p["httpGet"].(map[string]any); ok {
			c.http[kind] = h["path"].(string)
		}
		if g, ok := p["grpc"].(map[string]any); ok {
			c.grpc[kind] = toInt(g["port"])
		}
	}
	return c
}

func list(v any) []any { l, _ := v.([]any); return l }

func toInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return -1
}

func yamlDocs(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("yaml: %v\n%s", err, b)
		}
		out = append(out, m)
	}
}

func dig(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func TestKServeRuntime(t *testing.T) {
	flags := serveFlags(t)
	b, err := os.ReadFile("kserve/cluster-serving-runtime.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := yamlDocs(t, b)[0]
	if doc["kind"] != "ClusterServingRuntime" {
		t.Fatalf("kind %v", doc["kind"])
	}
	protos := map[string]bool{}
	for _, p := range list(dig(doc, "spec", "protocolVersions")) {
		protos[p.(string)] = true
	}
	if !protos["v2"] || !protos["grpc-v2"] {
		t.Errorf("protocolVersions %v: vouch speaks the Open Inference Protocol (v2, grpc-v2)", protos)
	}
	cs := list(dig(doc, "spec", "containers"))
	if len(cs) != 1 {
		t.Fatalf("%d containers", len(cs))
	}
	c := fromPodContainer("kserve runtime", cs[0].(map[string]any))
	checkArgs(t, flags, c)
	checkProbes(t, c)
	if !strings.HasPrefix(c.args[2], "/mnt/models/") {
		t.Errorf("the bundle %q is not under KServe's model mount /mnt/models", c.args[2])
	}
	if dig(cs[0].(map[string]any), "securityContext", "runAsNonRoot") != true {
		t.Error("the runtime's container may run as root")
	}

	b, err = os.ReadFile("kserve/inference-service.yaml")
	if err != nil {
		t.Fatal(err)
	}
	isvc := yamlDocs(t, b)[0]
	if dig(isvc, "spec", "predictor", "model", "runtime") != dig(doc, "metadata", "name") {
		t.Errorf("the InferenceService names runtime %v, the runtime is %v", dig(isvc, "spec", "predictor", "model", "runtime"), dig(doc, "metadata", "name"))
	}
	if dig(isvc, "spec", "predictor", "model", "modelFormat", "name") != "vouch" {
		t.Error("the InferenceService's model format is not the runtime's")
	}
}

// renderChart renders the chart's templates the way helm does for these
// templates (plain Go templates over .Values, .Release and .Chart).
func renderChart(t *testing.T, dir, release string) []byte {
	t.Helper()
	var values, chart map[string]any
	for f, dst := range map[string]*map[string]any{"values.yaml": &values, "Chart.yaml": &chart} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, dst); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	data := map[string]any{"Values": values, "Chart": map[string]any{"Name": chart["name"], "Version": chart["version"]},
		"Release": map[string]any{"Name": release, "Namespace": "default"}}
	files, _ := filepath.Glob(filepath.Join(dir, "templates", "*.yaml"))
	var out bytes.Buffer
	for _, f := range files {
		tm, err := template.New(filepath.Base(f)).Option("missingkey=error").ParseFiles(f)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString("---\n")
		if err := tm.Execute(&out, data); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	return out.Bytes()
}

func TestHelmChart(t *testing.T) {
	flags := serveFlags(t)
	docs := yamlDocs(t, renderChart(t, "helm/vouch", "credit"))
	var sts, svc map[string]any
	for _, d := range docs {
		switch d["kind"] {
		case "StatefulSet":
			sts = d
		case "Service":
			svc = d
		}
	}
	if sts == nil || svc == nil {
		t.Fatalf("rendered kinds: want a StatefulSet and a Service")
	}
	cs := list(dig(sts, "spec", "template", "spec", "containers"))
	c := fromPodContainer("helm chart", cs[0].(map[string]any))
	checkArgs(t, flags, c)
	checkProbes(t, c)
	named := map[string]int{}
	for _, p := range list(cs[0].(map[string]any)["ports"]) {
		pm := p.(map[string]any)
		named[pm["name"].(string)] = toInt(pm["containerPort"])
	}
	for _, p := range list(dig(svc, "spec", "ports")) {
		pm := p.(map[string]any)
		if named[pm["targetPort"].(string)] == 0 {
			t.Errorf("service port %v targets %v, which the container does not name", pm["name"], pm["targetPort"])
		}
	}
	if dig(sts, "spec", "template", "spec", "securityContext", "runAsNonRoot") != true {
		t.Error("the chart's pod may run as root")
	}
	grace := toInt(dig(sts, "spec", "template", "spec", "terminationGracePeriodSeconds"))
	for i, a := range c.args {
		if a == "--shutdown-timeout" {
			if d, _ := strconv.Atoi(strings.TrimSuffix(c.args[i+1], "s")); d >= grace {
				t.Errorf("terminationGracePeriodSeconds %d does not leave --shutdown-timeout %s to drain", grace, c.args[i+1])
			}
		}
	}
}

func TestSystemdUnit(t *testing.T) {
	flags := serveFlags(t)
	f, err := os.Open("systemd/vouch.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kv := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			kv[k] = v
		}
	}
	exec := strings.Fields(kv["ExecStart"])
	if len(exec) < 2 || exec[0] != "/usr/local/bin/vouch" {
		t.Fatalf("ExecStart %q", kv["ExecStart"])
	}
	checkArgs(t, flags, container{where: "systemd unit", args: exec[1:]})
	if kv["User"] == "" || kv["User"] == "root" {
		t.Errorf("the unit runs as %q", kv["User"])
	}
	if kv["KillSignal"] != "SIGTERM" {
		t.Errorf("KillSignal %q: vouch drains on SIGTERM", kv["KillSignal"])
	}
}

func TestDockerfile(t *testing.T) {
	flags := serveFlags(t)
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var cmd []string
	var user string
	stages := 0
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "FROM "):
			stages++
		case strings.HasPrefix(line, "CMD "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "CMD ")), &cmd); err != nil {
				t.Fatalf("CMD is not an exec-form array: %v", err)
			}
		case strings.HasPrefix(line, "USER "):
			user = strings.TrimPrefix(line, "USER ")
		}
	}
	if stages < 2 {
		t.Error("the Dockerfile is not multi-stage")
	}
	if !strings.Contains(string(b), "CGO_ENABLED=0") {
		t.Error("the binary is not built with CGO_ENABLED=0")
	}
	if !strings.HasPrefix(user, "65532") {
		t.Errorf("USER %q", user)
	}
	checkArgs(t, flags, container{where: "Dockerfile", args: cmd, ports: map[int]bool{8080: true, 8081: true}})
}
