package llamacpp_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ruvllm/ruvllm/api"
	"github.com/ruvllm/ruvllm/backends"
)

// TestCompletionSpeculative: llama-server's speculative.n_max and this
// server's "speculative" reach the engine. On a server that drafts by
// prompt lookup, a greedy completion is the same text with drafts and
// without (n_max 0, or "off"); its timings report draft_n and
// draft_n_accepted as llama-server's do, and OpenAI's usage its
// speculative counts; bad values are refused naming the field.
func TestCompletionSpeculative(t *testing.T) {
	s := startServerEngine(t, api.Options{}, backends.EngineOptions{Spec: backends.SpecOptions{Source: backends.SpecNgram}})
	body := func(extra map[string]any) map[string]any {
		b := map[string]any{"prompt": prompt, "n_predict": 96, "temperature": 0}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	on := s.post(t, "/completion", body(map[string]any{"speculative.n_max": 6, "speculative.n_min": 1, "speculative.p_min": 0.5}))
	tm := obj(on["timings"])
	drafted, accepted := num(tm["draft_n"]), num(tm["draft_n_accepted"])
	if drafted == 0 || accepted == 0 || accepted > drafted {
		t.Errorf("timings %v: want drafts, some accepted", tm)
	}
	for _, extra := range []map[string]any{{"speculative.n_max": 0}, {"speculative": "off"}, {"speculative": false}} {
		off := s.post(t, "/completion", body(extra))
		if off["content"] != on["content"] {
			t.Errorf("%v: %q, with drafts %q", extra, off["content"], on["content"])
		}
		if tm := obj(off["timings"]); tm["draft_n"] != nil {
			t.Errorf("%v: timings %v report drafts", extra, tm)
		}
	}
	obj := s.post(t, "/completion", body(map[string]any{"speculative": map[string]any{"source": "suffix", "n_max": 3}}))
	if obj["content"] != on["content"] {
		t.Errorf("suffix: %q, want %q", obj["content"], on["content"])
	}
	cmpl := s.post(t, "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 96, "temperature": 0, "speculative": "ngram"})
	u := cmpl["usage"].(map[string]any)
	sp, ok := u["speculative"].(map[string]any)
	if !ok || num(sp["drafted_tokens"]) == 0 || num(sp["accepted_tokens"]) > num(sp["drafted_tokens"]) {
		t.Errorf("usage %v: want speculative counts", u)
	}
	for _, c := range []struct {
		path  string
		extra map[string]any
		want  string
	}{
		{"/completion", map[string]any{"speculative.n_max": -1}, "speculative.n_max"},
		{"/completion", map[string]any{"speculative.n_max": 1_000_000_000}, "speculative.n_max"},
		{"/completion", map[string]any{"speculative.n_min": 9, "speculative.n_max": 4}, "n_min"},
		{"/completion", map[string]any{"speculative.p_min": 2}, "speculative.p_min"},
		{"/v1/completions", map[string]any{"speculative": "eagle"}, "speculative"},
		{"/v1/completions", map[string]any{"speculative": map[string]any{"n_max": -3}}, "speculative.n_max"},
		{"/v1/completions", map[string]any{"speculative": map[string]any{"depth": 3}}, "speculative.depth"},
		{"/v1/completions", map[string]any{"speculative": "draft"}, "draft model"},
	} {
		b := body(c.extra)
		if c.path != "/completion" {
			b = map[string]any{"prompt": prompt, "max_tokens": 4}
			for k, v := range c.extra {
				b[k] = v
			}
		}
		code, resp, _ := s.do(t, http.MethodPost, c.path, b)
		if code != http.StatusBadRequest || !strings.Contains(string(resp), c.want) {
			t.Errorf("%s %v: %d %s, want 400 naming %s", c.path, c.extra, code, resp, c.want)
		}
	}
}

// TestCompletionSpeculativeGrammar: a grammar constrains the drafts'
// verification as it constrains plain decoding: with prompt lookup
// drafting from a prompt that spells what the grammar allows, the text is
// the one without drafts, follows the grammar, and some drafts were
// verified; several requests at once share the forward passes.
func TestCompletionSpeculativeGrammar(t *testing.T) {
	s := startServerEngine(t, api.Options{}, backends.EngineOptions{Spec: backends.SpecOptions{Source: backends.SpecNgram}})
	phrases := []string{"the cat sat on the mat. ", "a dog ran. "}
	grammar := `root ::= ("` + phrases[0] + `" | "` + phrases[1] + `")+`
	body := func(spec any) map[string]any {
		return map[string]any{"prompt": "the cat sat on the mat. a dog ran. the cat sat on the mat. a dog ran. the cat sat on the mat.",
			"n_predict": 64, "temperature": 0, "grammar": grammar, "speculative": spec}
	}
	off := s.post(t, "/completion", body("off"))
	text, _ := off["content"].(string)
	// The grammar's language, cut at n_predict: phrases, then the start
	// of one.
	rest := text
	for cut := true; cut; {
		cut = false
		for _, p := range phrases {
			if r, ok := strings.CutPrefix(rest, p); ok {
				rest, cut = r, true
			}
		}
	}
	if text == rest || !strings.HasPrefix(phrases[0], rest) && !strings.HasPrefix(phrases[1], rest) {
		t.Fatalf("without drafts %q does not follow the grammar", text)
	}
	specs := []any{"ngram", map[string]any{"source": "suffix", "n_max": 3}, map[string]any{"n_max": 6}}
	got := make([]map[string]any, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() {
			code, b, _ := s.do(t, http.MethodPost, "/completion", body(spec))
			if code != http.StatusOK || json.Unmarshal(b, &got[i]) != nil {
				t.Errorf("%v: %d %s", spec, code, b)
			}
		})
	}
	wg.Wait()
	for i, on := range got {
		if on == nil {
			continue
		}
		if on["content"] != text {
			t.Errorf("%v: %q, without drafts %q", specs[i], on["content"], text)
		}
		if tm := obj(on["timings"]); num(tm["draft_n"]) == 0 || num(tm["draft_n_accepted"]) == 0 {
			t.Errorf("%v: timings %v: no draft verified and kept", specs[i], tm)
		}
	}
}
