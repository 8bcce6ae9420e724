package llamacpp

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/api/openai"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// llamaDefaultSeed is llama.cpp's LLAMA_DEFAULT_SEED: "a random seed",
// which generation_settings reports when a request has none.
const llamaDefaultSeed = 0xFFFFFFFF

// ignoredFields are llama-server's completion fields accepted and ignored
// because they change nothing here: n_keep and n_discard (context shift,
// which this server does not do: a prompt that does not fit is refused),
// min_keep, and the chat-parsing settings the OpenAI route uses (this
// route returns the raw text).
var ignoredFields = []string{"n_keep", "n_discard", "min_keep",
	"chat_format", "reasoning_format", "reasoning_in_content", "thinking_forced_open", "parse_tool_calls", "preserved_tokens",
	"t_max_prompt_ms", "stream_options", "id", "id_task"}

// completionRequest is a parsed POST /completion.
type completionRequest struct {
	req      session.Request
	stream   bool
	nProbs   int
	tokens   bool // return_tokens
	perTok   bool // timings_per_token
	fields   []string
	nPredict int64 // as asked: -1 for no limit
}

// completion serves POST /completion (and /completions): llama-server's
// native text completion.
func (a *API) completion(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	c, err := a.parseCompletion(f)
	if err != nil {
		return err
	}
	c.req.Received = jsonhttp.Received(r)
	ctx := r.Context()
	gen, err := a.Models.Start(ctx, &c.req)
	if err != nil {
		return err
	}
	defer gen.Close()
	if !c.stream {
		if err := gen.Run(ctx, session.Discard{}); err != nil {
			return err
		}
		now := time.Now()
		results := gen.Results()
		out := make([]any, len(results))
		for i, res := range results {
			out[i] = c.project(c.final(gen, res, now, false))
		}
		if len(out) == 1 {
			jsonhttp.WriteJSON(w, http.StatusOK, out[0])
		} else {
			jsonhttp.WriteJSON(w, http.StatusOK, out)
		}
		return nil
	}
	st := jsonhttp.NewSSE(w)
	if err := st.Begin(); err != nil {
		return nil // the client is gone
	}
	sink := &completionStream{c: c, gen: gen, st: st, decoded: make([]int, gen.Choices())}
	if err := gen.Run(ctx, sink); err != nil && err != session.ErrClientGone {
		// The status line is gone: the error travels as an event, as
		// llama-server sends it.
		st.Send(ErrorBody(session.AsError(err)))
	}
	return nil
}

// parseCompletion reads the fields of a completion request.
func (a *API) parseCompletion(f *jsonhttp.Fields) (*completionRequest, error) {
	c := &completionRequest{req: session.Request{Sampling: a.Models.Sampling(), IDPrefix: "cmpl-", Route: "/completion", Logprobs: true}}
	req := &c.req
	var err error
	if req.Model, _, err = f.Str("model"); err != nil {
		return nil, err
	}
	if c.stream, _, err = f.Bool("stream"); err != nil {
		return nil, err
	}
	// n_predict, or max_tokens: -1 (or absent) is no limit but the
	// server's and the context's.
	c.nPredict = -1
	given := false
	for _, name := range []string{"n_predict", "max_tokens"} {
		v, ok, err := f.Integer(name)
		if err != nil {
			return nil, err
		}
		if !ok || given {
			continue // n_predict wins over max_tokens
		}
		given = true
		if v < -1 {
			return nil, session.Invalid(name, session.CodeInvalidValue, "%s must be -1 (no limit) or more, got %d", name, v)
		}
		c.nPredict = v
		if v >= 0 {
			// llama-server samples one token before it looks at the
			// limit: 0 gives one.
			req.MaxTokens = int(min(max(v, 1), math.MaxInt32))
		}
	}
	req.FitMaxTokens = true
	if v, ok, err := f.Integer("n_probs"); err != nil {
		return nil, err
	} else if ok {
		if v < 0 || v > backends.MaxTopLogprobs {
			return nil, session.Invalid("n_probs", session.CodeInvalidValue, "n_probs must be between 0 and %d, got %d", backends.MaxTopLogprobs, v)
		}
		c.nProbs = int(v)
	}
	req.TopLogprobs = c.nProbs
	if req.PostSampling, _, err = f.Bool("post_sampling_probs"); err != nil {
		return nil, err
	}
	if cache, ok, err := f.Bool("cache_prompt"); err != nil {
		return nil, err
	} else if ok {
		req.NoCache = !cache
	}
	if v, ok, err := f.Integer("id_slot"); err != nil {
		return nil, err
	} else if ok && v >= 0 {
		slot := int(min(v, math.MaxInt32))
		req.Slot = &slot
	}
	if c.tokens, _, err = f.Bool("return_tokens"); err != nil {
		return nil, err
	}
	if c.perTok, _, err = f.Bool("timings_per_token"); err != nil {
		return nil, err
	}
	if p, _, err := f.Bool("return_progress"); err != nil {
		return nil, err
	} else {
		req.Progress = p && c.stream
	}
	if c.fields, _, err = f.Strings("response_fields"); err != nil {
		return nil, err
	}
	if req.Stop, _, err = f.Strings("stop"); err != nil {
		return nil, err
	}
	// llama-server drops empty stop words.
	req.Stop = dropEmpty(req.Stop)
	if req.IgnoreEOS, _, err = f.Bool("ignore_eos"); err != nil {
		return nil, err
	}
	if req.Speculative, err = openai.ParseSpeculative(f); err != nil {
		return nil, err
	}
	for _, name := range []string{"n_indent", "t_max_predict_ms"} {
		if v, ok, err := f.Integer(name); err != nil {
			return nil, err
		} else if ok && v > 0 {
			return nil, session.Unsupported(name, "%s is not supported by this server", name)
		}
	}
	if lora, ok, err := f.Array("lora"); err != nil {
		return nil, err
	} else if ok && len(lora) > 0 {
		return nil, session.Unsupported("lora", "lora by id is not supported: this server's adapters have names; name one in model as \"MODEL:ADAPTER\" (GET /v1/adapters lists them)")
	}
	if lazy, _, err := f.Bool("grammar_lazy"); err != nil {
		return nil, err
	} else if lazy {
		return nil, session.Unsupported("grammar_lazy", "lazy grammars (grammar_lazy, grammar_triggers) are not supported by this server")
	}
	f.Ignore("grammar_triggers")
	if req.Output, err = parseOutput(f); err != nil {
		return nil, err
	}
	var tok *tokenizer.Tokenizer
	tokenizerOf := func() (*tokenizer.Tokenizer, error) {
		if tok != nil {
			return tok, nil
		}
		t, err := a.Models.Resolve(req.Model, "model")
		if err != nil {
			return nil, err
		}
		tok = t.Model.Tokenizer
		return tok, nil
	}
	var tokErr error
	tokenize := func(s string) []tokenizer.ID {
		t, err := tokenizerOf()
		if err != nil {
			tokErr = err
			return nil
		}
		return t.Encode(s, tokenizer.EncodeOptions{})
	}
	if err := openai.ParseSamplingTokens(f, &req.Sampling, tokenize); err != nil {
		return nil, err
	}
	if tokErr != nil {
		return nil, tokErr
	}
	if req.Prompts, err = parsePrompts(f, tokenizerOf); err != nil {
		return nil, err
	}
	f.Ignore(ignoredFields...)
	if err := f.Unknown(); err != nil {
		return nil, err
	}
	return c, nil
}

func dropEmpty(ss []string) []string {
	out := ss[:0]
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// parseOutput reads llama-server's grammar (GBNF) and json_schema; a
// grammar wins over a schema, as llama-server has it.
func parseOutput(f *jsonhttp.Fields) (*session.Output, error) {
	src, hasGrammar, err := f.Str("grammar")
	if err != nil {
		return nil, err
	}
	schema, hasSchema := f.Raw("json_schema")
	switch {
	case hasGrammar && src != "":
		return session.GBNFOutput(src, "grammar")
	case hasSchema:
		return session.JSONSchemaOutput(schema, "json_schema")
	}
	return nil, nil
}

// Keys of a prompt object.
const (
	promptStringKey   = "prompt_string"
	multimodalDataKey = "multimodal_data"
)

// parsePrompts reads llama-server's prompt: a string, a list of token ids,
// a list mixing ids and strings (one prompt), an object {"prompt_string"},
// or a list of any of these (several prompts, answered as a list).
func parsePrompts(f *jsonhttp.Fields, tokenizerOf func() (*tokenizer.Tokenizer, error)) ([]session.Prompt, error) {
	v, ok := f.Raw("prompt")
	if !ok {
		return nil, session.Invalid("prompt", session.CodeMissing, "prompt is required")
	}
	items, isArray := jsonhttp.ParseArray(v)
	if !isArray || hasNumber(items) {
		p, err := parseSubprompt(v, "prompt", tokenizerOf)
		if err != nil {
			return nil, err
		}
		return []session.Prompt{p}, nil
	}
	if len(items) == 0 {
		return nil, session.Invalid("prompt", session.CodeInvalidValue, "prompt must not be empty")
	}
	if len(items) > session.MaxPrompts {
		return nil, session.Invalid("prompt", session.CodeInvalidValue, "prompt holds %d prompts; at most %d are allowed", len(items), session.MaxPrompts)
	}
	out := make([]session.Prompt, len(items))
	for i, it := range items {
		p, err := parseSubprompt(it, "prompt["+strconv.Itoa(i)+"]", tokenizerOf)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// hasNumber reports whether a list holds a number: then it is one prompt
// (token ids, maybe mixed with strings), not a list of prompts.
func hasNumber(items []json.RawMessage) bool {
	for _, it := range items {
		if _, ok := jsonhttp.ParseNumber(it); ok {
			return true
		}
	}
	return false
}

// parseSubprompt reads one prompt (the field param): a string, token ids
// mixed with strings, or {"prompt_string": ...}.
func parseSubprompt(v json.RawMessage, param string, tokenizerOf func() (*tokenizer.Tokenizer, error)) (session.Prompt, error) {
	var text string
	if json.Unmarshal(v, &text) == nil {
		return session.Prompt{Text: text}, nil
	}
	if items, ok := jsonhttp.ParseArray(v); ok {
		if len(items) == 0 {
			return session.Prompt{}, session.Invalid(param, session.CodeInvalidValue, "%s must not be empty", param)
		}
		var ids []tokenizer.ID
		first := true
		for i, it := range items {
			if json.Unmarshal(it, &text) == nil {
				t, err := tokenizerOf()
				if err != nil {
					return session.Prompt{}, err
				}
				// BOS only when a string comes first, as llama-server.
				ids = append(ids, t.Encode(text, tokenizer.EncodeOptions{AddSpecial: first, ParseSpecial: true})...)
				first = false
				continue
			}
			n, ok := jsonhttp.ParseInteger(it)
			if !ok {
				p := param + "[" + strconv.Itoa(i) + "]"
				return session.Prompt{}, session.Invalid(p, session.CodeInvalidType, "%s must be a token id or a string", p)
			}
			if n < math.MinInt32 || n > math.MaxInt32 {
				n = -1 // refused by the session, which knows the vocabulary
			}
			ids = append(ids, tokenizer.ID(n))
			first = false
		}
		return session.Prompt{Tokens: ids}, nil
	}
	obj, err := jsonhttp.ObjectOf(v, param)
	if err != nil {
		return session.Prompt{}, session.Invalid(param, session.CodeInvalidType,
			"%s must be a string, a list of token ids (and strings), or an object with %s", param, promptStringKey)
	}
	if obj.Has(multimodalDataKey) {
		return session.Prompt{}, session.Unsupported(param+"."+multimodalDataKey, "multimodal data was given, but this model does not take images or audio")
	}
	inner, ok := obj.Raw(promptStringKey)
	if !ok {
		return session.Prompt{}, session.Invalid(param+"."+promptStringKey, session.CodeMissing, "%s.%s is required", param, promptStringKey)
	}
	if err := obj.Unknown(); err != nil {
		return session.Prompt{}, err
	}
	return parseSubprompt(inner, param+"."+promptStringKey, tokenizerOf)
}

// tokenProb is one generated token with its probabilities, as
// completion_probabilities holds it: log-probabilities, or with
// post_sampling_probs probabilities.
type tokenProb struct {
	ID          tokenizer.ID `json:"id"`
	Token       string       `json:"token"`
	Logprob     *float64     `json:"logprob,omitempty"`
	Prob        *float64     `json:"prob,omitempty"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []tokenProb  `json:"top_logprobs,omitempty"`
	TopProbs    []tokenProb  `json:"top_probs,omitempty"`
}

func (c *completionRequest) probOf(id tokenizer.ID, piece string, lp float32) tokenProb {
	p := tokenProb{ID: id, Token: piece, Bytes: byteList(piece)}
	v := openai.JSONLogprob(lp)
	if c.req.PostSampling {
		pr := math.Exp(float64(lp))
		p.Prob = &pr
	} else {
		p.Logprob = &v
	}
	return p
}

// probs renders tokens as completion_probabilities.
func (c *completionRequest) probs(tokens []session.TokenLogprob) []tokenProb {
	out := make([]tokenProb, len(tokens))
	for i, t := range tokens {
		p := c.probOf(t.ID, t.Piece, t.Logprob)
		top := make([]tokenProb, len(t.Top))
		for j, alt := range t.Top {
			top[j] = c.probOf(alt.ID, alt.Piece, alt.Logprob)
		}
		if c.req.PostSampling {
			p.TopProbs = top
		} else {
			p.TopLogprobs = top
		}
		out[i] = p
	}
	return out
}

func byteList(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}

// stopType is llama-server's name of why a choice stopped.
func stopType(r session.FinishReason) string {
	switch r {
	case session.FinishStop, session.FinishToolCalls:
		return "eos"
	case session.FinishStopSequence:
		return "word"
	case session.FinishLength:
		return "limit"
	}
	return "none"
}

// settings is generation_settings: the request's sampling as
// llama-server lists it.
func (c *completionRequest) settings() map[string]any {
	req := &c.req
	return settingsOf(req.Sampling, req.MaxTokens, req.Stop, req.IgnoreEOS, c.stream, c.nProbs, c.perTok, req.PostSampling)
}

// final is a choice's last object: the whole result, or in a stream (where
// the text and tokens went out already) its summary.
func (c *completionRequest) final(gen *session.Generation, res session.Result, now time.Time, stream bool) map[string]any {
	_, promptIDs := gen.Prompt(res.Prompt)
	tp := gen.ChoiceThroughput(res.Index, now)
	content := res.Text
	tokens := []tokenizer.ID{}
	if c.tokens && !stream {
		for _, t := range res.Tokens {
			tokens = append(tokens, t.ID)
		}
	}
	if stream {
		content = ""
	}
	var prompt strings.Builder
	tok := gen.Tokenizer()
	for _, id := range promptIDs {
		prompt.WriteString(tok.Piece(id))
	}
	out := map[string]any{
		"index":               res.Index,
		"content":             content,
		"tokens":              tokens,
		"id_slot":             res.Slot,
		"stop":                true,
		"model":               gen.ModelID(),
		"tokens_predicted":    res.Generated,
		"tokens_evaluated":    len(promptIDs),
		"generation_settings": c.settings(),
		"prompt":              prompt.String(),
		"has_new_line":        strings.Contains(res.Text, "\n"),
		// Only a choice without a limit of its own stops for the
		// context (or the trained context) it filled.
		"truncated":     res.Finish == session.FinishLength && c.req.MaxTokens == 0,
		"stop_type":     stopType(res.Finish),
		"stopping_word": res.StopSequence,
		"tokens_cached": len(promptIDs) + max(res.Generated-1, 0),
		"timings":       tp.TimingsJSON(),
	}
	if !stream && c.nProbs > 0 {
		out["completion_probabilities"] = c.probs(res.Tokens)
	}
	return out
}

// project keeps the response_fields of out, when the request lists some,
// each under its path ("generation_settings/n_predict" names a member of
// a member); paths that name nothing are left out.
func (c *completionRequest) project(out map[string]any) any {
	if len(c.fields) == 0 {
		return out
	}
	b, err := json.Marshal(out)
	if err != nil {
		return out
	}
	var tree map[string]any
	if json.Unmarshal(b, &tree) != nil {
		return out
	}
	res := map[string]any{}
	for _, path := range c.fields {
		var cur any = tree
		found := true
		for part := range strings.SplitSeq(path, "/") {
			m, ok := cur.(map[string]any)
			if !ok {
				found = false
				break
			}
			if cur, ok = m[part]; !ok {
				found = false
				break
			}
		}
		if found {
			res[path] = cur
		}
	}
	return res
}

// completionStream writes a completion's events as llama-server streams
// them: one event per token, {"content", "tokens", "stop": false, ...},
// then the choice's final object with "stop": true.
type completionStream struct {
	c   *completionRequest
	gen *session.Generation
	st  *jsonhttp.Stream
	// decoded counts each choice's tokens sent.
	decoded []int
}

func (cs *completionStream) Send(evs []session.Event) error {
	i := evs[0].Choice
	if evs[0].Kind == session.EventProgress {
		p := evs[0].Progress
		return cs.st.Send(map[string]any{"index": i, "content": "", "tokens": []tokenizer.ID{}, "stop": false, "id_slot": cs.gen.ChoiceSlot(i),
			"tokens_predicted": 0, "tokens_evaluated": p.Total, "prompt_progress": openai.ProgressOf(p)})
	}
	var text strings.Builder
	var tokens []session.TokenLogprob
	var finish *session.Event
	for j := range evs {
		e := &evs[j]
		switch e.Kind {
		case session.EventText, session.EventReasoning:
			text.WriteString(e.Text)
		case session.EventFinish:
			finish = e
		}
		tokens = append(tokens, e.Tokens...)
	}
	_, promptIDs := cs.gen.Prompt(cs.gen.ChoicePrompt(i))
	// One event per token, the text on the last (the tokens before it
	// ended inside a character, or were held back by a stop string).
	for k, t := range tokens {
		cs.decoded[i]++
		ev := map[string]any{
			"index":            i,
			"content":          "",
			"tokens":           []tokenizer.ID{t.ID},
			"stop":             false,
			"id_slot":          cs.gen.ChoiceSlot(i),
			"tokens_predicted": cs.decoded[i],
			"tokens_evaluated": len(promptIDs),
		}
		if k == len(tokens)-1 {
			ev["content"] = text.String()
		}
		if cs.c.nProbs > 0 {
			ev["completion_probabilities"] = cs.c.probs(tokens[k : k+1])
		}
		if cs.c.perTok {
			ev["timings"] = cs.gen.ChoiceThroughput(i, time.Now()).TimingsJSON()
		}
		if err := cs.st.Send(ev); err != nil {
			return err
		}
	}
	if len(tokens) == 0 && text.Len() > 0 {
		// Text released without a token of its own (the decoder's last
		// bytes, at the end).
		if err := cs.st.Send(map[string]any{"index": i, "content": text.String(), "tokens": []tokenizer.ID{}, "stop": false,
			"id_slot": cs.gen.ChoiceSlot(i), "tokens_predicted": cs.decoded[i], "tokens_evaluated": len(promptIDs)}); err != nil {
			return err
		}
	}
	if finish != nil {
		res := cs.gen.Results()[i]
		return cs.st.Send(cs.c.project(cs.c.final(cs.gen, res, time.Now(), true)))
	}
	return nil
}
