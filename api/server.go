package api

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/api/anthropic"
	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/api/llamacpp"
	"github.com/ruvllm/ruvllm/api/ollama"
	"github.com/ruvllm/ruvllm/api/openai"
	"github.com/ruvllm/ruvllm/api/responses"
	"github.com/ruvllm/ruvllm/api/webui"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/session"
	"github.com/ruvllm/ruvllm/sona"
)

// DefaultMaxBodyBytes is Options.MaxBodyBytes when it is 0.
const DefaultMaxBodyBytes = 8 << 20

// Options configure a Server; the zero value serves without auth, CORS or
// logging, with llama.cpp's default sampling for fields a request leaves
// out.
type Options struct {
	// Version is reported as system_fingerprint and by the version routes.
	Version string
	// APIKeys, when not empty, are the keys every endpoint but /health
	// requires, as "Authorization: Bearer KEY" or Anthropic's "x-api-key:
	// KEY".
	APIKeys []string
	// MaxN caps a request's choices (n, times the prompts of a text
	// completion); 0 means session.DefaultMaxN.
	MaxN int
	// MaxBodyBytes caps a request body (413 beyond); 0 means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// CORSOrigins are the origins browsers may call from ("*" for any);
	// empty turns CORS off.
	CORSOrigins []string
	// Sampling holds the sampling settings used for the fields a request
	// leaves out; nil means backends.DefaultParams() (llama-server's).
	Sampling *backends.Params
	// Logger receives one access line per request and server errors.
	Logger zerolog.Logger
	// Feedback are the server's feedback sinks, which receive the feedback
	// on every model (after the model's own).
	Feedback []session.FeedbackSink
	// FeedbackWindow is how long a completion is kept for feedback on it
	// by completion_id; 0 means session.DefaultFeedbackWindow.
	FeedbackWindow time.Duration
	// MaxLoaded is the most models on demand loaded at once (0: no
	// limit): loading another first unloads the least recently used idle
	// one, or waits for one to become idle.
	MaxLoaded int
	// KeepAlive is how long a model on demand stays loaded after its last
	// request, unless the request says otherwise (keep_alive); 0 means
	// session.DefaultKeepAlive, negative until it must make room.
	KeepAlive time.Duration
	// Router, when not nil, chooses the model of the generations that
	// name RouterName, learns from how they turn out and from ratings
	// (POST /v1/feedback); the server does not close it.
	Router *sona.Router
	// RouterName is the model name that asks for the router; "" means
	// session.DefaultRouterName.
	RouterName string
	// RouteAdapters lets the router choose the models' adapters too.
	RouteAdapters bool
	// Reasoning is how thinking models' reasoning reaches clients by
	// default (llama-server's --reasoning-format).
	Reasoning session.ReasoningFormat
	// NoThinking turns thinking off for the requests that do not turn it
	// on (llama-server's --reasoning-budget 0).
	NoThinking bool
	// BodyTimeout is how long a request's body may take to arrive (408
	// after it, and the connection is closed), so that a client trickling
	// a body cannot hold a connection forever; an adapter upload gets ten
	// times as long. 0 means DefaultBodyTimeout. Reading a streamed
	// response slowly is not limited by it.
	BodyTimeout time.Duration
	// PublicMetrics serves /metrics without the API key, for a scraper
	// the operator keeps on a private network; otherwise it needs the key
	// as every route but /health does.
	PublicMetrics bool
	// ResponseStore keeps the Responses API's stored responses; nil keeps
	// them in memory, with the default bounds.
	ResponseStore *responses.Store
	// Pull downloads models for ollama's POST /api/pull; nil turns the
	// route off.
	Pull ollama.PullFunc
	// MaxTokens, when > 0, is the most tokens a choice generates, whatever
	// its request asks (llama-server's --n-predict).
	MaxTokens int
	// AnyModelName serves any model name with the one model served (when
	// it has no adapters) and repeats the name, as llama-server does.
	AnyModelName bool
	// Slots turns on llama-server's GET /slots; SlotSavePath, when set, is
	// the directory of its slot actions (save, restore, erase).
	Slots        bool
	SlotSavePath string
	// PublicModels serves the model listings (/v1/models, /models)
	// without an API key, as llama-server does.
	PublicModels bool
	// NoWebUI turns off the chat page at / (llama-server's --no-webui),
	// for a server that only clients talk to.
	NoWebUI bool
	// Verbose adds llama-server's "__verbose" object (the prompt as the
	// model read it) to whole chat and text completions, as its --verbose.
	Verbose bool
}

// DefaultBodyTimeout is Options.BodyTimeout when it is 0.
const DefaultBodyTimeout = time.Minute

// Protocol is a wire package: the routes of one protocol and the shape of
// its errors. Adding a protocol is one package and one line in protocols.
type Protocol interface {
	Routes(r chi.Router)
	WriteError(w http.ResponseWriter, e *session.Error)
}

// openRouter is a protocol with routes that answer before any model is
// served, such as a version or a listing.
type openRouter interface {
	OpenRoutes(r chi.Router)
}

// Server is the HTTP API over a set of models. It answers 503 until
// AddModel gives it the first, so that a client can watch /health while the
// models load.
type Server struct {
	opt       Options
	models    *session.Models
	metrics   *metrics
	handler   http.Handler
	openai    *openai.API
	responses *responses.API
	ollama    *ollama.API
	anthropic *anthropic.API
	llama     *llamacpp.API
}

// New returns a Server with no model yet.
func New(o Options) *Server {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	s := &Server{opt: o}
	s.metrics = newMetrics(s)
	s.models = session.New(session.Options{
		MaxN: o.MaxN, Sampling: o.Sampling, FeedbackWindow: o.FeedbackWindow, MaxLoaded: o.MaxLoaded, KeepAlive: o.KeepAlive,
		Router: o.Router, RouterName: o.RouterName, RouteAdapters: o.RouteAdapters, Reasoning: o.Reasoning, NoThinking: o.NoThinking,
		MaxTokens: o.MaxTokens, AnyModelName: o.AnyModelName,
		OnModelLoad:   func() { s.metrics.modelLoads.Inc() },
		OnModelUnload: func(why string) { s.metrics.modelUnloads.WithLabelValues(why).Inc() },
		OnGeneration:  s.account,
	})
	s.openai = &openai.API{Models: s.models, Version: o.Version, OnFailure: s.logFailure, Verbose: o.Verbose,
		OnTokens: func(r *http.Request, n int) { info(r.Context()).promptTokens = n }}
	store := o.ResponseStore
	if store == nil {
		store, _ = responses.NewStore(responses.StoreOptions{}) // in memory: it cannot fail
	}
	s.responses = &responses.API{Models: s.models, Store: store, OnFailure: s.logFailure}
	s.ollama = &ollama.API{Models: s.models, Version: o.Version, Pull: o.Pull, OnFailure: s.logFailure,
		OnTokens: func(r *http.Request, n int) { info(r.Context()).promptTokens = n }}
	s.anthropic = &anthropic.API{Models: s.models, OnFailure: s.logFailure,
		OnTokens: func(r *http.Request, n int) { info(r.Context()).promptTokens = n }}
	s.llama = &llamacpp.API{Models: s.models, Version: o.Version, Slots: o.Slots, SlotSavePath: o.SlotSavePath, WebUI: !o.NoWebUI, OnFailure: s.logFailure}
	s.handler = s.routes()
	return s
}

// Models are the served models, which the protocols' sessions run on.
func (s *Server) Models() *session.Models { return s.models }

// AddModel serves m from now on, beside the models already served; the
// first model added is the default.
func (s *Server) AddModel(m *session.Model) error {
	if err := s.models.AddModel(m); err != nil {
		return err
	}
	return s.metrics.addModel(m)
}

// AddFailedModel records a model that could not be opened: /v1/models
// lists it as failed with the reason, and requests naming it get a 503
// that says why, while the other models are served.
func (s *Server) AddFailedModel(id, reason string) { s.models.AddFailed(id, reason) }

// Ready reports whether at least one model is served.
func (s *Server) Ready() bool { return s.models.Ready() }

// SetStarting marks the models the server starts with as loading (true) or
// loaded (false). Until they are loaded /health answers 503, as
// llama-server's does while it loads, so that a load balancer or a
// readiness probe sends nothing that would wait for the load; requests
// that come anyway wait for it.
func (s *Server) SetStarting(v bool) { s.models.SetStarting(v) }

// LoadModel loads the model named id, if it is loaded on demand and not
// loaded yet; a server preloads its models with it.
func (s *Server) LoadModel(ctx context.Context, id string) error { return s.models.LoadModel(ctx, id) }

// Close unloads the models loaded on demand, waiting for the requests that
// use them; the server answers 503 to those that would load one after it.
// Models loaded for good are their owner's to close.
func (s *Server) Close() { s.models.Close() }

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// protocols are the wire packages the server speaks.
func (s *Server) protocols() []Protocol {
	return []Protocol{s.openai, s.responses, s.anthropic, s.ollama, s.llama}
}

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(s.requestID, s.accessLog, s.recoverPanic, s.cors, s.bodyDeadline)
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed(r))

	if !s.opt.NoWebUI {
		webui.Routes(r) // public: its API calls carry the key
	}
	r.With(s.limitBody).Get("/health", s.handle(s.health))
	if s.opt.PublicMetrics {
		r.With(s.limitBody).Get("/metrics", s.metrics.serve)
	}
	if s.opt.PublicModels {
		r.Group(func(r chi.Router) {
			r.Use(s.limitBody, s.requireModel(openai.WriteError))
			for _, prefix := range []string{"/v1", ""} {
				r.Get(prefix+"/models", s.handle(s.listModels))
			}
		})
	}
	for _, p := range s.protocols() {
		r.Group(func(r chi.Router) {
			r.Use(s.auth(p.WriteError), s.limitBodyWith(p.WriteError))
			if o, ok := p.(openRouter); ok {
				o.OpenRoutes(r)
			}
			r.With(s.requireModel(p.WriteError)).Group(p.Routes)
		})
	}
	r.Group(func(r chi.Router) {
		r.Use(s.auth(openai.WriteError))
		r.Group(func(r chi.Router) {
			r.Use(s.limitBody)
			if !s.opt.PublicMetrics {
				r.Get("/metrics", s.metrics.serve)
			}
			r.Group(func(r chi.Router) {
				r.Use(s.requireModel(openai.WriteError))
				for _, prefix := range []string{"/v1", ""} {
					if !s.opt.PublicModels {
						r.Get(prefix+"/models", s.handle(s.listModels))
					}
					r.Get(prefix+"/models/*", s.handle(s.getModel))
				}
				r.Post("/tokenize", s.handle(s.tokenize))
				r.Post("/detokenize", s.handle(s.detokenize))
				r.Get("/v1/adapters", s.handle(s.listAdapters))
				r.Get("/v1/adapters/{name}", s.handle(s.getAdapter))
				r.Delete("/v1/adapters/{name}", s.handle(s.deleteAdapter))
				r.Post("/v1/load_lora_adapter", s.handle(s.loadLoRAAdapter))
				r.Post("/v1/unload_lora_adapter", s.handle(s.unloadLoRAAdapter))
				r.Post("/v1/feedback", s.handle(s.feedback))
				r.Post("/models/load", s.handle(s.loadModel))
				r.Post("/models/unload", s.handle(s.unloadModel))
			})
		})
		// An upload has its own limit, the adapter size (MaxAdapterBytes),
		// far above MaxBodyBytes.
		r.With(s.requireModel(openai.WriteError)).Post("/v1/adapters", s.handle(s.uploadAdapter))
	})
	return r
}

// handle adapts a handler of the server's own routes, whose errors have
// OpenAI's shape.
func (s *Server) handle(h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return jsonhttp.Handler(h, openai.WriteError, s.logFailure)
}

// logFailure logs a failure of the server's own.
func (s *Server) logFailure(r *http.Request, err error) {
	s.opt.Logger.Error().Str("request_id", info(r.Context()).id).Err(err).Msg("request failed")
}

// account records a generation's tokens and time to first token for the
// access log and the metrics, however it ended.
func (s *Server) account(ctx context.Context, g *session.Generation) {
	u := g.Usage()
	ttft := g.Timings().TTFT()
	if ri, ok := ctx.Value(infoKey{}).(*requestInfo); ok {
		ri.promptTokens, ri.completionTokens, ri.ttft = u.PromptTokens, u.CompletionTokens, ttft
	}
	s.metrics.observeUsage(u)
	if ttft > 0 {
		s.metrics.observeTTFT(g.Route(), ttft)
	}
}

// requireModel answers 503 until a model is served.
func (s *Server) requireModel(write jsonhttp.ErrorWriter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !s.Ready() {
				write(w, session.Loading())
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// health is llama-server's /health: 200 {"status":"ok"} once a model is
// served and the models the server starts with are loaded, 503 before.
func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	if !s.models.Healthy() {
		return session.Loading()
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// notFound is a JSON 404 for an unknown path.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	openai.WriteError(w, pathNotFound(r))
}

func pathNotFound(r *http.Request) *session.Error {
	return session.NotFound("", codeNotFound, "invalid URL (%s %s)", r.Method, r.URL.Path)
}

// methodNotAllowed is a JSON 405 that lists the allowed methods in Allow,
// found by asking the router which methods match the path.
func (s *Server) methodNotAllowed(mux *chi.Mux) http.HandlerFunc {
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}
	return func(w http.ResponseWriter, r *http.Request) {
		for _, m := range methods {
			if mux.Match(chi.NewRouteContext(), m, r.URL.Path) {
				w.Header().Add("Allow", m)
			}
		}
		openai.WriteError(w, &session.Error{Status: http.StatusMethodNotAllowed, Type: session.TypeInvalidRequest, Code: codeMethod,
			Message: "method " + r.Method + " is not allowed for " + r.URL.Path})
	}
}
