package api

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/sona"
)

// Engine is what the API needs of backends.Engine: a queue that runs
// generation requests and embeddings on one loaded model.
type Engine interface {
	// Submit queues r; events arrive on the returned stream until its
	// channel closes. Cancelling ctx stops the request and frees its slot.
	Submit(ctx context.Context, r backends.Request) (*backends.Stream, error)
	// Embed returns the mean-pooled, L2-normalised final hidden states of
	// tokens.
	Embed(ctx context.Context, tokens []tokenizer.ID) ([]float32, error)
	// Stats reports the queue, the running requests and the KV memory.
	Stats() backends.EngineStats
	// MaxLen is the most tokens (prompt plus generated) one request holds.
	MaxLen() int
}

// ChatRenderer turns chat messages into a prompt with the model's chat
// template; *models.Model is one.
type ChatRenderer interface {
	RenderChat(messages []map[string]any, tools []any, addGenerationPrompt bool) (string, error)
}

// Model is a loaded model as the API serves it; a Server serves several,
// each with its own engine, tokenizer, chat template and adapters.
type Model struct {
	// ID is the model's name in the API: what clients pass as "model".
	ID string
	// Created is when the model was loaded; zero means when AddModel ran.
	Created   time.Time
	Tokenizer *tokenizer.Tokenizer
	// Chat renders chat completions' prompts; a model without one serves
	// everything but chat completions.
	Chat ChatRenderer
	// Engine runs the model. A model loaded on demand leaves it nil and
	// sets Load instead; AddModel then puts a stand-in here.
	Engine Engine
	// Load, when not nil, makes the model one loaded on demand: its engine
	// is loaded when a request needs it and unloaded when idle for its
	// keep-alive or to make room (Options.MaxLoaded).
	Load Loader
	// MaxLen is the context a model on demand will have, which listings
	// report before its first load.
	MaxLen int
	// Adapters are the LoRA adapters of the model, which requests name as
	// "ID:ADAPTER" or "ADAPTER"; nil turns the adapter routes off (they
	// answer 404). The registry's BaseModel should be ID.
	Adapters *lora.Registry
	// MaxAdapterBytes is the registry's MaxUploadBytes, so that an upload
	// declaring a larger body is refused before any of it is read; 0 means
	// lora.DefaultMaxUploadBytes.
	MaxAdapterBytes int64
	// Feedback are the model's feedback sinks (POST /v1/feedback), such as
	// the trainer of its MicroLoRA adapters.
	Feedback []FeedbackSink

	// vocabs caches the vocabularies of constrained outputs; AddModel
	// makes it.
	vocabs *vocabCache
	// tools is how the model's template treats tools, which AddModel
	// reads from the template.
	tools toolStyle
	// resident is the state of a model on demand; nil for one loaded for
	// good.
	resident *resident
}

// Defaults of Options.
const (
	DefaultMaxN         = 16
	DefaultMaxBodyBytes = 8 << 20
)

// Options configure a Server; the zero value serves without auth, CORS or
// logging, with llama.cpp's default sampling for fields a request leaves
// out.
type Options struct {
	// Version is reported as system_fingerprint.
	Version string
	// APIKeys, when not empty, are the bearer tokens every endpoint but
	// /health requires.
	APIKeys []string
	// MaxN caps a request's choices (n, times the prompts of a text
	// completion); 0 means DefaultMaxN.
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
	Feedback []FeedbackSink
	// FeedbackWindow is how long a completion is kept for feedback on it
	// by completion_id; 0 means DefaultFeedbackWindow.
	FeedbackWindow time.Duration
	// MaxLoaded is the most models on demand loaded at once (0: no
	// limit): loading another first unloads the least recently used idle
	// one, or waits for one to become idle.
	MaxLoaded int
	// KeepAlive is how long a model on demand stays loaded after its last
	// request, unless the request says otherwise (keep_alive); 0 means
	// DefaultKeepAlive, negative until it must make room.
	KeepAlive time.Duration
	// Router, when not nil, chooses the model of the chat and text
	// completions that name RouterName, learns from how they turn out
	// and from ratings (POST /v1/feedback); the server does not close it.
	Router *sona.Router
	// RouterName is the model name that asks for the router; "" means
	// DefaultRouterName.
	RouterName string
	// RouteAdapters lets the router choose the models' adapters too.
	RouteAdapters bool
}

// Server is the HTTP API over a set of models. It answers 503 until
// AddModel gives it the first, so that a client can watch /health while the
// models load.
type Server struct {
	opt      Options
	sampling backends.Params
	// models is the published set (see modelSet); addMu serialises the
	// AddModel calls that replace it.
	models atomic.Pointer[modelSet]
	// starting is set while the models the server starts with load
	// (SetStarting).
	starting atomic.Bool
	addMu    sync.Mutex
	metrics  *metrics
	handler  http.Handler
	// recent are the completions kept for feedback on them.
	recent completionStore
	// residency loads and unloads the models on demand.
	residency *residency
}

// New returns a Server with no model yet.
func New(o Options) *Server {
	if o.MaxN <= 0 {
		o.MaxN = DefaultMaxN
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.FeedbackWindow <= 0 {
		o.FeedbackWindow = DefaultFeedbackWindow
	}
	s := &Server{opt: o, sampling: backends.DefaultParams(), residency: newResidency(o.MaxLoaded, o.KeepAlive)}
	s.recent.window = o.FeedbackWindow
	s.models.Store(&modelSet{})
	if o.Sampling != nil {
		s.sampling = *o.Sampling
	}
	s.metrics = newMetrics(s)
	s.residency.metrics = s.metrics
	s.handler = s.routes()
	return s
}

// Close unloads the models loaded on demand, waiting for the requests that
// use them; the server answers 503 to those that would load one after it.
// Models loaded for good are their owner's to close.
func (s *Server) Close() { s.residency.close() }

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(s.requestID, s.accessLog, s.recoverPanic, s.cors)
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed(r))

	r.With(s.limitBody).Get("/health", s.handle(s.health))
	r.Group(func(r chi.Router) {
		r.Use(s.auth)
		r.Group(func(r chi.Router) {
			r.Use(s.limitBody)
			r.Get("/metrics", s.metrics.serve)
			r.Group(func(r chi.Router) {
				r.Use(s.requireModel)
				r.Post("/v1/chat/completions", s.handle(s.chatCompletions))
				r.Post("/v1/completions", s.handle(s.completions))
				r.Post("/v1/embeddings", s.handle(s.embeddings))
				r.Get("/v1/models", s.handle(s.listModels))
				r.Get("/v1/models/*", s.handle(s.getModel))
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
		r.With(s.requireModel).Post("/v1/adapters", s.handle(s.uploadAdapter))
	})
	return r
}

// requireModel answers 503 until a model is served.
func (s *Server) requireModel(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.Ready() {
			writeError(w, loadingError())
			return
		}
		next.ServeHTTP(w, r)
	})
}

func loadingError() *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: codeLoading, Message: "the model is loading", RetryAfter: 1}
}

// health is llama-server's /health: 200 {"status":"ok"} once a model is
// served and the models the server starts with are loaded, 503 before.
func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	if !s.healthy() {
		return loadingError()
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// notFound is a JSON 404 for an unknown path.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) { writeError(w, pathNotFound(r)) }

func pathNotFound(r *http.Request) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: codeNotFound,
		Message: "invalid URL (" + r.Method + " " + r.URL.Path + ")"}
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
		writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: typeInvalidRequest, Code: codeMethod,
			Message: "method " + r.Method + " is not allowed for " + r.URL.Path})
	}
}
