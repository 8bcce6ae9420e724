package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/session"
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
	// modelLoads and modelUnloads count the loads and unloads of models
	// on demand, unloads by reason (idle, room, request, shutdown).
	modelLoads   prometheus.Counter
	modelUnloads *prometheus.CounterVec
	handler      http.Handler
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
	m.modelLoads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ruvllm_model_loads_total", Help: "Loads of models served on demand."})
	m.modelUnloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ruvllm_model_unloads_total", Help: "Unloads of models served on demand, by reason: idle (keep-alive over), room (another model needed its place), request, shutdown."},
		[]string{"reason"})
	f(m.modelLoads)
	f(m.modelUnloads)
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ruvllm_models_loaded", Help: "Models whose engine is loaded: those loaded for good and those on demand that are loaded now."},
		func() float64 {
			n := 0
			for _, md := range s.models.List() {
				if s.models.Loaded(md) {
					n++
				}
			}
			return float64(n)
		}))
	// Engine statistics are summed over the served models, so that the
	// series keep their names and meaning however many models there are.
	kv := func(get func(st *backends.EngineStats) float64) func() float64 {
		return func() float64 {
			var sum float64
			for _, md := range s.models.List() {
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
		{"ruvllm_spec_drafted_tokens_total", "Tokens speculative decoding drafted and verified.", func(st *backends.EngineStats) float64 { return float64(st.SpecDrafted) }},
		{"ruvllm_spec_accepted_tokens_total", "Drafted tokens accepted: generated without a forward pass of their own.", func(st *backends.EngineStats) float64 { return float64(st.SpecAccepted) }},
	} {
		f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help}, kv(c.get)))
	}
	m.addKVTierMetrics(f, kv)
	f(&restoreHistogram{s: s, desc: prometheus.NewDesc("ruvllm_kv_restore_seconds",
		"Time to restore a prompt's KV blocks from the store, per restore.", nil, nil)})
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ruvllm_model_loaded", Help: "1 when a model is loaded and served."},
		func() float64 {
			if s.models.Healthy() {
				return 1
			}
			return 0
		}))
	f(newServingProtocol(s))
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// addModel adds the series of one served model, labelled with its id: the
// requests it runs and queues, which the summed series cannot tell apart.
// The label's values are the served models only, never a client's text.
func (m *metrics) addModel(md *session.Model) error {
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

// addKVTierMetrics registers the series of KV precision tiers and of the
// KV store (--store), summed over the models by kv.
func (m *metrics) addKVTierMetrics(f func(prometheus.Collector), kv func(func(*backends.EngineStats) float64) func() float64) {
	for _, b := range []struct {
		tier string
		get  func(st *backends.EngineStats) float64
	}{
		{"f32", func(st *backends.EngineStats) float64 { return float64(st.KV.F32Blocks) }},
		{"f16", func(st *backends.EngineStats) float64 { return float64(st.KV.F16Blocks) }},
		{"q8", func(st *backends.EngineStats) float64 { return float64(st.KV.Q8Blocks) }},
		{"q4", func(st *backends.EngineStats) float64 { return float64(st.KV.Q4Blocks) }},
	} {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ruvllm_kv_tier_blocks", Help: "KV blocks holding a form of each precision (--kv tiered: hot f16, warm q8, cold q4; a block may hold several).",
			ConstLabels: prometheus.Labels{"tier": b.tier}}, kv(b.get)))
	}
	for _, g := range []struct {
		name, help string
		get        func(st *backends.EngineStats) float64
	}{
		{"ruvllm_kv_store_bytes", "Disk the KV store's files take (made at full size, at most --store-max a model).", func(st *backends.EngineStats) float64 { return float64(st.KV.Store.Bytes) }},
		{"ruvllm_kv_store_pages", "KV blocks held in the store.", func(st *backends.EngineStats) float64 { return float64(st.KV.Store.Pages) }},
	} {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help}, kv(g.get)))
	}
	for _, c := range []struct {
		name, help string
		get        func(st *backends.EngineStats) float64
	}{
		{"ruvllm_kv_store_hit_tokens_total", "Prompt tokens restored from the KV store.", func(st *backends.EngineStats) float64 { return float64(st.KV.StoreHitTokens) }},
		{"ruvllm_kv_store_miss_tokens_total", "Prompt tokens neither the KV cache nor the store held.", func(st *backends.EngineStats) float64 { return float64(st.KV.StoreMissTokens) }},
		{"ruvllm_kv_store_spilled_blocks_total", "KV blocks queued for the store as they were committed.", func(st *backends.EngineStats) float64 { return float64(st.KV.SpilledBlocks) }},
		{"ruvllm_kv_store_written_pages_total", "Pages the store wrote.", func(st *backends.EngineStats) float64 { return float64(st.KV.Store.Written) }},
		{"ruvllm_kv_store_dropped_pages_total", "Pages the store dropped: its write queue was full.", func(st *backends.EngineStats) float64 { return float64(st.KV.Store.Dropped) }},
		{"ruvllm_kv_store_evictions_total", "Pages evicted from the store for room, least recently used first.", func(st *backends.EngineStats) float64 { return float64(st.KV.Store.Evictions) }},
		{"ruvllm_kv_store_checksum_failures_total", "Stored pages that failed their checksum when read; they are dropped, never served.", func(st *backends.EngineStats) float64 { return float64(st.KV.Store.ChecksumFailures) }},
	} {
		f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help}, kv(c.get)))
	}
}

// restoreHistogram is the histogram of KV restore durations, summed over
// the models from their pools' cumulative counts.
type restoreHistogram struct {
	s    *Server
	desc *prometheus.Desc
}

func (h *restoreHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

func (h *restoreHistogram) Collect(ch chan<- prometheus.Metric) {
	var count uint64
	var sum float64
	buckets := map[float64]uint64{}
	for _, md := range h.s.models.List() {
		st := md.Engine.Stats()
		count += st.KV.Restores
		sum += st.KV.RestoreSeconds
		for i, ub := range kvcache.RestoreBuckets {
			buckets[ub] += st.KV.RestoreBuckets[i]
		}
	}
	ch <- prometheus.MustNewConstHistogram(h.desc, count, sum, buckets)
}

func (m *metrics) observeRequest(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

// observeUsage counts the tokens of a finished generation request.
func (m *metrics) observeUsage(u session.Usage) {
	m.promptTokens.Add(float64(u.PromptTokens))
	m.generationTokens.Add(float64(u.CompletionTokens))
	m.cachedTokens.Add(float64(u.CachedTokens))
}

func (m *metrics) observeTTFT(route string, d time.Duration) {
	m.ttft.WithLabelValues(route).Observe(d.Seconds())
}

// servingProtocol collects the series that the Gateway API Inference
// Extension's endpoint picker reads from each server of an InferencePool
// (its model server protocol, docs/proposals/003-model-server-protocol),
// under the names of vLLM that the picker reads by default, so that it
// schedules onto ruvllm servers by their queues, KV caches and adapters.
// One collection reads each engine's Stats once: the queue, the running
// sequences and the KV cache are of one instant. Like ruvllm's engine
// series they are sums over the served models, one server being one
// endpoint to the picker.
type servingProtocol struct {
	s                                 *Server
	waiting, running, usage, gpuUsage *prometheus.Desc
	cacheConfig, lora                 *prometheus.Desc

	mu sync.Mutex
	// loraState is the label values of the last collection, changed the
	// Unix time in seconds when they last changed: the series' value, by
	// which the picker tells the newest from series it scraped before.
	loraState [3]string
	changed   float64
}

func newServingProtocol(s *Server) *servingProtocol {
	return &servingProtocol{
		s: s,
		waiting: prometheus.NewDesc("vllm:num_requests_waiting",
			"Requests waiting for a free slot (the inference extension's TotalQueuedRequests; ruvllm_queue_depth).", nil, nil),
		running: prometheus.NewDesc("vllm:num_requests_running",
			"Sequences being generated (the inference extension's TotalRunningRequests; ruvllm_requests_running).", nil, nil),
		usage: prometheus.NewDesc("vllm:kv_cache_usage_perc",
			"Fraction (0 to 1) of the KV cache memory held by running sequences; blocks kept for prefix reuse (cached, or "+
				"kept by idle slots) count as free, since they are given up when room is needed (the inference extension's KVCacheUtilization).", nil, nil),
		gpuUsage: prometheus.NewDesc("vllm:gpu_cache_usage_perc",
			"vllm:kv_cache_usage_perc under its older name, which endpoint pickers before vLLM's rename read.", nil, nil),
		cacheConfig: prometheus.NewDesc("vllm:cache_config_info",
			"Always 1; block_size is the tokens of one KV cache block, num_gpu_blocks the blocks of that size the KV caches hold, "+
				"for the inference extension's prefix-cache scorer.", []string{"block_size", "num_gpu_blocks"}, nil),
		lora: prometheus.NewDesc("vllm:lora_requests_info",
			"The Unix time at which the labels last changed: max_lora is the most adapters held in memory, running_lora_adapters "+
				"the adapters of running sequences, waiting_lora_adapters those of queued requests (comma-separated names), "+
				"for the inference extension's LoRA affinity.",
			[]string{"max_lora", "running_lora_adapters", "waiting_lora_adapters"}, nil),
	}
}

// Describe sends the descriptions of every series.
func (c *servingProtocol) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.waiting, c.running, c.usage, c.gpuUsage, c.cacheConfig, c.lora} {
		ch <- d
	}
}

// Collect reads every served model's engine once and sends the series:
// cache_config_info only when a model has a KV block pool, and
// lora_requests_info only when a model serves adapters (as vLLM sends it
// only with LoRA on).
func (c *servingProtocol) Collect(ch chan<- prometheus.Metric) {
	var waiting, running, blockTokens, poolTokens, maxLoRA int
	var runningKV, kvBytes int64
	var withAdapters bool
	var runningAdapters, waitingAdapters []string
	for _, md := range c.s.models.List() {
		st := md.Engine.Stats()
		waiting += st.Queued
		running += st.Running
		runningKV += st.RunningKVBytes
		kvBytes += st.KVBytes
		if st.KV.Blocks > 0 && blockTokens == 0 {
			blockTokens = st.KV.BlockTokens
		}
		poolTokens += st.KV.Blocks * st.KV.BlockTokens
		if md.Adapters != nil {
			withAdapters = true
			maxLoRA += md.Adapters.MaxResident()
		}
		runningAdapters = append(runningAdapters, st.RunningAdapters...)
		waitingAdapters = append(waitingAdapters, st.WaitingAdapters...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.waiting, float64(waiting))
	gauge(c.running, float64(running))
	var usage float64
	if kvBytes > 0 {
		usage = float64(runningKV) / float64(kvBytes)
	}
	gauge(c.usage, usage)
	gauge(c.gpuUsage, usage)
	if blockTokens > 0 {
		// Pools of other block sizes count as the blocks of the first
		// pool's size that hold as many tokens.
		gauge(c.cacheConfig, 1, strconv.Itoa(blockTokens), strconv.Itoa(poolTokens/blockTokens))
	}
	if withAdapters {
		state := [3]string{strconv.Itoa(maxLoRA), joinAdapterNames(runningAdapters), joinAdapterNames(waitingAdapters)}
		c.mu.Lock()
		if state != c.loraState || c.changed == 0 {
			c.loraState = state
			c.changed = float64(time.Now().UnixNano()) / 1e9
		}
		changed := c.changed
		c.mu.Unlock()
		gauge(c.lora, changed, state[:]...)
	}
}

// joinAdapterNames is the names sorted, each once, joined by commas without
// spaces: the picker splits the label at commas and trims nothing.
func joinAdapterNames(names []string) string {
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ",")
}
