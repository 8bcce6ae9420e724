package openai

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// completions serves POST /v1/completions, OpenAI's legacy text completion.
func (a *API) completions(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	var cf completionFormat
	if cf.echo, _, err = f.Bool("echo"); err != nil {
		return err
	}
	// max_tokens 0 with echo only scores the prompt.
	tokenFields := []string{"max_tokens"}
	mt, hasMT, err := f.Integer("max_tokens")
	if err != nil {
		return err
	}
	scoreOnly := hasMT && mt == 0
	if scoreOnly {
		tokenFields = nil
	}
	g, err := parseGen(f, a.Models, tokenFields...)
	if err != nil {
		return err
	}
	req := &g.req
	req.IDPrefix, req.Route = "cmpl-", "/v1/completions"
	if err := ParseSampling(f, &req.Sampling); err != nil {
		return err
	}
	cf.logprobs = -1
	if v, ok, err := f.Integer("logprobs"); err != nil {
		return err
	} else if ok {
		if v < 0 || v > maxLegacyTopLPs {
			return session.Invalid("logprobs", session.CodeInvalidValue, "logprobs must be between 0 and %d, got %d", maxLegacyTopLPs, v)
		}
		cf.logprobs = int(v)
		req.Logprobs, req.TopLogprobs = true, int(v)
	}
	if cf.echo && cf.logprobs >= 0 {
		// The prompt's tokens are scored too, as OpenAI's legacy API and
		// vLLM do: what lm-evaluation-harness's loglikelihood requests.
		req.PromptLogprobs, req.ScoreOnly = true, scoreOnly
		if g.stream {
			return session.Unsupported("stream", "echo with logprobs is answered whole; set stream to false")
		}
	} else if scoreOnly {
		return session.Invalid("max_tokens", session.CodeInvalidValue, "max_tokens must be at least 1, got 0 (0 only scores the prompt, with echo and logprobs)")
	}
	if v, ok, err := f.Integer("best_of"); err != nil {
		return err
	} else if ok && v != int64(max(req.N, 1)) {
		return session.Unsupported("best_of", "best_of other than n is not supported")
	}
	if v, ok, err := f.Str("suffix"); err != nil {
		return err
	} else if ok && v != "" {
		return session.Unsupported("suffix", "suffix (insertion) is not supported")
	}
	if req.Prompts, err = ParsePrompts(f, "prompt"); err != nil {
		return err
	}
	if req.Output, err = parseOutput(f); err != nil {
		return err
	}
	if err := f.Unknown(); err != nil {
		return err
	}
	return a.generate(w, r, g, &cf)
}

// ParsePrompts reads a text completion's prompt (the field param): a
// string, a list of strings, a list of token ids, or a list of such lists.
func ParsePrompts(f *jsonhttp.Fields, param string) ([]session.Prompt, error) {
	v, ok := f.Raw(param)
	if !ok {
		return nil, session.Invalid(param, session.CodeMissing, "%s is required", param)
	}
	var text string
	if json.Unmarshal(v, &text) == nil {
		return []session.Prompt{{Text: text}}, nil
	}
	items, ok := jsonhttp.ParseArray(v)
	if !ok {
		return nil, f.TypeError(param, "a string, an array of strings, or an array of token ids")
	}
	if len(items) == 0 {
		return nil, session.Invalid(param, session.CodeInvalidValue, "%s must not be an empty array", param)
	}
	if ids, ok := tokenList(items); ok {
		return []session.Prompt{{Tokens: ids}}, nil
	}
	if len(items) > session.MaxPrompts {
		return nil, session.Invalid(param, session.CodeInvalidValue, "%s holds %d prompts; at most %d are allowed", param, len(items), session.MaxPrompts)
	}
	prompts := make([]session.Prompt, len(items))
	for i, it := range items {
		p := param + "[" + strconv.Itoa(i) + "]"
		if json.Unmarshal(it, &text) == nil {
			prompts[i] = session.Prompt{Text: text}
			continue
		}
		a, ok := jsonhttp.ParseArray(it)
		var ids []tokenizer.ID
		if ok {
			ids, ok = tokenList(a)
		}
		if !ok || len(ids) == 0 {
			return nil, session.Invalid(p, session.CodeInvalidType, "%s must be a string or a non-empty array of token ids", p)
		}
		prompts[i] = session.Prompt{Tokens: ids}
	}
	return prompts, nil
}

// tokenList reads a JSON array of token ids; an id that is no token is
// refused by the session, which knows the vocabulary.
func tokenList(items []json.RawMessage) ([]tokenizer.ID, bool) {
	ids := make([]tokenizer.ID, len(items))
	for i, it := range items {
		n, ok := jsonhttp.ParseInteger(it)
		if !ok {
			return nil, false
		}
		if n < -1<<31 || n >= 1<<31 {
			n = -1
		}
		ids[i] = tokenizer.ID(n)
	}
	return ids, true
}

// completionFormat shapes text completions.
type completionFormat struct {
	echo     bool
	logprobs int // alternatives per token; -1: no logprobs
}

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

// legacyLogprobs renders tokens in the legacy format, text_offset in
// characters of the choice's text.
func legacyLogprobs(text string, tokens []session.TokenLogprob, o *offsets) *TextLogprobs {
	lp := &TextLogprobs{
		Tokens:        make([]string, len(tokens)),
		TokenLogprobs: make([]*float64, len(tokens)),
		TopLogprobs:   make([]map[string]float64, len(tokens)),
		TextOffset:    make([]int, len(tokens)),
	}
	for i, e := range tokens {
		lp.Tokens[i] = e.Piece
		v := JSONLogprob(e.Logprob)
		lp.TokenLogprobs[i] = &v
		top := make(map[string]float64, len(e.Top))
		for _, alt := range e.Top {
			if _, dup := top[alt.Piece]; !dup {
				top[alt.Piece] = JSONLogprob(alt.Logprob)
			}
		}
		lp.TopLogprobs[i] = top
		lp.TextOffset[i] = o.at(text, e.Offset)
	}
	return lp
}

func (cf *completionFormat) response(h responseHead, gen *session.Generation, _ bool) any {
	u := usageOf(gen.Usage())
	resp := TextCompletion{ID: h.id, Object: "text_completion", Created: h.created, Model: h.model, SystemFingerprint: h.fingerprint, Usage: u}
	t := gen.Throughput(time.Now()).TimingsJSON()
	resp.Timings = &t
	resp.Verbose = verboseOf(h, gen)
	results := gen.Results()
	resp.Choices = make([]TextChoice, len(results))
	for _, res := range results {
		finish := FinishReason(res.Finish)
		tc := TextChoice{Index: res.Index, Text: res.Text, FinishReason: &finish}
		promptText, promptIDs := gen.Prompt(res.Prompt)
		if cf.echo {
			tc.Text = promptText + tc.Text
		}
		if cf.logprobs >= 0 {
			tc.Logprobs = legacyLogprobs(res.Text, res.Tokens, &offsets{})
			if cf.echo {
				tc.Logprobs = joinLogprobs(promptLogprobs(gen.Tokenizer(), promptIDs, res.PromptLogprobs), tc.Logprobs, utf8.RuneCountInString(promptText))
			}
		}
		resp.Choices[res.Index] = tc
	}
	return resp
}

func (cf *completionFormat) stream(st *jsonhttp.Stream, h responseHead, gen *session.Generation, opt streamOptions, _ *tokenizer.Tokenizer) streamWriter {
	ts := &textStream{chunks: newChunks[TextChoice](st, h, "text_completion", gen, opt), f: cf, gen: gen}
	ts.texts = make([]string, gen.Choices())
	ts.offsets = make([]offsets, gen.Choices())
	return ts
}

// textStream writes a text completion's events as chunks.
type textStream struct {
	chunks *chunks[TextChoice]
	f      *completionFormat
	gen    *session.Generation
	// texts are the choices' texts so far, and offsets walk them, for the
	// logprobs' text_offset.
	texts   []string
	offsets []offsets
}

// begin echoes the prompts when asked to.
func (ts *textStream) begin() error {
	if ts.f.echo {
		for i := range ts.gen.Choices() {
			if p, _ := ts.gen.Prompt(ts.gen.ChoicePrompt(i)); p != "" {
				if err := ts.chunks.send(TextChoice{Index: i, Text: p}); err != nil {
					return err
				}
			}
		}
	}
	return ts.chunks.st.Begin()
}

func (ts *textStream) Send(evs []session.Event) error {
	i := evs[0].Choice
	if evs[0].Kind == session.EventProgress {
		return ts.chunks.sendProgress(TextChoice{Index: i}, evs[0].Progress)
	}
	var text string
	var tokens []session.TokenLogprob
	var finish *session.Event
	for j := range evs {
		e := &evs[j]
		switch e.Kind {
		case session.EventText, session.EventReasoning:
			text += e.Text
		case session.EventFinish:
			finish = e
		}
		tokens = append(tokens, e.Tokens...)
	}
	if text != "" || len(tokens) > 0 {
		ts.texts[i] += text
		ch := TextChoice{Index: i, Text: text}
		if ts.f.logprobs >= 0 {
			ch.Logprobs = legacyLogprobs(ts.texts[i], tokens, &ts.offsets[i])
		}
		if err := ts.chunks.sendContent(ch); err != nil {
			return err
		}
	}
	if finish != nil {
		reason := FinishReason(finish.Finish)
		return ts.chunks.sendFinish(TextChoice{Index: i, FinishReason: &reason})
	}
	return nil
}

func (ts *textStream) end(u *Usage) error { return ts.chunks.end(u) }

// promptLogprobs renders a prompt's tokens and their logprobs in the legacy
// format: the first token has none (null), each later one its
// log-probability given those before it (lps[i] is token i+1's), and
// text_offset is where each token's text starts in the prompt's decoded
// text, in characters.
func promptLogprobs(t *tokenizer.Tokenizer, ids []tokenizer.ID, lps []backends.Token) *TextLogprobs {
	lp := &TextLogprobs{
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
		v := JSONLogprob(e.Logprob)
		lp.TokenLogprobs[i] = &v
		top := make(map[string]float64, len(e.Top))
		for _, alt := range e.Top {
			if p := t.Piece(alt.ID); !hasKey(top, p) {
				top[p] = JSONLogprob(alt.Logprob)
			}
		}
		lp.TopLogprobs[i] = top
	}
	return lp
}

// joinLogprobs appends the completion's logprobs to the prompt's, its
// text offsets moved past the echoed prompt of promptRunes characters.
func joinLogprobs(prompt, completion *TextLogprobs, promptRunes int) *TextLogprobs {
	prompt.Tokens = append(prompt.Tokens, completion.Tokens...)
	prompt.TokenLogprobs = append(prompt.TokenLogprobs, completion.TokenLogprobs...)
	prompt.TopLogprobs = append(prompt.TopLogprobs, completion.TopLogprobs...)
	for _, o := range completion.TextOffset {
		prompt.TextOffset = append(prompt.TextOffset, o+promptRunes)
	}
	return prompt
}

func hasKey(m map[string]float64, k string) bool { _, ok := m[k]; return ok }
