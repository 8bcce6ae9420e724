package api

import (
	"context"
	"crypto/subtle"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/api/llamacpp"
	"github.com/ruvllm/ruvllm/api/openai"
	"github.com/ruvllm/ruvllm/session"
)

// requestInfo is what a handler reports about a request for the access
// log. Only the request's own goroutine touches it.
type requestInfo struct {
	id               string
	start            time.Time
	promptTokens     int
	completionTokens int
	ttft             time.Duration // 0: no token was generated
}

type infoKey struct{}

// info returns the request's requestInfo; a request that did not pass
// through the middleware gets a throwaway one.
func info(ctx context.Context) *requestInfo {
	if ri, ok := ctx.Value(infoKey{}).(*requestInfo); ok {
		return ri
	}
	return &requestInfo{start: time.Now()}
}

// maxRequestIDLen bounds a client-supplied X-Request-Id.
const maxRequestIDLen = 128

// requestID takes the client's X-Request-Id when it is a sane token, else
// makes one, and echoes it in the response.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			id = uuid.NewString()
		}
		w.Header().Set("X-Request-Id", id)
		ri := &requestInfo{id: id, start: time.Now()}
		ctx := jsonhttp.WithReceived(context.WithValue(r.Context(), infoKey{}, ri), ri.start)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':'
		if !ok {
			return false
		}
	}
	return true
}

// accessLog writes one line per request when it ends, and feeds the
// request metrics.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		ri := info(r.Context())
		d := time.Since(ri.start)
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		route := routePattern(r)
		s.metrics.observeRequest(route, status, d)
		ev := s.opt.Logger.Info()
		if status >= 500 {
			ev = s.opt.Logger.Error()
		}
		ev = ev.Str("request_id", ri.id).Str("method", r.Method).Str("path", r.URL.Path).
			Int("status", status).Int("tokens_in", ri.promptTokens).Int("tokens_out", ri.completionTokens).
			Int("bytes", ww.BytesWritten()).Dur("duration_ms", d)
		if ri.ttft > 0 {
			ev = ev.Dur("ttft_ms", ri.ttft)
		}
		ev.Msg("request")
	})
}

// routePattern is the matched route, so that metrics labels stay few
// however many paths clients try.
func routePattern(r *http.Request) string {
	if rc := chiRouteContext(r); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

// recoverPanic turns a handler panic into a 500 JSON error (when nothing
// was sent yet) and a logged stack, so one bad request never takes the
// server down.
func (s *Server) recoverPanic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.opt.Logger.Error().Str("request_id", info(r.Context()).id).Interface("panic", v).
				Bytes("stack", debug.Stack()).Msg("handler panicked")
			if ww, ok := w.(middleware.WrapResponseWriter); ok && ww.Status() != 0 {
				// The response has begun: all that is left is to cut it off.
				panic(http.ErrAbortHandler)
			}
			openai.WriteError(w, session.Internal("internal server error"))
		}()
		next.ServeHTTP(w, r)
	})
}

// corsAllowHeaders are the request headers every preflight allows: the
// API key's two headers, Anthropic's version headers, JSON bodies and a
// client's request id. The headers a preflight asks for are allowed too.
var corsAllowHeaders = []string{"Authorization", "Content-Type", "X-Api-Key", "Anthropic-Version", "Anthropic-Beta", "X-Request-Id"}

// corsExposeHeaders are the response headers a page on another origin may
// read.
const corsExposeHeaders = "X-Request-Id, X-Route, Retry-After, WWW-Authenticate"

// corsMaxAge is how long (in seconds) a browser may keep a preflight's
// answer.
const corsMaxAge = "600"

// cors lets pages of the configured origins call the server, as
// llama-server and vLLM let any: it answers their preflights (OPTIONS with
// Access-Control-Request-Method) on every path with a 204, before routing
// and so before the API key is asked for, and puts
// Access-Control-Allow-Origin on every response to them, errors and
// streams included. The requests themselves still need the key. With no
// origins configured it adds nothing, so browsers refuse cross-origin
// calls.
func (s *Server) cors(next http.Handler) http.Handler {
	if len(s.opt.CORSOrigins) == 0 {
		return next
	}
	any := slices.Contains(s.opt.CORSOrigins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || !(any || slices.Contains(s.opt.CORSOrigins, origin)) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" && llamaPath(r.URL.Path) {
			// llama-server's own routes answer preflights as it does: the
			// origin echoed, credentials allowed, any header.
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", "*")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusOK)
			return
		}
		if any {
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Allow-Origin", origin)
		}
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", allowedHeaders(r.Header.Get("Access-Control-Request-Headers")))
			h.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// llamaPath reports whether path is one of llama-server's own routes
// (api/llamacpp).
func llamaPath(path string) bool {
	return slices.Contains(llamacpp.Paths, path) || strings.HasPrefix(path, "/slots/")
}

// allowedHeaders is corsAllowHeaders and the headers a preflight asked for
// (a comma-separated list) that are not among them; what is not a header
// name is left out.
func allowedHeaders(requested string) string {
	out := slices.Clone(corsAllowHeaders)
	for h := range strings.SplitSeq(requested, ",") {
		h = strings.TrimSpace(h)
		if headerName(h) && !slices.ContainsFunc(out, func(a string) bool { return strings.EqualFold(a, h) }) {
			out = append(out, h)
		}
	}
	return strings.Join(out, ", ")
}

// headerName reports whether h is a plausible header name: letters,
// digits, '-' and '_', at most 64 of them.
func headerName(h string) bool {
	if h == "" || len(h) > 64 {
		return false
	}
	for _, c := range []byte(h) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// bodyDeadline gives the request's body BodyTimeout to arrive: reading it
// fails after that (jsonhttp.Read answers 408). Once the body is read the
// server clears the deadline itself, so that a streamed response can take
// as long as it takes.
func (s *Server) bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// httptest's recorder has no deadlines; the request still runs.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opt.BodyTimeout))
		next.ServeHTTP(w, r)
	})
}

// limitBody caps the request body at MaxBodyBytes: a declared length over
// the cap is refused at once, a body that grows past it fails while read.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return s.limitBodyWith(openai.WriteError)(next)
}

// limitBodyWith is limitBody for a protocol's routes: a refusal is written
// in the protocol's shape.
func (s *Server) limitBodyWith(write jsonhttp.ErrorWriter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > s.opt.MaxBodyBytes {
				write(w, jsonhttp.TooLarge(s.opt.MaxBodyBytes))
				return
			}
			if r.Body != nil {
				r.Body = http.MaxBytesReader(w, r.Body, s.opt.MaxBodyBytes)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// auth requires one of the keys, as "Authorization: Bearer KEY" (OpenAI,
// ollama, llama-server) or "x-api-key: KEY" (Anthropic); a refusal is
// written in the protocol's shape.
func (s *Server) auth(write jsonhttp.ErrorWriter) func(http.Handler) http.Handler {
	keys := make([][]byte, len(s.opt.APIKeys))
	for i, k := range s.opt.APIKeys {
		keys[i] = []byte(k)
	}
	return func(next http.Handler) http.Handler {
		if len(keys) == 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// A client may send both headers (Claude Code with both
			// ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN set): either
			// holding a key will do. The scheme is case-insensitive (RFC
			// 9110): "BEARER key" is a bearer token too.
			var tokens []string
			scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
			if ok && strings.EqualFold(scheme, "Bearer") {
				tokens = append(tokens, token)
			}
			if k := r.Header.Get("X-Api-Key"); k != "" {
				tokens = append(tokens, k)
			}
			valid := 0
			for _, token := range tokens {
				t := []byte(strings.TrimSpace(token))
				for _, k := range keys {
					// Every key is compared, so the time taken does not
					// tell which one nearly matched.
					valid |= subtle.ConstantTimeCompare(t, k)
				}
			}
			if valid != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="ruvllm"`)
				msg := "missing API key: send it as \"Authorization: Bearer KEY\" (or \"x-api-key: KEY\")"
				if len(tokens) > 0 {
					msg = "incorrect API key provided"
				}
				write(w, &session.Error{Status: http.StatusUnauthorized, Type: session.TypeInvalidRequest, Code: codeInvalidAPIKey, Message: msg})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func chiRouteContext(r *http.Request) *chi.Context { return chi.RouteContext(r.Context()) }
