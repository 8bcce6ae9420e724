package llamacpp_test

import (
	"net/http"
	"strings"
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
