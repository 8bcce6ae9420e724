package api

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/session"
)

// gatedBackend lets through as many Forward calls as the test allows; the
// next one waits at the gate, which holds the engine's loop, and with it
// the queue, the slots and the KV cache, where they are.
type gatedBackend struct {
	backends.Backend
	mu      sync.Mutex
	allowed int           // calls that may still pass; -1: all
	opened  chan struct{} // closed and replaced when allowed grows
	waiting chan struct{} // a call waits at the gate
}

func newGatedBackend(b backends.Backend) *gatedBackend {
	return &gatedBackend{Backend: b, opened: make(chan struct{}), waiting: make(chan struct{}, 1)}
}

func (g *gatedBackend) Forward(steps []backends.Step) error {
	for {
		g.mu.Lock()
		if g.allowed != 0 {
			if g.allowed > 0 {
				g.allowed--
			}
			g.mu.Unlock()
			return g.Backend.Forward(steps)
		}
		opened := g.opened
		g.mu.Unlock()
		select {
		case g.waiting <- struct{}{}:
		default:
		}
		<-opened
	}
}

// KVStats passes the pool's state on: the engine reads it through this
// optional interface.
func (g *gatedBackend) KVStats() kvcache.Stats { return g.Backend.(backends.KVPools).KVStats() }

// allow lets n more calls through (-1: every call from now on).
func (g *gatedBackend) allow(n int) {
	g.mu.Lock()
	if n < 0 {
		g.allowed = -1
	} else {
		g.allowed += n
	}
	close(g.opened)
	g.opened = make(chan struct{})
	g.mu.Unlock()
}

// awaitGate returns once a Forward call waits at the gate.
func (g *gatedBackend) awaitGate(t *testing.T) {
	t.Helper()
	select {
	case <-g.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("no Forward call reached the gate")
	}
}

// scrape reads /metrics as the Gateway API Inference Extension's endpoint
// picker does: parsed by expfmt's text parser into metric families.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	_, b := do(t, "GET", url+"/metrics", "")
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mf
}

// gaugeValue is the value of a family's one series, which must be a gauge.
func gaugeValue(t *testing.T, mf map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	f, ok := mf[name]
	if !ok || f.GetType() != dto.MetricType_GAUGE || len(f.GetMetric()) != 1 {
		t.Fatalf("%s: want one gauge series, got %v", name, f)
	}
	return f.GetMetric()[0].GetGauge().GetValue()
}

// blockGauge is ruvllm_kv_blocks of one state.
func blockGauge(t *testing.T, mf map[string]*dto.MetricFamily, state string) int {
	t.Helper()
	for _, m := range mf["ruvllm_kv_blocks"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "state" && l.GetValue() == state {
				return int(m.GetGauge().GetValue())
			}
		}
	}
	t.Fatalf("no ruvllm_kv_blocks{state=%q}", state)
	return 0
}

// loraInfo is what the picker takes from vllm:lora_requests_info: the
// labels of the series with the largest value (the Unix time of its last
// change) among those whose adapter lists are not both empty, and that
// value.
type loraInfo struct {
	maxLoRA, running, waiting string
	changed                   float64
}

func readLoRAInfo(t *testing.T, mf map[string]*dto.MetricFamily) (latest loraInfo, all []loraInfo) {
	t.Helper()
	f, ok := mf["vllm:lora_requests_info"]
	if !ok || f.GetType() != dto.MetricType_GAUGE {
		t.Fatalf("vllm:lora_requests_info: want a gauge, got %v", f)
	}
	for _, m := range f.GetMetric() {
		li := loraInfo{changed: m.GetGauge().GetValue()}
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "max_lora":
				li.maxLoRA = l.GetValue()
			case "running_lora_adapters":
				li.running = l.GetValue()
			case "waiting_lora_adapters":
				li.waiting = l.GetValue()
			}
		}
		all = append(all, li)
		if (li.running != "" || li.waiting != "") && li.changed > latest.changed {
			latest = li
		}
	}
	return latest, all
}

// TestServingProtocolMetrics reads the series of the Gateway API Inference
// Extension's model server protocol while requests run and wait on a real
// engine: two slots, six streaming requests (four with adapters), the
// engine's loop held at fixed points so that the expected values are
// exact, then every request let through to its end.
func TestServingProtocolMetrics(t *testing.T) {
	const parallel, maxLen, maxResident = 2, 256, 3
	m := testmodel.Tiny(t)
	gb := newGatedBackend(testmodel.Backend(t, "native", m, backends.Options{Threads: 1}))
	eng, err := backends.NewEngine(gb, backends.EngineOptions{Parallel: parallel, QueueSize: 8, MaxLen: maxLen})
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the server: requests still held at the gate end first.
	defer eng.Close()
	defer gb.allow(-1)

	dir := t.TempDir()
	for i, name := range []string{"alpha", "beta", "gamma"} {
		if err := makeAdapter(t, m.Config, 2, uint64(i+1)).a.WritePEFT(filepath.Join(dir, name), m.Config); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := lora.NewRegistry(lora.RegistryOptions{Dir: dir, Config: m.Config, Base: m.File, BaseModel: "tiny", MaxResident: maxResident})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{})
	if err := s.AddModel(&session.Model{ID: "tiny", Tokenizer: m.Tokenizer, Engine: eng, Adapters: reg}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	start := float64(time.Now().UnixNano()) / 1e9

	// Each request is a prompt of token ids, none a prefix of another, so
	// that no block is shared and each sequence's blocks are its tokens.
	var wg sync.WaitGroup
	results := make(chan string, 6)
	send := func(model string, promptLen, maxTokens int) {
		ids := make([]string, promptLen)
		for i := range ids {
			ids[i] = strconv.Itoa(3 + (i*7+promptLen)%200)
		}
		body := fmt.Sprintf(`{"model":%q,"prompt":[%s],"max_tokens":%d,"stream":true,"temperature":0}`, model, strings.Join(ids, ","), maxTokens)
		wg.Go(func() {
			resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				results <- fmt.Sprintf("%s: %v", model, err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.HasSuffix(bytes.TrimSpace(b), []byte("data: [DONE]")) {
				results <- fmt.Sprintf("%s: status %d, body %q", model, resp.StatusCode, b)
				return
			}
			results <- ""
		})
	}
	waitStats := func(running, queued int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for st := eng.Stats(); st.Running != running || st.Queued != queued; st = eng.Stats() {
			if time.Now().After(deadline) {
				t.Fatalf("engine at %d running, %d queued; want %d and %d", st.Running, st.Queued, running, queued)
			}
			time.Sleep(time.Millisecond)
		}
	}

	// The loop takes the first request into a slot and waits at the gate
	// before its prefill; the others queue behind it.
	const lenA, lenB = 70, 40
	send("alpha", lenA, 64)
	gb.awaitGate(t)
	waitStats(1, 0)
	send("beta", lenB, 64)
	waitStats(1, 1)
	send("alpha", 20, 8)
	waitStats(1, 2)
	send("tiny", 21, 8)
	waitStats(1, 3)
	send("gamma", 22, 8)
	waitStats(1, 4)
	send("beta", 23, 8)
	waitStats(1, 5)

	mf := scrape(t, hs.URL)
	bt := eng.Stats().KV.BlockTokens
	blocks := parallel * maxLen / bt // the default pool: every slot can fill its context
	for _, c := range []struct {
		name string
		want float64
	}{
		{"vllm:num_requests_running", 1},
		{"vllm:num_requests_waiting", 5},
		{"vllm:kv_cache_usage_perc", 0},
		{"vllm:gpu_cache_usage_perc", 0},
	} {
		if got := gaugeValue(t, mf, c.name); got != c.want {
			t.Errorf("first request at the gate: %s = %v, want %v", c.name, got, c.want)
		}
	}
	li, all := readLoRAInfo(t, mf)
	if len(all) != 1 || li.maxLoRA != strconv.Itoa(maxResident) || li.running != "alpha" || li.waiting != "alpha,beta,gamma" {
		t.Errorf("lora_requests_info: %+v; want max_lora %d, running alpha, waiting alpha,beta,gamma", all, maxResident)
	}
	now := float64(time.Now().UnixNano()) / 1e9
	if li.changed < start || li.changed > now {
		t.Errorf("lora_requests_info's value %f is not a time of this test (%f … %f)", li.changed, start, now)
	}
	first := li.changed
	cc := mf["vllm:cache_config_info"]
	if cc == nil || len(cc.GetMetric()) != 1 || cc.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("vllm:cache_config_info: %v", cc)
	}
	for _, l := range cc.GetMetric()[0].GetLabel() {
		want := map[string]string{"block_size": strconv.Itoa(bt), "num_gpu_blocks": strconv.Itoa(blocks)}[l.GetName()]
		if l.GetValue() != want {
			t.Errorf("cache_config_info %s=%q, want %q", l.GetName(), l.GetValue(), want)
		}
	}

	// One Forward call prefills the first request; the loop then samples
	// its first token, takes the second request into the other slot, and
	// waits at the gate with the first request's prompt in the cache.
	time.Sleep(10 * time.Millisecond) // lora_requests_info's time must move
	gb.allow(1)
	gb.awaitGate(t)
	waitStats(2, 4)
	mf = scrape(t, hs.URL)
	usedA := (lenA + bt - 1) / bt
	if got := blockGauge(t, mf, "used"); got != usedA {
		t.Errorf("used blocks %d, want %d for a %d-token prompt in %d-token blocks", got, usedA, lenA, bt)
	}
	wantUsage := float64(usedA) / float64(blocks)
	for _, c := range []struct {
		name string
		want float64
	}{
		{"vllm:num_requests_running", 2},
		{"vllm:num_requests_waiting", 4},
		{"vllm:kv_cache_usage_perc", wantUsage},
		{"vllm:gpu_cache_usage_perc", wantUsage},
	} {
		if got := gaugeValue(t, mf, c.name); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("two requests running: %s = %v, want %v", c.name, got, c.want)
		}
	}
	li, all = readLoRAInfo(t, mf)
	if len(all) != 1 || li.running != "alpha,beta" || li.waiting != "alpha,beta,gamma" || li.changed <= first {
		t.Errorf("lora_requests_info: %+v; want running alpha,beta, waiting alpha,beta,gamma, changed after %f", all, first)
	}

	// Everything runs to its end: nothing runs or waits, and the cached
	// blocks left for prefix reuse count as free.
	gb.allow(-1)
	wg.Wait()
	close(results)
	for r := range results {
		if r != "" {
			t.Error(r)
		}
	}
	mf = scrape(t, hs.URL)
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"} {
		if got := gaugeValue(t, mf, name); got != 0 {
			t.Errorf("after every request: %s = %v, want 0", name, got)
		}
	}
	if blockGauge(t, mf, "cached") == 0 {
		t.Error("no blocks cached for prefix reuse after the requests")
	}
	if _, all = readLoRAInfo(t, mf); len(all) != 1 || all[0].running != "" || all[0].waiting != "" || all[0].maxLoRA != strconv.Itoa(maxResident) {
		t.Errorf("lora_requests_info after every request: %+v", all)
	}
}

// TestServingProtocolWithoutAdapters checks that a server without
// adapters sends no vllm:lora_requests_info, as vLLM without LoRA, and
// that a backend without a block pool reports no cache configuration.
func TestServingProtocolWithoutAdapters(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	mf := scrape(t, fs.URL)
	for _, name := range []string{"vllm:lora_requests_info", "vllm:cache_config_info"} {
		if _, ok := mf[name]; ok {
			t.Errorf("%s is sent", name)
		}
	}
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"} {
		if got := gaugeValue(t, mf, name); got != 0 {
			t.Errorf("%s = %v on an idle server", name, got)
		}
	}
}
