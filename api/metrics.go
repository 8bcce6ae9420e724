package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	stat := func(get func(*Model) float64) func() float64 {
		return func() float64 {
			if md := s.model.Load(); md != nil {
				return get(md)
			}
			return 0
		}
	}
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ruvllm_queue_depth", Help: "Requests waiting for a free slot."},
		stat(func(md *Model) float64 { return float64(md.Engine.Stats().Queued) })))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ruvllm_requests_running", Help: "Sequences being generated."},
		stat(func(md *Model) float64 { return float64(md.Engine.Stats().Running) })))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ruvllm_kv_cache_bytes", Help: "Memory held by the KV caches."},
		stat(func(md *Model) float64 { return float64(md.Engine.Stats().KVBytes) })))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ruvllm_model_loaded", Help: "1 when a model is loaded and served."},
		func() float64 {
			if s.model.Load() != nil {
				return 1
			}
			return 0
		}))
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
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
