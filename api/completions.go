package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// maxPrompts bounds the prompts of one text completion request.
const maxPrompts = 256

// completions serves POST /v1/completions, OpenAI's legacy text completion.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) error {
	f, err := readObject(r)
	if err != nil {
		return err
	}
	t, err := s.requestModel(f, (&completionFormat{}).idPrefix())
	if err != nil {
		return err
	}
	defer s.abandonRoute(t)
	m := t.model
	vocab := len(m.Tokenizer.Vocab().Tokens)
	var cf0 completionFormat
	if cf0.echo, _, err = f.boolean("echo"); err != nil {
		return err
	}
	// max_tokens 0 with echo only scores the prompt.
	tokenFields := []string{"max_tokens"}
	mt, hasMT, err := f.integer("max_tokens")
	if err != nil {
		return err
	}
	scoreOnly := hasMT && mt == 0
	if scoreOnly {
		tokenFields = nil
	}
	g, err := s.parseGen(f, vocab, tokenFields...)
	if err != nil {
		return err
	}
	cf := completionFormat{logprobs: -1, echo: cf0.echo}
	if v, ok, err := f.integer("logprobs"); err != nil {
		return err
	} else if ok {
		if v < 0 || v > maxLegacyTopLPs {
			return invalid("logprobs", codeInvalidValue, "logprobs must be between 0 and %d, got %d", maxLegacyTopLPs, v)
		}
		cf.logprobs = int(v)
		g.logprobs, g.topLogprobs = true, int(v)
	}
	if cf.echo && cf.logprobs >= 0 {
		// The prompt's tokens are scored too, as OpenAI's legacy API and
		// vLLM do: what lm-evaluation-harness's loglikelihood requests.
		g.promptLogprobs, g.scoreOnly = true, scoreOnly
		if g.stream {
			return unsupported("stream", "echo with logprobs is answered whole; set stream to false")
		}
	} else if scoreOnly {
		return invalid("max_tokens", codeInvalidValue, "max_tokens must be at least 1, got 0 (0 only scores the prompt, with echo and logprobs)")
	}
	if v, ok, err := f.integer("best_of"); err != nil {
		return err
	} else if ok && v != int64(g.n) {
		return unsupported("best_of", "best_of other than n is not supported")
	}
	if v, ok, err := f.str("suffix"); err != nil {
		return err
	} else if ok && v != "" {
		return unsupported("suffix", "suffix (insertion) is not supported")
	}
	prompts, err := parsePrompts(f, m.Tokenizer, vocab)
	if err != nil {
		return err
	}
	if g.output, err = parseResponseFormat(f); err != nil {
		return err
	}
	if err := f.unknown("user"); err != nil {
		return err
	}
	if err := s.acquire(r.Context(), g, t); err != nil {
		return err
	}
	defer g.release()
	return s.generate(w, r, m, "/v1/completions", prompts, g, &cf)
}

// parsePrompts reads prompt: a string, a list of strings, a list of token
// ids, or a list of such lists.
func parsePrompts(f *fields, t *tokenizer.Tokenizer, vocab int) ([]prompt, *apiError) {
	v, ok := f.raw("prompt")
	if !ok {
		return nil, invalid("prompt", codeMissing, "prompt is required")
	}
	var text string
	if json.Unmarshal(v, &text) == nil {
		return []prompt{{ids: encodePrompt(t, text), text: text}}, nil
	}
	items, ok := parseArray(v)
	if !ok {
		return nil, f.typeError("prompt", "a string, an array of strings, or an array of token ids")
	}
	if len(items) == 0 {
		return nil, invalid("prompt", codeInvalidValue, "prompt must not be an empty array")
	}
	if ids, ok := tokenList(items); ok {
		p, err := tokenPrompt(t, ids, vocab, "prompt")
		if err != nil {
			return nil, err
		}
		return []prompt{p}, nil
	}
	if len(items) > maxPrompts {
		return nil, invalid("prompt", codeInvalidValue, "prompt holds %d prompts; at most %d are allowed", len(items), maxPrompts)
	}
	prompts := make([]prompt, len(items))
	for i, it := range items {
		param := "prompt[" + strconv.Itoa(i) + "]"
		if json.Unmarshal(it, &text) == nil {
			prompts[i] = prompt{ids: encodePrompt(t, text), text: text}
			continue
		}
		a, ok := parseArray(it)
		var ids []int64
		if ok {
			ids, ok = tokenList(a)
		}
		if !ok || len(ids) == 0 {
			return nil, invalid(param, codeInvalidType, "%s must be a string or a non-empty array of token ids", param)
		}
		p, err := tokenPrompt(t, ids, vocab, param)
		if err != nil {
			return nil, err
		}
		prompts[i] = p
	}
	return prompts, nil
}

// tokenList reads a JSON array of integers.
func tokenList(items []json.RawMessage) ([]int64, bool) {
	ids := make([]int64, len(items))
	for i, it := range items {
		n, ok := parseInteger(it)
		if !ok {
			return nil, false
		}
		ids[i] = n
	}
	return ids, true
}

func tokenPrompt(t *tokenizer.Tokenizer, ids []int64, vocab int, param string) (prompt, *apiError) {
	out := make([]tokenizer.ID, len(ids))
	for i, id := range ids {
		if id < 0 || id >= int64(vocab) {
			return prompt{}, invalid(param, codeInvalidValue, "token id %d is outside the vocabulary [0, %d)", id, vocab)
		}
		out[i] = tokenizer.ID(id)
	}
	return prompt{ids: out, text: t.Decode(out)}, nil
}

// completionFormat shapes text completions.
type completionFormat struct {
	echo     bool
	logprobs int // alternatives per token; -1: no logprobs
}

func (*completionFormat) idPrefix() string { return "cmpl-" }

// offsets turns byte offsets into the choice's text into character offsets,
// walking forward only: entries come in order.
type offsets struct {
	bytePos, runePos int
}

func (o *offsets) at(text string, b int) int {
	b = min(b, len(text))
	if b < o.bytePos {
		o.bytePos, o.runePos = 0, 0
	}
	o.runePos += utf8.RuneCountInString(text[o.bytePos:b])
	o.bytePos = b
	return o.runePos
}

// legacyLogprobs renders entries in the legacy format, text_offset in
// characters of the choice's text.
func legacyLogprobs(t *tokenizer.Tokenizer, c *choice, entries []tokenEntry, o *offsets) *textLogprobs {
	lp := &textLogprobs{
		Tokens:        make([]string, len(entries)),
		TokenLogprobs: make([]*float64, len(entries)),
		TopLogprobs:   make([]map[string]float64, len(entries)),
		TextOffset:    make([]int, len(entries)),
	}
	text := c.text.String()
	for i, e := range entries {
		lp.Tokens[i] = t.Piece(e.id)
		v := jsonLogprob(e.logprob)
		lp.TokenLogprobs[i] = &v
		top := make(map[string]float64, len(e.top))
		for _, a := range e.top {
			p := t.Piece(a.ID)
			if _, dup := top[p]; !dup {
				top[p] = jsonLogprob(a.Logprob)
			}
		}
		lp.TopLogprobs[i] = top
		lp.TextOffset[i] = o.at(text, e.start)
	}
	return lp
}

func (cf *completionFormat) response(h responseHead, gen *generation, t *tokenizer.Tokenizer, u usage) any {
	resp := textCompletion{ID: h.id, Object: "text_completion", Created: h.created, Model: h.model, SystemFingerprint: h.fingerprint, Usage: u}
	resp.Choices = make([]textChoice, len(gen.choices))
	for _, c := range gen.choices {
		finish := c.finish
		tc := textChoice{Index: c.index, Text: c.text.String(), FinishReason: &finish}
		if cf.echo {
			tc.Text = gen.prompts[c.prompt].text + tc.Text
		}
		if cf.logprobs >= 0 {
			tc.Logprobs = legacyLogprobs(t, c, c.entries, &offsets{})
			if cf.echo {
				p := gen.prompts[c.prompt]
				tc.Logprobs = joinLogprobs(promptLogprobs(t, p.ids, c.stream.PromptLogprobs), tc.Logprobs, utf8.RuneCountInString(p.text))
			}
		}
		resp.Choices[c.index] = tc
	}
	return resp
}

func (cf *completionFormat) stream(sse *sseWriter, h responseHead, t *tokenizer.Tokenizer, includeUsage bool) streamSink {
	return newSSESink(sse, h, &textChunks{tok: t, f: cf}, includeUsage)
}

// textChunks shapes the choices of a text completion stream.
type textChunks struct {
	tok *tokenizer.Tokenizer
	f   *completionFormat
	// offsets walk each choice's text for the logprobs' text_offset.
	offsets map[int]*offsets
}

func (*textChunks) object() string { return "text_completion" }

// opening echoes the prompts when asked to.
func (tc *textChunks) opening(gen *generation) []textChoice {
	tc.offsets = make(map[int]*offsets, len(gen.choices))
	var out []textChoice
	for _, c := range gen.choices {
		tc.offsets[c.index] = &offsets{}
		if p := gen.prompts[c.prompt].text; tc.f.echo && p != "" {
			out = append(out, textChoice{Index: c.index, Text: p})
		}
	}
	return out
}

func (tc *textChunks) text(c *choice, text string, entries []tokenEntry) (textChoice, bool) {
	ch := textChoice{Index: c.index, Text: text}
	if tc.f.logprobs >= 0 {
		ch.Logprobs = legacyLogprobs(tc.tok, c, entries, tc.offsets[c.index])
	}
	return ch, true
}

func (*textChunks) finish(c *choice, reason string) textChoice {
	return textChoice{Index: c.index, FinishReason: &reason}
}

// promptLogprobs renders a prompt's tokens and their logprobs in the legacy
// format: the first token has none (null), each later one its
// log-probability given those before it (lps[i] is token i+1's), and
// text_offset is where each token's text starts in the prompt's decoded
// text, in characters.
func promptLogprobs(t *tokenizer.Tokenizer, ids []tokenizer.ID, lps []backends.Token) *textLogprobs {
	lp := &textLogprobs{
		Tokens:        make([]string, len(ids)),
		TokenLogprobs: make([]*float64, len(ids)),
		TopLogprobs:   make([]map[string]float64, len(ids)),
		TextOffset:    make([]int, len(ids)),
	}
	dec := t.NewDecoder()
	runes := 0
	for i, id := range ids {
		lp.Tokens[i] = t.Piece(id)
		lp.TextOffset[i] = runes
		runes += utf8.RuneCountInString(dec.Add(id))
		if i == 0 || i-1 >= len(lps) {
			continue
		}
		e := lps[i-1]
		v := jsonLogprob(e.Logprob)
		lp.TokenLogprobs[i] = &v
		top := make(map[string]float64, len(e.Top))
		for _, a := range e.Top {
			if p := t.Piece(a.ID); !hasKey(top, p) {
				top[p] = jsonLogprob(a.Logprob)
			}
		}
		lp.TopLogprobs[i] = top
	}
	return lp
}

// joinLogprobs appends the completion's logprobs to the prompt's, its
// text offsets moved past the echoed prompt of promptRunes characters.
func joinLogprobs(prompt, completion *textLogprobs, promptRunes int) *textLogprobs {
	prompt.Tokens = append(prompt.Tokens, completion.Tokens...)
	prompt.TokenLogprobs = append(prompt.TokenLogprobs, completion.TokenLogprobs...)
	prompt.TopLogprobs = append(prompt.TopLogprobs, completion.TopLogprobs...)
	for _, o := range completion.TextOffset {
		prompt.TextOffset = append(prompt.TextOffset, o+promptRunes)
	}
	return prompt
}

func hasKey(m map[string]float64, k string) bool { _, ok := m[k]; return ok }
