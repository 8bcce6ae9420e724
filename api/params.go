package api

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// Limits on request fields that would otherwise let one request allocate
// without bound.
const (
	maxStops        = 16
	maxStopBytes    = 512
	maxLogitBias    = 1024
	maxLegacyTopLPs = 5 // the legacy completions API's logprobs cap
	// maxLoRAScale bounds lora_scale: past a few times the trained
	// strength an adapter only degrades the model.
	maxLoRAScale = 4
)

// genRequest is what chat and text completions share once parsed.
type genRequest struct {
	stream       bool
	includeUsage bool
	// maxTokens is the cap on generated tokens per choice; 0 means the
	// context left after the prompt, as llama-server does.
	maxTokens int
	n         int
	stop      []string
	sampling  backends.Params
	// logprobs asks for the chosen tokens' log-probabilities, topLogprobs
	// for that many alternatives too.
	logprobs    bool
	topLogprobs int
	// promptLogprobs asks for the prompt tokens' logprobs too (echo with
	// logprobs); scoreOnly generates nothing (max_tokens 0).
	promptLogprobs, scoreOnly bool
	// loraScale multiplies the adapter's updates (lora_scale; 1 when
	// absent); hasLoRAScale says the request set it.
	loraScale    float32
	hasLoRAScale bool

	// output is the grammar the output must follow (response_format, or a
	// tool call that must be made); nil generates freely.
	output *outputGrammar
	// tools says how the output's tool calls are found; nil for none.
	tools *toolRequest
	// render are control tokens the output writes out (tool-call markers).
	render []tokenizer.ID

	// Set by acquire: the id responses report, and the lease of the
	// adapter the model names (nil for the base model).
	modelID string
	lease   *lora.Lease
	// releaseModel ends the lease on the model's engine, which then stays
	// loaded for keepAlive (the request's keep_alive; nil: the model's).
	releaseModel func(keepAlive *time.Duration)
	keepAlive    *time.Duration
	// adapterName is the adapter's name in the model's registry, "" for
	// the base model.
	adapterName string
	// route is the router's decision, when the router chose the model.
	route *routing
}

// adapter is the adapter the engine runs the request with: nil for the
// base model, and for lora_scale 0, which is the base model exactly.
func (g *genRequest) adapter() *lora.Adapter {
	if g.lease == nil || g.loraScale == 0 {
		return nil
	}
	return g.lease.Adapter()
}

// release ends the adapter lease, if any; the handler defers it so that
// the adapter stays in use until the response is over.
func (g *genRequest) release() {
	if g.lease != nil {
		g.lease.Release()
	}
	if g.releaseModel != nil {
		g.releaseModel(g.keepAlive)
	}
}

// parseGen reads the fields chat and text completions share. maxTokenFields
// are the names that set the token cap, in order of precedence.
func (s *Server) parseGen(f *fields, vocab int, maxTokenFields ...string) (*genRequest, *apiError) {
	g := &genRequest{n: 1, sampling: s.sampling}
	var err *apiError
	if g.stream, _, err = f.boolean("stream"); err != nil {
		return nil, err
	}
	so, ok, err := f.object("stream_options")
	if err != nil {
		return nil, err
	}
	if ok {
		if !g.stream {
			return nil, invalid("stream_options", codeInvalidValue, "stream_options is only allowed when stream is true")
		}
		if g.includeUsage, _, err = so.boolean("include_usage"); err != nil {
			return nil, err
		}
		// Obfuscation pads chunks against side channels; leaving it out
		// changes no content.
		if err := so.unknown("include_obfuscation"); err != nil {
			return nil, err
		}
	}

	for _, name := range maxTokenFields {
		v, ok, err := f.integer(name)
		if err != nil {
			return nil, err
		}
		if !ok || g.maxTokens != 0 {
			continue
		}
		if v < 1 {
			return nil, invalid(name, codeInvalidValue, "%s must be at least 1, got %d", name, v)
		}
		g.maxTokens = int(min(v, math.MaxInt32))
	}

	if v, ok, err := f.integer("n"); err != nil {
		return nil, err
	} else if ok {
		if v < 1 || v > int64(s.opt.MaxN) {
			return nil, invalid("n", codeInvalidValue, "n must be between 1 and %d, got %d", s.opt.MaxN, v)
		}
		g.n = int(v)
	}

	if g.keepAlive, err = parseKeepAlive(f); err != nil {
		return nil, err
	}
	if g.stop, err = parseStop(f); err != nil {
		return nil, err
	}
	g.loraScale = 1
	if v, ok, err := f.number("lora_scale"); err != nil {
		return nil, err
	} else if ok {
		if v < 0 || v > maxLoRAScale {
			return nil, invalid("lora_scale", codeInvalidValue, "lora_scale must be in [0, %d], got %g", maxLoRAScale, v)
		}
		g.loraScale, g.hasLoRAScale = float32(v), true
	}
	if err := s.parseSampling(f, &g.sampling, vocab); err != nil {
		return nil, err
	}
	return g, nil
}

// parseStop reads stop: a string or a list of strings.
func parseStop(f *fields) ([]string, *apiError) {
	v, ok := f.raw("stop")
	if !ok {
		return nil, nil
	}
	var stops []string
	var one string
	if err := json.Unmarshal(v, &one); err == nil {
		stops = []string{one}
	} else if a, ok := parseArray(v); ok {
		if len(a) > maxStops {
			return nil, invalid("stop", codeInvalidValue, "stop holds %d strings; at most %d are allowed", len(a), maxStops)
		}
		for i, e := range a {
			var s string
			if err := json.Unmarshal(e, &s); err != nil {
				return nil, invalid("stop["+strconv.Itoa(i)+"]", codeInvalidType, "stop[%d] must be a string", i)
			}
			stops = append(stops, s)
		}
	} else {
		return nil, f.typeError("stop", "a string or an array of strings")
	}
	for _, s := range stops {
		if s == "" {
			return nil, invalid("stop", codeInvalidValue, "stop strings must not be empty")
		}
		if len(s) > maxStopBytes {
			return nil, invalid("stop", codeInvalidValue, "stop strings must be at most %d bytes", maxStopBytes)
		}
	}
	return stops, nil
}

// parseSampling reads the sampling fields into p, which holds the server's
// defaults: OpenAI's, and llama-server's extensions (top_k, min_p,
// repeat_penalty, repeat_last_n).
func (s *Server) parseSampling(f *fields, p *backends.Params, vocab int) *apiError {
	type bound struct {
		name           string
		dst            *float32
		lo, hi         float64
		loOpen, hiOpen bool
	}
	for _, b := range []bound{
		{"temperature", &p.Temperature, 0, 2, false, false},
		{"top_p", &p.TopP, 0, 1, true, false},
		{"presence_penalty", &p.PresencePenalty, -2, 2, false, false},
		{"frequency_penalty", &p.FrequencyPenalty, -2, 2, false, false},
		{"min_p", &p.MinP, 0, 1, false, false},
		{"repeat_penalty", &p.RepeatPenalty, 0, 10, false, false},
	} {
		v, ok, err := f.number(b.name)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if v < b.lo || v > b.hi || (b.loOpen && v == b.lo) || (b.hiOpen && v == b.hi) {
			lo, hi := "[", "]"
			if b.loOpen {
				lo = "("
			}
			if b.hiOpen {
				hi = ")"
			}
			return invalid(b.name, codeInvalidValue, "%s must be in %s%g, %g%s, got %g", b.name, lo, b.lo, b.hi, hi, v)
		}
		*b.dst = float32(v)
	}
	if v, ok, err := f.integer("top_k"); err != nil {
		return err
	} else if ok {
		if v < 0 {
			return invalid("top_k", codeInvalidValue, "top_k must not be negative, got %d", v)
		}
		p.TopK = int(min(v, math.MaxInt32))
	}
	if v, ok, err := f.integer("repeat_last_n"); err != nil {
		return err
	} else if ok {
		if v < -1 || v > backends.MaxRepeatLastN {
			return invalid("repeat_last_n", codeInvalidValue, "repeat_last_n must be in [-1, %d], got %d", backends.MaxRepeatLastN, v)
		}
		p.RepeatLastN = int(v)
	}
	if v, ok, err := f.integer("seed"); err != nil {
		return err
	} else if ok {
		p.Seed = &v
	}

	lb, ok, err := f.object("logit_bias")
	if err != nil {
		return err
	}
	if ok {
		if len(lb.m) > maxLogitBias {
			return invalid("logit_bias", codeInvalidValue, "logit_bias holds %d entries; at most %d are allowed", len(lb.m), maxLogitBias)
		}
		bias := make(map[tokenizer.ID]float32, len(lb.m))
		for k := range lb.m {
			id, err := strconv.Atoi(k)
			if err != nil || id < 0 || id >= vocab {
				return invalid("logit_bias", codeInvalidValue, "logit_bias key %s is not a token id in [0, %d)", quote(k), vocab)
			}
			v, ok, e := lb.number(k)
			if e != nil || !ok {
				return invalid("logit_bias", codeInvalidType, "logit_bias[%s] must be a number", quote(k))
			}
			if v < -backends.MaxLogitBias || v > backends.MaxLogitBias {
				return invalid("logit_bias", codeInvalidValue, "logit_bias[%s] must be in [-%d, %d], got %g", quote(k), backends.MaxLogitBias, backends.MaxLogitBias, v)
			}
			bias[tokenizer.ID(id)] = float32(v)
		}
		p.LogitBias = bias
	}
	if err := p.ValidateVocab(vocab); err != nil {
		param := ""
		if pe, ok := err.(*backends.ParamError); ok {
			param = pe.Param
		}
		return invalid(param, codeInvalidValue, "%v", err)
	}
	return nil
}
