package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ruvllm/ruvllm/backends"
)

// metrics are the Prometheus series of one Server, in a registry of its
// own so that several servers (tests) do not collide.
type metrics struct {
	reg              *prometheus.Registry
	promptTokens     prometheus.Counter
	cachedTokens     prometheus.Counter
	generationTokens prometheus.Counter
	requests         *prometheus.CounterVec
	duration         *prometheus.HistogramVec
	ttft             *prometheus.HistogramVec
	handler          http.Handler
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.promptTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ruvllm_prompt_tokens_total", Help: "Prompt tokens of the completed generation requests."})
	m.cachedTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ruvllm_prompt_tokens_cached_total", Help: "Prompt tokens whose prefill was skipped by prefix reuse."})
	m.generationTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ruvllm_generation_tokens_total", Help: "Tokens generated for the completed generation requests."})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ruvllm_http_requests_total", Help: "HTTP requests by route and status."}, []string{"route", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ruvllm_request_duration_seconds", Help: "Time from receiving a request to its last byte, by route.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16)}, []string{"route"})
	m.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ruvllm_time_to_first_token_seconds", Help: "Time from receiving a generation request to its first generated token.",
		Buckets: prometheus.ExponentialBuckets(0.002, 2, 16)}, []string{"route"})
	f(m.promptTokens)
	f(m.cachedTokens)
	f(m.generationTokens)
	f(m.requests)
	f(m.duration)
	f(m.ttft)
	// Engine statistics are summed over the served models, so that the
	// series keep their names and meaning however many models there are.
	kv := func(get func(st *backends.EngineStats) float64) func() float64 {
		return func() float64 {
			var sum float64
			for _, md := range s.models.Load().list {
				st := md.Engine.Stats()
				sum += get(&st)
			}
			return sum
		}
	}
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ruvllm_queue_depth", Help: "Requests waiting for a free slot."},
		kv(func(st *backends.EngineStats) float64 { return float64(st.Queued) })))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ruvllm_requests_running", Help: "Sequences being generated."},
		kv(func(st *backends.EngineStats) float64 { return float64(st.Running) })))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ruvllm_kv_cache_bytes", Help: "Memory of the KV cache: every block of the pool, used, cached or free."},
		kv(func(st *backends.EngineStats) float64 { return float64(st.KVBytes) })))
	for _, b := range []struct {
		state string
		get   func(st *backends.EngineStats) float64
	}{
		{"used", func(st *backends.EngineStats) float64 { return float64(st.KV.UsedBlocks) }},
		{"shared", func(st *backends.EngineStats) float64 { return float64(st.KV.SharedBlocks) }},
		{"cached", func(st *backends.EngineStats) float64 { return float64(st.KV.CachedBlocks) }},
		{"free", func(st *backends.EngineStats) float64 { return float64(st.KV.FreeBlocks) }},
	} {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ruvllm_kv_blocks", Help: "KV cache blocks by state: used (held by sequences; shared: by more than one), cached (kept for prefix reuse, evictable), free.",
			ConstLabels: prometheus.Labels{"state": b.state}}, kv(b.get)))
	}
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ruvllm_kv_cache_used_bytes", Help: "Memory of the KV blocks held by sequences."},
		kv(func(st *backends.EngineStats) float64 { return float64(st.KV.UsedBytes) })))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ruvllm_kv_cache_cached_bytes", Help: "Memory of the KV blocks kept only for prefix reuse."},
		kv(func(st *backends.EngineStats) float64 { return float64(st.KV.CachedBytes) })))
	for _, c := range []struct {
		name, help string
		get        func(st *backends.EngineStats) float64
	}{
		{"ruvllm_kv_evictions_total", "Cached KV blocks evicted to make room.", func(st *backends.EngineStats) float64 { return float64(st.KV.Evictions) }},
		{"ruvllm_kv_copies_total", "Copy-on-write copies of shared KV blocks.", func(st *backends.EngineStats) float64 { return float64(st.KV.Copies) }},
		{"ruvllm_kv_prefix_hit_tokens_total", "Prompt tokens found in the KV cache.", func(st *backends.EngineStats) float64 { return float64(st.KV.HitTokens) }},
		{"ruvllm_kv_prefix_miss_tokens_total", "Prompt tokens not found in the KV cache.", func(st *backends.EngineStats) float64 { return float64(st.KV.MissTokens) }},
		{"ruvllm_preemptions_total", "Sequences whose KV cache was dropped for lack of room, to be recomputed.", func(st *backends.EngineStats) float64 { return float64(st.Preemptions) }},
	} {
		f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help}, kv(c.get)))
	}
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ruvllm_model_loaded", Help: "1 when a model is loaded and served."},
		func() float64 {
			if s.Ready() {
				return 1
			}
			return 0
		}))
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// addModel adds the series of one served model, labelled with its id: the
// requests it runs and queues, which the summed series cannot tell apart.
// The label's values are the served models only, never a client's text.
func (m *metrics) addModel(md *Model) error {
	label := prometheus.Labels{"model": md.ID}
	for _, g := range []struct {
		name, help string
		get        func(st backends.EngineStats) int
	}{
		{"ruvllm_model_requests_running", "Sequences being generated, by model.", func(st backends.EngineStats) int { return st.Running }},
		{"ruvllm_model_queue_depth", "Requests waiting for a free slot, by model.", func(st backends.EngineStats) int { return st.Queued }},
	} {
		c := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help, ConstLabels: label},
			func() float64 { return float64(g.get(md.Engine.Stats())) })
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("api: metrics of model %q: %w", md.ID, err)
		}
	}
	return nil
}

func (m *metrics) serve(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

func (m *metrics) observeRequest(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

// observeUsage counts the tokens of a finished generation request.
func (m *metrics) observeUsage(u usage) {
	m.promptTokens.Add(float64(u.PromptTokens))
	m.generationTokens.Add(float64(u.CompletionTokens))
	if u.PromptTokensDetails != nil {
		m.cachedTokens.Add(float64(u.PromptTokensDetails.CachedTokens))
	}
}

func (m *metrics) observeTTFT(route string, d time.Duration) {
	m.ttft.WithLabelValues(route).Observe(d.Seconds())
}
