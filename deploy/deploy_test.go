package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ruvllm/ruvllm/api"
	"github.com/ruvllm/ruvllm/backends"
	_ "github.com/ruvllm/ruvllm/backends/native" // opened by name
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/session"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serverMetrics is the /metrics text of a server on the synthesized tiny
// model after one chat completion, so that its histograms have series.
func serverMetrics(t *testing.T) string {
	t.Helper()
	m := testmodel.Tiny(t)
	eng, err := backends.NewEngine(testmodel.Backend(t, "native", m, backends.Options{Threads: 1}), backends.EngineOptions{Parallel: 1, MaxLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	s := api.New(api.Options{})
	if err := s.AddModel(&session.Model{ID: "tiny", Tokenizer: m.Tokenizer, Chat: m, Engine: eng}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat completion: %s", resp.Status)
	}
	return get(t, hs.URL+"/metrics")
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// exported reports whether the exposition text has a series of name.
func exported(text, name string) bool {
	for line := range strings.Lines(text) {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, " ")) {
			return true
		}
	}
	return false
}

// dashboardQueries is every PromQL expression of the dashboard.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(readFile(t, "grafana/dashboards/ruvllm.json"), &d); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

var (
	// What a PromQL expression has besides metric names: label matchers,
	// grouping clauses and range selectors.
	promMatchers = regexp.MustCompile(`\{[^}]*\}|\b(by|without)\s*\([^)]*\)|\[[^\]]*\]`)
	promName     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// seriesNames is the metric names of the expressions with one of prefixes.
func seriesNames(exprs []string, prefixes ...string) []string {
	var names []string
	for _, e := range exprs {
		for _, n := range promName.FindAllString(promMatchers.ReplaceAllString(e, " "), -1) {
			for _, p := range prefixes {
				if strings.HasPrefix(n, p) && !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	return names
}

// TestDashboardSeries checks that every ruvllm and vllm series the Grafana
// dashboard queries is one a server exports, and that the dashboard shows
// what the issue asks for.
func TestDashboardSeries(t *testing.T) {
	exprs := dashboardQueries(t)
	text := serverMetrics(t)
	names := seriesNames(exprs, "ruvllm_", "vllm:")
	for _, want := range []string{
		"ruvllm_generation_tokens_total",            // tokens/s
		"ruvllm_time_to_first_token_seconds_bucket", // TTFT
		"ruvllm_queue_depth",                        // queue
		"vllm:kv_cache_usage_perc",                  // KV use
		"ruvllm_kv_prefix_hit_tokens_total",         // prefix hits
	} {
		if !slices.Contains(names, want) {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
	for _, n := range names {
		if !exported(text, n) {
			t.Errorf("the dashboard queries %s, which the server does not export", n)
		}
	}
}

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestHAProxyConfig checks haproxy.cfg with the haproxy found on PATH: the
// file is valid with the compose file's addresses (the defaults) and with
// loopback ones, and the dashboard's HAProxy series are ones its exporter
// serves. It skips without haproxy.
func TestHAProxyConfig(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed (Debian: apt-get install haproxy)")
	}
	metrics := freePort(t)
	env := append(os.Environ(), "RUVLLM_LB_BIND="+freePort(t), "RUVLLM_LB_METRICS="+metrics,
		"RUVLLM_REPLICA_1="+freePort(t), "RUVLLM_REPLICA_2="+freePort(t))
	for _, c := range []struct {
		name string
		env  []string
	}{{"compose addresses", os.Environ()}, {"loopback addresses", env}} {
		cmd := exec.Command(bin, "-c", "-f", "haproxy/haproxy.cfg")
		cmd.Env = c.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: haproxy -c: %v\n%s", c.name, err, out)
		}
	}
	cmd := exec.Command(bin, "-db", "-f", "haproxy/haproxy.cfg")
	cmd.Env = env
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var text string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if text = string(b); resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy's exporter did not answer: %v\n%s", err, log.String())
		}
	}
	for _, n := range seriesNames(dashboardQueries(t), "haproxy_") {
		if !exported(text, n) {
			t.Errorf("the dashboard queries %s, which HAProxy does not export", n)
		}
	}
	if !exported(text, "haproxy_backend_active_servers") {
		t.Error("test-local.sh waits for haproxy_backend_active_servers, which HAProxy does not export")
	}
}

// compose is what the tests read of docker-compose.yml.
type compose struct {
	Services map[string]struct {
		Image       string
		Command     []string
		Volumes     []string
		Environment map[string]string
		DependsOn   yaml.Node `yaml:"depends_on"`
	}
	Volumes map[string]any
}

// interpolate replaces ${NAME:-default} by its default, as compose does
// when NAME is unset.
func interpolate(s string) string {
	return regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`).ReplaceAllString(s, "$1")
}

// TestCompose checks docker-compose.yml against the files it names: two
// replicas on one model volume, pulled once before they start; HAProxy
// with the repository's config, whose default addresses are the replicas'
// names and port; Prometheus scraping every replica and HAProxy.
func TestCompose(t *testing.T) {
	var c compose
	if err := yaml.Unmarshal(readFile(t, "../docker-compose.yml"), &c); err != nil {
		t.Fatal(err)
	}
	var replicas []string
	for name, s := range c.Services {
		if len(s.Command) > 0 && s.Command[0] == "serve" {
			replicas = append(replicas, name)
		}
		for _, v := range s.Volumes {
			src := strings.Split(v, ":")[0]
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join("..", src)); err != nil {
					t.Errorf("%s mounts %s: %v", name, src, err)
				}
			}
		}
	}
	slices.Sort(replicas)
	if len(replicas) < 2 {
		t.Fatalf("replicas %v, want two or more", replicas)
	}
	model := c.Services["model"]
	if len(model.Command) < 2 || model.Command[0] != "pull" {
		t.Fatalf("the model service runs %v, want pull", model.Command)
	}
	cfg := string(readFile(t, "haproxy/haproxy.cfg"))
	prom := string(readFile(t, "prometheus/prometheus.yml"))
	for i, name := range replicas {
		s := c.Services[name]
		args := strings.Join(s.Command, " ")
		if !slices.Contains(s.Command, model.Command[1]) {
			t.Errorf("%s serves %q, but the model service pulls %q", name, args, model.Command[1])
		}
		if !strings.Contains(args, "--port=8080") || !strings.Contains(args, "--host=0.0.0.0") {
			t.Errorf("%s: %s, want it on 0.0.0.0:8080", name, args)
		}
		if !slices.Contains(s.Volumes, "models:/models:ro") {
			t.Errorf("%s volumes %v, want the shared model volume", name, s.Volumes)
		}
		var deps map[string]struct{ Condition string }
		if err := s.DependsOn.Decode(&deps); err != nil || deps["model"].Condition != "service_completed_successfully" {
			t.Errorf("%s does not wait for the model service: %v %v", name, deps, err)
		}
		addr := name + ":8080"
		if want := fmt.Sprintf(`"${RUVLLM_REPLICA_%d-%s}"`, i+1, addr); !strings.Contains(cfg, want) {
			t.Errorf("haproxy.cfg lacks %s", want)
		}
		if !strings.Contains(prom, `"`+addr+`"`) {
			t.Errorf("prometheus.yml does not scrape %s", addr)
		}
	}
	lb := c.Services["lb"]
	if !strings.HasPrefix(lb.Image, "haproxy:") || !slices.Contains(lb.Volumes, "./deploy/haproxy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro") {
		t.Errorf("lb: image %s, volumes %v", lb.Image, lb.Volumes)
	}
	if !strings.Contains(cfg, `"${RUVLLM_LB_METRICS-:8405}"`) || !strings.Contains(prom, `"lb:8405"`) {
		t.Error("Prometheus does not scrape HAProxy's exporter where haproxy.cfg serves it")
	}
	if _, ok := c.Services["grafana"]; !ok {
		t.Error("no grafana service")
	}
	if got := interpolate(model.Command[1]); strings.Contains(got, "$") || !strings.HasPrefix(got, "--hf=") {
		t.Errorf("the model by default: %q", got)
	}
}

// k8sObject is one Kubernetes object, decoded loosely.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct{ Name string }
	Spec       map[string]any `yaml:"spec"`
	Data       map[string]string
	Rules      []struct {
		APIGroups []string `yaml:"apiGroups"`
		Resources []string
	}
}

func k8sObjects(t *testing.T) map[string]k8sObject {
	t.Helper()
	var kust struct{ Resources []string }
	if err := yaml.Unmarshal(readFile(t, "k8s/kustomization.yaml"), &kust); err != nil {
		t.Fatal(err)
	}
	objs := map[string]k8sObject{}
	for _, f := range kust.Resources {
		dec := yaml.NewDecoder(bytes.NewReader(readFile(t, filepath.Join("k8s", f))))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var o k8sObject
			if err := n.Decode(&o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			key := o.Kind + "/" + o.Metadata.Name
			if _, dup := objs[key]; dup {
				t.Fatalf("%s twice", key)
			}
			objs[key] = o
		}
	}
	return objs
}

// at follows a path of map keys and list indexes through decoded YAML.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// keys is the keys of a decoded YAML map, sorted.
func keys(v any) []string {
	m, _ := v.(map[string]any)
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestKubernetes checks that the manifests refer to each other: the
// Service and the InferencePool select the Deployment's pods on its port,
// the probes ask /health, the pool's endpoint picker is the EPP's Service
// and port and is started for this pool, the RBAC covers what it watches,
// and the HTTPRoute sends to the pool. The InferencePool's fields are
// those of the extension's v1 API (api/v1/inferencepool_types.go:
// selector.matchLabels, targetPorts[].number, endpointPickerRef with name,
// port.number and failureMode).
func TestKubernetes(t *testing.T) {
	objs := k8sObjects(t)
	need := func(key string) k8sObject {
		o, ok := objs[key]
		if !ok {
			t.Fatalf("no %s", key)
		}
		return o
	}
	dep, svc := need("Deployment/ruvllm"), need("Service/ruvllm")
	pool, route := need("InferencePool/ruvllm"), need("HTTPRoute/ruvllm")
	epp, eppSvc, role := need("Deployment/ruvllm-epp"), need("Service/ruvllm-epp"), need("Role/ruvllm-epp")

	podLabels, _ := at(dep.Spec, "template", "metadata", "labels").(map[string]any)
	selects := func(what string, sel any) {
		m, _ := sel.(map[string]any)
		if len(m) == 0 {
			t.Errorf("%s selects nothing", what)
		}
		for k, v := range m {
			if podLabels[k] != v {
				t.Errorf("%s selects %s=%v; the pods have %v", what, k, v, podLabels)
			}
		}
	}
	selects("Service/ruvllm", svc.Spec["selector"])
	selects("InferencePool/ruvllm", at(pool.Spec, "selector", "matchLabels"))

	c := at(dep.Spec, "template", "spec", "containers", 0)
	if port := at(c, "ports", 0, "containerPort"); port != 8080 || at(pool.Spec, "targetPorts", 0, "number") != 8080 {
		t.Errorf("container port %v, pool target port %v; want 8080", port, at(pool.Spec, "targetPorts", 0, "number"))
	}
	if !slices.Contains(toStrings(at(c, "args")), "--port=8080") {
		t.Errorf("the server's args %v do not listen on 8080", at(c, "args"))
	}
	for _, probe := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
		if at(c, probe, "httpGet", "path") != "/health" {
			t.Errorf("%s: %v, want GET /health", probe, at(c, probe))
		}
	}
	if at(c, "resources", "requests", "cpu") == nil || at(c, "resources", "requests", "memory") == nil {
		t.Errorf("resources %v, want cpu and memory requests", at(c, "resources"))
	}

	if got := keys(pool.Spec); !slices.Equal(got, []string{"endpointPickerRef", "selector", "targetPorts"}) {
		t.Errorf("InferencePool spec has %v", got)
	}
	ref := at(pool.Spec, "endpointPickerRef")
	if got := keys(ref); !slices.Equal(got, []string{"failureMode", "name", "port"}) {
		t.Errorf("endpointPickerRef has %v", got)
	}
	if at(ref, "name") != eppSvc.Metadata.Name || at(ref, "port", "number") != at(eppSvc.Spec, "ports", 0, "port") {
		t.Errorf("endpointPickerRef %v; the EPP's Service is %s on %v", ref, eppSvc.Metadata.Name, at(eppSvc.Spec, "ports", 0, "port"))
	}
	if !slices.Contains([]any{"FailOpen", "FailClose"}, at(ref, "failureMode")) {
		t.Errorf("failureMode %v", at(ref, "failureMode"))
	}
	eppLabels, _ := at(epp.Spec, "template", "metadata", "labels").(map[string]any)
	for k, v := range at(eppSvc.Spec, "selector").(map[string]any) {
		if eppLabels[k] != v {
			t.Errorf("Service/ruvllm-epp selects %s=%v; the EPP's pods have %v", k, v, eppLabels)
		}
	}
	if args := toStrings(at(epp.Spec, "template", "spec", "containers", 0, "args")); !slices.Contains(args, "--pool-name="+pool.Metadata.Name) {
		t.Errorf("the EPP's args %v do not name the pool %s", args, pool.Metadata.Name)
	}
	cm := need("ConfigMap/" + at(epp.Spec, "template", "spec", "volumes", 0, "configMap", "name").(string))
	if _, ok := cm.Data["plugins.yaml"]; !ok {
		t.Errorf("the EPP's ConfigMap has %v, want plugins.yaml", keys(cm.Data))
	}
	watched := map[string]bool{}
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				watched[g+"/"+res] = true
			}
		}
	}
	for _, want := range []string{"inference.networking.k8s.io/inferencepools", "/pods"} {
		if !watched[want] {
			t.Errorf("the EPP's Role does not cover %s", want)
		}
	}
	backend := at(route.Spec, "rules", 0, "backendRefs", 0)
	if at(backend, "kind") != "InferencePool" || at(backend, "group") != "inference.networking.k8s.io" || at(backend, "name") != pool.Metadata.Name {
		t.Errorf("the HTTPRoute sends to %v", backend)
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	var s []string
	for _, x := range l {
		s = append(s, fmt.Sprint(x))
	}
	return s
}
