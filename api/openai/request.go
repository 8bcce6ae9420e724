package openai

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// Limits on request fields that would otherwise let one request allocate
// without bound.
const (
	maxLogitBias    = 1024
	maxLegacyTopLPs = 5 // the legacy completions API's logprobs cap
)

// genRequest is what chat and text completions share once parsed: the
// session request and how the response is framed.
type genRequest struct {
	req          session.Request
	stream       bool
	includeUsage bool
	// perToken is llama-server's timings_per_token: timings on every
	// chunk.
	perToken bool
}

// parseGen reads the fields chat and text completions share. maxTokenFields
// are the names that set the token cap, in order of precedence (n_predict,
// llama-server's, comes last).
func parseGen(f *jsonhttp.Fields, ms *session.Models, maxTokenFields ...string) (*genRequest, error) {
	g := &genRequest{req: session.Request{Sampling: ms.Sampling()}}
	req := &g.req
	var err error
	if req.Model, _, err = f.Str("model"); err != nil {
		return nil, err
	}
	if g.stream, _, err = f.Bool("stream"); err != nil {
		return nil, err
	}
	so, ok, err := f.Object("stream_options")
	if err != nil {
		return nil, err
	}
	if ok {
		if !g.stream {
			return nil, session.Invalid("stream_options", session.CodeInvalidValue, "stream_options is only allowed when stream is true")
		}
		if g.includeUsage, _, err = so.Bool("include_usage"); err != nil {
			return nil, err
		}
		// Obfuscation pads chunks against side channels; leaving it out
		// changes no content. continuous_usage_stats is vLLM's usage on
		// every chunk, which clients only sum.
		if err := so.Unknown("include_obfuscation", "continuous_usage_stats"); err != nil {
			return nil, err
		}
	}
	for _, name := range append(maxTokenFields, "n_predict") {
		v, ok, err := f.Integer(name)
		if err != nil {
			return nil, err
		}
		if !ok || req.MaxTokens != 0 {
			continue
		}
		if name == "n_predict" && v < 0 {
			continue // llama-server's -1: as many as the context holds
		}
		if v < 1 {
			return nil, session.Invalid(name, session.CodeInvalidValue, "%s must be at least 1, got %d", name, v)
		}
		req.MaxTokens = int(min(v, math.MaxInt32))
	}
	if v, ok, err := f.Integer("n"); err != nil {
		return nil, err
	} else if ok {
		if v < 1 || v > int64(ms.MaxN()) {
			return nil, session.Invalid("n", session.CodeInvalidValue, "n must be between 1 and %d, got %d", ms.MaxN(), v)
		}
		req.N = int(v)
	}
	if v, ok := f.Raw("keep_alive"); ok {
		if req.KeepAlive, err = session.ParseKeepAlive(v, "keep_alive"); err != nil {
			return nil, err
		}
	}
	if req.Stop, _, err = f.Strings("stop"); err != nil {
		return nil, err
	}
	if v, ok, err := f.Number("lora_scale"); err != nil {
		return nil, err
	} else if ok {
		s := float32(v)
		req.LoRAScale = &s
	}
	if req.User, _, err = f.Str("user"); err != nil {
		return nil, err
	}
	if w, ok, err := f.Number("route_cost_weight"); err != nil {
		return nil, err
	} else if ok {
		if w < 0 || math.IsInf(w, 0) {
			return nil, session.Invalid("route_cost_weight", session.CodeInvalidValue, "route_cost_weight must be a finite number ≥ 0, got %g", w)
		}
		req.RouteCostWeight = &w
	}
	if g.perToken, _, err = f.Bool("timings_per_token"); err != nil {
		return nil, err
	}
	if req.Speculative, err = ParseSpeculative(f); err != nil {
		return nil, err
	}
	// llama-server's return_progress: prompt progress chunks, in a stream.
	if p, _, err := f.Bool("return_progress"); err != nil {
		return nil, err
	} else {
		req.Progress = p && g.stream
	}
	if err := parseExtras(f, req); err != nil {
		return nil, err
	}
	return g, nil
}

// parseExtras reads the generation fields vLLM and llama-server add to
// OpenAI's: ignore_eos, min_tokens, include_stop_str_in_output,
// skip_special_tokens, and the ones accepted because they mean nothing
// here (cache_prompt: the prefix cache is always on).
func parseExtras(f *jsonhttp.Fields, req *session.Request) error {
	var err error
	if req.IgnoreEOS, _, err = f.Bool("ignore_eos"); err != nil {
		return err
	}
	if v, ok, err := f.Integer("min_tokens"); err != nil {
		return err
	} else if ok {
		if v < 0 {
			return session.Invalid("min_tokens", session.CodeInvalidValue, "min_tokens must not be negative, got %d", v)
		}
		req.MinTokens = int(min(v, math.MaxInt32))
	}
	if req.IncludeStop, _, err = f.Bool("include_stop_str_in_output"); err != nil {
		return err
	}
	if skip, ok, err := f.Bool("skip_special_tokens"); err != nil {
		return err
	} else if ok {
		req.KeepSpecial = !skip
	}
	if v, ok, err := f.Str("reasoning_format"); err != nil {
		return err
	} else if ok {
		rf, known := session.ParseReasoningFormat(v)
		if !known {
			return session.Invalid("reasoning_format", session.CodeInvalidValue, "reasoning_format %s is not one of none, auto, deepseek", session.Quote(v))
		}
		req.Reasoning.Format = &rf
	}
	for _, name := range ignored {
		f.Raw(name)
	}
	return nil
}

// ignored are peers' fields accepted and ignored on the generation routes,
// because they mean nothing here: cache_prompt (llama-server; the prefix
// cache is always on), id_slot (llama-server's slot choice; the engine
// schedules), n_keep (llama-server's context shift; a prompt that does not
// fit is refused), t_max_predict_ms, timings_per_token and
// return_tokens (llama-server's extras of its own routes),
// spaces_between_special_tokens (vLLM: how special tokens are spaced when
// written), and guided_decoding_backend / guided_whitespace_pattern (vLLM's
// choice of grammar engine).
var ignored = []string{"cache_prompt", "id_slot", "n_keep", "t_max_predict_ms", "return_tokens",
	"spaces_between_special_tokens", "guided_decoding_backend", "guided_whitespace_pattern", "n_indent", "n_cmpl"}

// ParseSampling reads the sampling fields into p, which holds the server's
// defaults (the session checks the token ids against the model's
// vocabulary): OpenAI's, and llama-server's and vLLM's extensions (top_k,
// min_p, repeat_penalty or repetition_penalty, repeat_last_n). The
// samplers this server does not have are accepted at their neutral values
// (typical_p 1, mirostat 0, ...) and refused otherwise.
func ParseSampling(f *jsonhttp.Fields, p *backends.Params) error {
	return ParseSamplingTokens(f, p, nil)
}

// ParseSamplingTokens is ParseSampling where logit_bias may also name
// tokens by text, as llama-server's routes take it: a key (or a pair's
// first element) that is a string and not a number is encoded with
// tokenize, and each of its tokens gets the bias. A nil tokenize refuses
// such keys.
func ParseSamplingTokens(f *jsonhttp.Fields, p *backends.Params, tokenize func(string) []tokenizer.ID) error {
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
		{"repetition_penalty", &p.RepeatPenalty, 0, 10, true, false},
	} {
		v, ok, err := f.Number(b.name)
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
			return session.Invalid(b.name, session.CodeInvalidValue, "%s must be in %s%g, %g%s, got %g", b.name, lo, b.lo, b.hi, hi, v)
		}
		*b.dst = float32(v)
	}
	if v, ok, err := f.Integer("top_k"); err != nil {
		return err
	} else if ok {
		if v < -1 {
			return session.Invalid("top_k", session.CodeInvalidValue, "top_k must not be negative, got %d", v)
		}
		// vLLM's -1 and llama-server's 0 both turn top-k off.
		p.TopK = int(max(0, min(v, math.MaxInt32)))
	}
	if v, ok, err := f.Integer("repeat_last_n"); err != nil {
		return err
	} else if ok {
		if v < -1 || v > backends.MaxRepeatLastN {
			return session.Invalid("repeat_last_n", session.CodeInvalidValue, "repeat_last_n must be in [-1, %d], got %d", backends.MaxRepeatLastN, v)
		}
		p.RepeatLastN = int(v)
		if v == 0 {
			// llama-server's 0: no penalty window, so no penalties (the
			// backend's 0 means its default window).
			p.RepeatPenalty, p.PresencePenalty, p.FrequencyPenalty, p.RepeatLastN = 1, 0, 0, 0
		}
	}
	if v, ok, err := f.Integer("seed"); err != nil {
		return err
	} else if ok {
		if v == -1 || v == 0xFFFFFFFF {
			// llama-server's LLAMA_DEFAULT_SEED: a random seed.
			p.Seed = nil
		} else {
			p.Seed = &v
		}
	}
	// The samplers this server does not have, at the values that turn
	// them off.
	for _, n := range []struct {
		name    string
		neutral float64
	}{
		{"typical_p", 1}, {"tfs_z", 1}, {"mirostat", 0}, {"dynatemp_range", 0}, {"xtc_probability", 0},
		{"dry_multiplier", 0}, {"top_n_sigma", -1}, {"length_penalty", 1},
	} {
		v, ok, err := f.Number(n.name)
		if err != nil {
			return err
		}
		if ok && v != n.neutral && !(n.name == "top_n_sigma" && v <= 0) && !(n.name == "typical_p" && v >= 1) {
			return session.Unsupported(n.name, "%s is not supported by this server (it is off at %g)", n.name, n.neutral)
		}
	}
	// Settings of the samplers above that only matter when they are on.
	f.Ignore("mirostat_tau", "mirostat_eta", "dynatemp_exponent", "xtc_threshold", "dry_base", "dry_allowed_length",
		"dry_penalty_last_n", "dry_sequence_breakers", "penalize_nl", "samplers", "min_keep")

	if lb, ok := f.Raw("logit_bias"); ok {
		bias, err := parseLogitBias(lb, tokenize)
		if err != nil {
			return err
		}
		p.LogitBias = bias
	}
	if err := p.Validate(); err != nil {
		param := ""
		if pe, ok := err.(*backends.ParamError); ok {
			param = pe.Param
		}
		return session.Invalid(param, session.CodeInvalidValue, "%v", err)
	}
	return nil
}

// parseLogitBias reads logit_bias: OpenAI's {"id": bias}, or
// llama-server's [[id, bias], ...] (a bias of false bans the token); with
// tokenize, ids may also be given as text (see ParseSamplingTokens).
func parseLogitBias(v json.RawMessage, tokenize func(string) []tokenizer.ID) (map[tokenizer.ID]float32, error) {
	bias := map[tokenizer.ID]float32{}
	add := func(key string, id int64, b float64) error {
		if id < 0 || id > math.MaxInt32 {
			return session.Invalid("logit_bias", session.CodeInvalidValue, "logit_bias key %s is not a token id", session.Quote(key))
		}
		if b < -backends.MaxLogitBias || b > backends.MaxLogitBias {
			return session.Invalid("logit_bias", session.CodeInvalidValue, "logit_bias[%s] must be in [-%d, %d], got %g", session.Quote(key), backends.MaxLogitBias, backends.MaxLogitBias, b)
		}
		bias[tokenizer.ID(id)] = float32(b)
		return nil
	}
	addText := func(text string, b float64) error {
		for _, id := range tokenize(text) {
			if err := add(text, int64(id), b); err != nil {
				return err
			}
		}
		return nil
	}
	if pairs, ok := jsonhttp.ParseArray(v); ok {
		if len(pairs) > maxLogitBias {
			return nil, session.Invalid("logit_bias", session.CodeInvalidValue, "logit_bias holds %d entries; at most %d are allowed", len(pairs), maxLogitBias)
		}
		for i, pr := range pairs {
			pair, ok := jsonhttp.ParseArray(pr)
			var id int64
			var text string
			isText := false
			if ok && len(pair) == 2 {
				if id, ok = jsonhttp.ParseInteger(pair[0]); !ok && tokenize != nil && json.Unmarshal(pair[0], &text) == nil {
					ok, isText = true, true
				}
			}
			if !ok || len(pair) != 2 {
				what := "a [token id, bias] pair"
				if tokenize != nil {
					what = "a [token id or text, bias] pair"
				}
				return nil, session.Invalid("logit_bias", session.CodeInvalidType, "logit_bias[%d] must be %s", i, what)
			}
			b, ok := jsonhttp.ParseNumber(pair[1])
			if string(pair[1]) == "false" {
				b, ok = -backends.MaxLogitBias, true
			}
			if !ok {
				return nil, session.Invalid("logit_bias", session.CodeInvalidType, "logit_bias[%d][1] must be a number or false", i)
			}
			var err error
			if isText {
				err = addText(text, b)
			} else {
				err = add(strconv.FormatInt(id, 10), id, b)
			}
			if err != nil {
				return nil, err
			}
		}
		return bias, nil
	}
	lb, err := jsonhttp.ObjectOf(v, "logit_bias")
	if err != nil {
		return nil, err
	}
	if lb.Len() > maxLogitBias {
		return nil, session.Invalid("logit_bias", session.CodeInvalidValue, "logit_bias holds %d entries; at most %d are allowed", lb.Len(), maxLogitBias)
	}
	for _, k := range lb.Names() {
		id, err := strconv.Atoi(k)
		if err != nil && tokenize == nil {
			return nil, session.Invalid("logit_bias", session.CodeInvalidValue, "logit_bias key %s is not a token id", session.Quote(k))
		}
		var b float64
		if v, _ := lb.Peek(k); tokenize != nil && string(v) == "false" {
			lb.Raw(k)
			b = -backends.MaxLogitBias
		} else {
			var ok bool
			var e error
			if b, ok, e = lb.Number(k); e != nil || !ok {
				return nil, session.Invalid("logit_bias", session.CodeInvalidType, "logit_bias[%s] must be a number", session.Quote(k))
			}
		}
		if err != nil {
			err = addText(k, b)
		} else {
			err = add(k, int64(id), b)
		}
		if err != nil {
			return nil, err
		}
	}
	return bias, nil
}

// ParseSpeculative reads a request's speculative decoding settings: this
// server's "speculative", a source name ("off", "ngram", "suffix",
// "draft"), a boolean (false: off), or an object {"source", "n_max",
// "n_min", "p_min"}; and llama-server's flat "speculative.n_max",
// "speculative.n_min" and "speculative.p_min". n_max 0 drafts nothing;
// p_min (llama-server's least draft probability) is accepted and
// ignored, as the draft sources here rank their proposals themselves.
// Values out of range are errors that name the field.
func ParseSpeculative(f *jsonhttp.Fields) (backends.SpecParams, error) {
	var p backends.SpecParams
	limits := func(o *jsonhttp.Fields, maxName, minName, pName string) error {
		for _, c := range []struct {
			name string
			dst  *int
		}{{maxName, &p.Max}, {minName, &p.Min}} {
			v, ok, err := o.Integer(c.name)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if v < 0 || v > backends.MaxSpecTokens {
				return session.Invalid(o.Param(c.name), session.CodeInvalidValue, "%s must be between 0 and %d, got %d",
					o.Param(c.name), backends.MaxSpecTokens, v)
			}
			if c.dst == &p.Max && v == 0 {
				p.Source = backends.SpecOff
			}
			*c.dst = int(v)
		}
		if v, ok, err := o.Number(pName); err != nil {
			return err
		} else if ok && !(v >= 0 && v <= 1) {
			return session.Invalid(o.Param(pName), session.CodeInvalidValue, "%s must be between 0 and 1, got %g", o.Param(pName), v)
		}
		return nil
	}
	source := func(name, v string) error {
		s, err := backends.ParseSpecSource(v)
		if err != nil {
			return session.Invalid(name, session.CodeInvalidValue, "%s: %v", name, err)
		}
		if p.Source != backends.SpecOff {
			p.Source = s
		}
		return nil
	}
	if err := limits(f, "speculative.n_max", "speculative.n_min", "speculative.p_min"); err != nil {
		return p, err
	}
	if raw, ok := f.Peek("speculative"); ok {
		var b bool
		var s string
		switch {
		case json.Unmarshal(raw, &b) == nil:
			f.Ignore("speculative")
			if !b {
				p.Source = backends.SpecOff
			}
		case json.Unmarshal(raw, &s) == nil:
			f.Ignore("speculative")
			if err := source(f.Param("speculative"), s); err != nil {
				return p, err
			}
		default:
			o, _, err := f.Object("speculative")
			if err != nil {
				return p, err
			}
			if err := limits(o, "n_max", "n_min", "p_min"); err != nil {
				return p, err
			}
			src, ok, err := o.Str("source")
			if err != nil {
				return p, err
			}
			if !ok {
				if src, ok, err = o.Str("type"); err != nil {
					return p, err
				}
			}
			if ok {
				if err := source(o.Param("source"), src); err != nil {
					return p, err
				}
			}
			if err := o.Unknown(); err != nil {
				return p, err
			}
		}
	}
	if p.Max > 0 && p.Min > p.Max {
		return p, session.Invalid("speculative.n_min", session.CodeInvalidValue, "speculative n_min %d is above n_max %d", p.Min, p.Max)
	}
	return p, nil
}
