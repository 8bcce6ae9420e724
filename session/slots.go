package session

import (
	"context"
	"net/http"
	"time"

	"github.com/ruvllm/ruvllm/backends"
)

// SlotEngine is an engine whose slots clients may see and act on
// (llama-server's /slots); *backends.Engine is one.
type SlotEngine interface {
	Slots() []backends.SlotInfo
	SlotDo(ctx context.Context, id int, f func(seq backends.Sequence) error) error
}

// WithSlots calls f with m's engine, leasing it (loading a model on
// demand) until f returns. An engine without slots is a 501.
func (ms *Models) WithSlots(ctx context.Context, m *Model, f func(SlotEngine) error) error {
	release, err := ms.Hold(ctx, m)
	if err != nil {
		return err
	}
	defer release(nil)
	eng := m.Engine
	if re, ok := eng.(residentEngine); ok {
		eng = re.current()
	}
	se, ok := eng.(SlotEngine)
	if !ok {
		return &Error{Status: http.StatusNotImplemented, Type: TypeInvalidRequest, Code: CodeUnsupported,
			Message: "the engine of the model " + Quote(m.ID) + " has no slots to show"}
	}
	return f(se)
}

// Throughput is how a choice (or a whole generation) processed its prompt
// and generated, counted and timed as llama-server reports it ("timings").
// Times are measured: PromptTime from the submission of the prompt to the
// first token (it includes any wait for a free slot), GenerationTime from
// the first token to the end (or to now, for a choice still running).
type Throughput struct {
	// CachedTokens are the prompt tokens prefix reuse skipped, PromptTokens
	// those processed.
	CachedTokens, PromptTokens int
	PromptTime                 time.Duration
	Generated                  int
	GenerationTime             time.Duration
	// Drafted and Accepted are speculative decoding's tokens drafted and
	// generated of them (llama-server's draft_n, draft_n_accepted).
	Drafted, Accepted int
}

// ChoiceThroughput is choice i's throughput so far; now stands for the end
// of a choice still running.
func (g *Generation) ChoiceThroughput(i int, now time.Time) Throughput {
	c := g.choices[i]
	t := Throughput{Generated: c.tokens, Drafted: c.drafted, Accepted: c.accepted}
	if c.stream != nil {
		t.CachedTokens = c.stream.CachedTokens
	}
	t.PromptTokens = len(g.prompts[c.prompt].ids) - t.CachedTokens
	end := c.ended
	if end.IsZero() {
		end = now
	}
	first := c.firstToken
	if first.IsZero() {
		first = end
	}
	t.PromptTime = max(first.Sub(g.started), 0)
	if c.tokens > 0 {
		t.GenerationTime = max(end.Sub(first), 0)
	}
	return t
}

// Throughput is the whole generation's throughput so far: its prompts'
// tokens and every choice's, the prompt time to the first token of any
// choice and the generation time from there to the end.
func (g *Generation) Throughput(now time.Time) Throughput {
	u := g.Usage()
	t := Throughput{CachedTokens: u.CachedTokens, PromptTokens: u.PromptTokens - u.CachedTokens, Generated: u.CompletionTokens,
		Drafted: u.DraftedTokens, Accepted: u.AcceptedTokens}
	end := g.ended
	if end.IsZero() {
		end = now
	}
	first := g.firstToken
	if first.IsZero() {
		first = end
	}
	t.PromptTime = max(first.Sub(g.started), 0)
	if t.Generated > 0 {
		t.GenerationTime = max(end.Sub(first), 0)
	}
	return t
}

// TimingsJSON is t as llama-server's "timings" object: token counts,
// milliseconds, and the rates they make (0 when nothing was timed).
func (t Throughput) TimingsJSON() TimingsJSON {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	per := func(n int, d time.Duration) (perToken, perSecond float64) {
		if n > 0 {
			perToken = ms(d) / float64(n)
		}
		if d > 0 {
			perSecond = float64(n) / d.Seconds()
		}
		return
	}
	j := TimingsJSON{CacheN: t.CachedTokens, PromptN: t.PromptTokens, PromptMS: ms(t.PromptTime),
		PredictedN: t.Generated, PredictedMS: ms(t.GenerationTime), DraftN: t.Drafted, DraftNAccepted: t.Accepted}
	j.PromptPerTokenMS, j.PromptPerSecond = per(t.PromptTokens, t.PromptTime)
	j.PredictedPerTokenMS, j.PredictedPerSecond = per(t.Generated, t.GenerationTime)
	return j
}

// TimingsJSON is llama-server's "timings" object, which its clients (and
// its OpenAI-shaped responses) carry.
type TimingsJSON struct {
	CacheN              int     `json:"cache_n"`
	PromptN             int     `json:"prompt_n"`
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
	// DraftN and DraftNAccepted are speculative decoding's drafted
	// tokens and those accepted, as llama-server reports them; absent when
	// nothing was drafted.
	DraftN         int `json:"draft_n,omitempty"`
	DraftNAccepted int `json:"draft_n_accepted,omitempty"`
}

// ChoiceSlot is the engine slot choice i runs in; call it from the Sink,
// for a choice that has sent an event (the engine publishes the slot with
// the choice's first event).
func (g *Generation) ChoiceSlot(i int) int {
	c := g.choices[i]
	if c.stream == nil {
		return -1
	}
	return c.stream.Slot
}
