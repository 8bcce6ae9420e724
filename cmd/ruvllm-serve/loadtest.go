package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

func init() {
	register("loadtest", "chat sessions against a server or a load balancer: prefix-cache hits of the history, time to first token, failures", runLoadtest)
}

// Ways a chat tells a load balancer which session it is (--key).
const (
	keyHeader = "header" // an X-Session-Id header
	keyUser   = "user"   // OpenAI's "user" field
	keyPrompt = "prompt" // nothing: the balancer reads the first message
	keyMixed  = "mixed"  // the three, in turn, by session
)

// loadTest is one run of concurrent chat sessions against an
// OpenAI-compatible endpoint.
type loadTest struct {
	url, model, apiKey, system string
	sessions, turns, chats     int
	userWords, maxTokens       int
	firstWords                 int
	key                        string
	seed                       uint64
	timeout, think             time.Duration
	client                     *http.Client

	mu      sync.Mutex
	records []turnRecord
	out     io.Writer // JSON lines of the records as they end; nil: none
}

// turnRecord is one request of a chat as the client saw it.
type turnRecord struct {
	Session int    `json:"session"`
	Chat    string `json:"chat"` // the chat's session id
	Turn    int    `json:"turn"` // 1-based
	Attempt int    `json:"attempt"`
	Key     string `json:"key"` // how the chat named its session
	// Start and End are Unix times in nanoseconds.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// TTFTMs is the time to the first generated text, in milliseconds;
	// -1 when none came.
	TTFTMs           float64 `json:"ttft_ms"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	CachedTokens     int     `json:"cached_tokens"`
	// History is the prompt and completion tokens of the chat's previous
	// turn: the most a server that ran that turn can have cached of this
	// one's prompt. 0 on the first turn.
	History int `json:"history"`
	// Replica is the load balancer's X-Ruvllm-Replica response header.
	Replica string `json:"replica,omitempty"`
	Status  int    `json:"status"`
	Err     string `json:"error,omitempty"`
	// Hung is set when the request ran into --timeout.
	Hung bool `json:"hung,omitempty"`
}

func runLoadtest(e *env, args []string) error {
	fs := newFlags("loadtest", "[--url URL] [--sessions 8] [--turns 6] [--chats 1] [--user-words 150] [--first-words N] [--max-tokens 16] [--key mixed|header|user|prompt] [--records F.jsonl] [--failover F]")
	lt := &loadTest{}
	fs.StringVar(&lt.url, "url", "http://127.0.0.1:8080", "base URL of the server or load balancer (its /v1/chat/completions is called)")
	fs.StringVar(&lt.model, "model", "", `"model" of the requests (default: none, the server's default model)`)
	fs.StringVar(&lt.apiKey, "api-key", "", "send Authorization: Bearer KEY")
	fs.StringVar(&lt.system, "system", "You are a helpful assistant.", "system prompt every chat starts with (\"\": none)")
	fs.IntVar(&lt.sessions, "sessions", 8, "chat sessions at once")
	fs.IntVar(&lt.turns, "turns", 6, "turns of each chat: each sends the whole history and a new user message")
	fs.IntVar(&lt.chats, "chats", 1, "chats each session runs, one after another, each a new session")
	fs.IntVar(&lt.userWords, "user-words", 150, "words of each user message")
	fs.IntVar(&lt.firstWords, "first-words", 0, "words of each chat's first user message, as a document pasted before the questions (0: --user-words)")
	fs.IntVar(&lt.maxTokens, "max-tokens", 16, "max_tokens of each turn")
	fs.StringVar(&lt.key, "key", keyMixed, "how a chat names its session to a load balancer: header (X-Session-Id), user (the user field), prompt (nothing: the balancer reads the first message), or mixed (the three by turns of session)")
	fs.Uint64Var(&lt.seed, "seed", 1, "seed of the messages' words and the session ids")
	fs.DurationVar(&lt.timeout, "timeout", 2*time.Minute, "most time one request may take; one that takes longer is reported as hung")
	fs.DurationVar(&lt.think, "think", 0, "mean pause before each turn after a chat's first (exponentially distributed, as a user reads and types); 0: none, so that chats on one server tend to run in step")
	records := fs.String("records", "", "write every request as a JSON line to this file as it ends")
	failover := fs.String("failover", "", `file that holds "FROM TO [REPLICA]": a replica was killed between FROM and TO, Unix times in nanoseconds (read at the end); failures other than those of the requests in flight on it then are failover errors`)
	if _, err := fs.parse(args, e.stdout); err != nil {
		return err
	}
	switch {
	case lt.sessions < 1 || lt.turns < 1 || lt.chats < 1 || lt.userWords < 1 || lt.maxTokens < 1:
		return fmt.Errorf("%w: --sessions, --turns, --chats, --user-words and --max-tokens must be positive", errUsage)
	case lt.firstWords < 0:
		return fmt.Errorf("%w: --first-words must not be negative", errUsage)
	case !slices.Contains([]string{keyHeader, keyUser, keyPrompt, keyMixed}, lt.key):
		return fmt.Errorf("%w: --key %q: want header, user, prompt or mixed", errUsage, lt.key)
	case lt.timeout <= 0 || lt.think < 0:
		return fmt.Errorf("%w: --timeout must be positive and --think not negative", errUsage)
	}
	if *records != "" {
		f, err := os.Create(*records)
		if err != nil {
			return err
		}
		defer f.Close()
		lt.out = f
	}
	lt.client = &http.Client{}
	start := time.Now()
	lt.run(context.Background())
	wall := time.Since(start)
	sum := summarize(lt.records, lt.turns)
	fmt.Fprintln(e.stdout, sum.line(wall))
	if *failover != "" {
		b, err := os.ReadFile(*failover)
		if err != nil {
			return err
		}
		k, err := parseFailover(string(b))
		if err != nil {
			return fmt.Errorf("--failover %s: %w", *failover, err)
		}
		fo := failoverOf(lt.records, k)
		fmt.Fprintf(e.stdout, "after_kill=%d in_flight_failed=%d hung=%d failover_errors=%d\n", fo.after, fo.inFlightFailed, fo.hung, fo.errors)
	}
	return nil
}

// run runs every session to its end.
func (lt *loadTest) run(ctx context.Context) {
	var wg sync.WaitGroup
	for s := range lt.sessions {
		wg.Go(func() { lt.session(ctx, s) })
	}
	wg.Wait()
}

// session runs its chats one after another. A turn that fails is sent once
// more, as a client would (the balancer may have taken the failed replica
// out by then); a chat whose turn fails twice ends.
func (lt *loadTest) session(ctx context.Context, s int) {
	rng := rand.New(rand.NewPCG(lt.seed, uint64(s)))
	// The pauses have a generator of their own, so that the messages are
	// the same with and without them.
	pause := rand.New(rand.NewPCG(lt.seed, uint64(s)|1<<63))
	key := lt.key
	if key == keyMixed {
		key = []string{keyHeader, keyUser, keyPrompt}[s%3]
	}
	for range lt.chats {
		id := fmt.Sprintf("chat-%016x", rng.Uint64())
		var messages []map[string]string
		if lt.system != "" {
			messages = append(messages, map[string]string{"role": "system", "content": lt.system})
		}
		history := 0
	turns:
		for t := 1; t <= lt.turns; t++ {
			if t > 1 && lt.think > 0 {
				time.Sleep(time.Duration(pause.ExpFloat64() * float64(lt.think)))
			}
			n := lt.userWords
			if t == 1 && lt.firstWords > 0 {
				n = lt.firstWords
			}
			messages = append(messages, map[string]string{"role": "user", "content": userMessage(rng, t, n)})
			for attempt := 1; ; attempt++ {
				rec, text := lt.turn(ctx, messages, id, key)
				rec.Session, rec.Chat, rec.Turn, rec.Attempt, rec.Key, rec.History = s, id, t, attempt, key, history
				lt.add(rec)
				if rec.Err == "" {
					messages = append(messages, map[string]string{"role": "assistant", "content": text})
					history = rec.PromptTokens + rec.CompletionTokens
					break
				}
				if attempt == 2 {
					break turns
				}
			}
		}
	}
}

// words are what user messages are made of.
var words = strings.Fields(`the of and to in is was that for it with as his on be at by had are but from or
they you one all were her would there their will when who him been has more if no out so said what up its
about than into them can only other new some could time these two may then first any my now such like our
over man me even most made after also did many before must through back years where much your way well
down should because each just those people how too little state good very make world still own see men work
long get here between both life being under never day same another know while last might us great old year
off come since against go came right used take three garden river window letter morning question story
music water forest mountain market bridge lantern harbor orchard meadow kettle pebble ribbon candle`)

// userMessage is a turn's user message: its number and n words drawn from
// rng, so that no two chats share more than the system prompt.
func userMessage(rng *rand.Rand, turn, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Turn %d:", turn)
	for range n {
		b.WriteByte(' ')
		b.WriteString(words[rng.IntN(len(words))])
	}
	b.WriteByte('.')
	return b.String()
}

// add records a finished request and writes it out.
func (lt *loadTest) add(rec turnRecord) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.records = append(lt.records, rec)
	if lt.out != nil {
		b, _ := json.Marshal(rec)
		lt.out.Write(append(b, '\n'))
	}
}

// streamChunk is what the client reads of each streamed chunk.
type streamChunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// turn sends one streaming chat completion and reads it to its end.
func (lt *loadTest) turn(ctx context.Context, messages []map[string]string, id, key string) (rec turnRecord, text string) {
	rec.TTFTMs = -1
	body := map[string]any{
		"messages": messages, "max_tokens": lt.maxTokens, "temperature": 0,
		"stream": true, "stream_options": map[string]bool{"include_usage": true},
	}
	if lt.model != "" {
		body["model"] = lt.model
	}
	if key == keyUser {
		body["user"] = id
	}
	b, err := json.Marshal(body)
	if err != nil {
		rec.Err = err.Error()
		return rec, ""
	}
	ctx, cancel := context.WithTimeout(ctx, lt.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(lt.url, "/")+"/v1/chat/completions", bytes.NewReader(b))
	if err != nil {
		rec.Err = err.Error()
		return rec, ""
	}
	req.Header.Set("Content-Type", "application/json")
	if key == keyHeader {
		req.Header.Set("X-Session-Id", id)
	}
	if lt.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+lt.apiKey)
	}
	start := time.Now()
	rec.Start = start.UnixNano()
	defer func() {
		rec.End = time.Now().UnixNano()
		if rec.Err != "" && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			rec.Hung = true
		}
	}()
	resp, err := lt.client.Do(req)
	if err != nil {
		rec.Err = err.Error()
		return rec, ""
	}
	defer resp.Body.Close()
	rec.Status = resp.StatusCode
	rec.Replica = resp.Header.Get("X-Ruvllm-Replica")
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		rec.Err = fmt.Sprintf("status %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		return rec, ""
	}
	var out strings.Builder
	done := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var c streamChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			rec.Err = fmt.Sprintf("chunk %q: %v", data, err)
			return rec, ""
		}
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			if rec.TTFTMs < 0 {
				rec.TTFTMs = float64(time.Since(start).Microseconds()) / 1e3
			}
			out.WriteString(c.Choices[0].Delta.Content)
		}
		if u := c.Usage; u != nil {
			rec.PromptTokens, rec.CompletionTokens = u.PromptTokens, u.CompletionTokens
			if u.PromptTokensDetails != nil {
				rec.CachedTokens = u.PromptTokensDetails.CachedTokens
			}
		}
	}
	switch {
	case sc.Err() != nil:
		rec.Err = "stream: " + sc.Err().Error()
	case !done:
		rec.Err = "the stream ended without [DONE]"
	}
	return rec, out.String()
}

// loadSummary is what a run measured.
type loadSummary struct {
	requests, failed, hung int
	// later counts the successful turns after the first of their chat
	// whose previous turn succeeded; hit is the fraction of their history
	// tokens that came from the prefix cache.
	later            int
	cached, history  int
	hit              float64
	ttftP50, ttftP90 float64 // ms, of those turns
	firstTTFTP50     float64 // ms, of the first turns
	// Of those turns, stayed went to the replica of their chat's previous
	// turn and moved to another, with the p50 time to first token of each:
	// what a miss of the prefix cache costs, apart from how often a
	// balancer causes one.
	stayed, moved               int
	stayedTTFTP50, movedTTFTP50 float64
	replicas                    map[string]int
	chats, movedChats           int // chats, and those served by more than one replica
	promptTokensPerTurn         float64
	completionTokensTurn        float64
}

func summarize(recs []turnRecord, turns int) loadSummary {
	s := loadSummary{requests: len(recs), replicas: map[string]int{}}
	var later, first, stayed, moved []float64
	served := map[string]map[string]bool{}
	// The replica of each chat's successful turns.
	replicaOf := map[string]map[int]string{}
	for _, r := range recs {
		if r.Err == "" {
			if replicaOf[r.Chat] == nil {
				replicaOf[r.Chat] = map[int]string{}
			}
			replicaOf[r.Chat][r.Turn] = r.Replica
		}
	}
	var prompt, completion, ok int
	for _, r := range recs {
		if r.Err != "" {
			s.failed++
			if r.Hung {
				s.hung++
			}
			continue
		}
		ok++
		prompt += r.PromptTokens
		completion += r.CompletionTokens
		if r.Replica != "" {
			s.replicas[r.Replica]++
			if served[r.Chat] == nil {
				served[r.Chat] = map[string]bool{}
			}
			served[r.Chat][r.Replica] = true
		}
		switch {
		case r.Turn == 1:
			first = append(first, r.TTFTMs)
		case r.History > 0:
			s.later++
			s.cached += r.CachedTokens
			s.history += r.History
			later = append(later, r.TTFTMs)
			if prev := replicaOf[r.Chat][r.Turn-1]; prev != "" && r.Replica != "" {
				if prev == r.Replica {
					stayed = append(stayed, r.TTFTMs)
				} else {
					moved = append(moved, r.TTFTMs)
				}
			}
		}
	}
	if s.history > 0 {
		s.hit = float64(s.cached) / float64(s.history)
	}
	s.ttftP50, s.ttftP90 = percentile(later, 50), percentile(later, 90)
	s.firstTTFTP50 = percentile(first, 50)
	s.stayed, s.moved = len(stayed), len(moved)
	s.stayedTTFTP50, s.movedTTFTP50 = percentile(stayed, 50), percentile(moved, 50)
	for _, reps := range served {
		s.chats++
		if len(reps) > 1 {
			s.movedChats++
		}
	}
	if ok > 0 {
		s.promptTokensPerTurn = float64(prompt) / float64(ok)
		s.completionTokensTurn = float64(completion) / float64(ok)
	}
	return s
}

// percentile is the nearest-rank p-th percentile; 0 of nothing.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	i := int(float64(len(xs))*p/100+0.999999) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// line is the summary as KEY=VALUE pairs on one line.
func (s loadSummary) line(wall time.Duration) string {
	names := make([]string, 0, len(s.replicas))
	for n := range s.replicas {
		names = append(names, n)
	}
	sort.Strings(names)
	var reps []string
	for _, n := range names {
		reps = append(reps, n+":"+strconv.Itoa(s.replicas[n]))
	}
	if reps == nil {
		reps = []string{"-"}
	}
	return fmt.Sprintf("requests=%d failed=%d hung=%d later_turns=%d hit=%.4f cached=%d history=%d ttft_p50_ms=%.1f ttft_p90_ms=%.1f first_ttft_p50_ms=%.1f "+
		"stayed=%d stayed_ttft_p50_ms=%.1f moved=%d moved_ttft_p50_ms=%.1f prompt_tokens_per_turn=%.0f completion_tokens_per_turn=%.1f replicas=%s chats=%d moved_chats=%d wall_s=%.1f",
		s.requests, s.failed, s.hung, s.later, s.hit, s.cached, s.history, s.ttftP50, s.ttftP90, s.firstTTFTP50,
		s.stayed, s.stayedTTFTP50, s.moved, s.movedTTFTP50,
		s.promptTokensPerTurn, s.completionTokensTurn, strings.Join(reps, ","), s.chats, s.movedChats, wall.Seconds())
}

// kill is when a replica died: after from and before to (Unix ns), the
// times before the signal was sent and after the process was gone.
type kill struct {
	from, to int64
	replica  string // "" when unknown
}

// parseFailover reads "FROM TO [REPLICA]".
func parseFailover(s string) (kill, error) {
	f := strings.Fields(s)
	if len(f) < 2 || len(f) > 3 {
		return kill{}, fmt.Errorf("want FROM TO [REPLICA] (Unix nanoseconds), got %q", s)
	}
	var k kill
	var err error
	if k.from, err = strconv.ParseInt(f[0], 10, 64); err != nil {
		return kill{}, err
	}
	if k.to, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return kill{}, err
	}
	if k.to < k.from {
		return kill{}, fmt.Errorf("the kill ends (%d) before it starts (%d)", k.to, k.from)
	}
	if len(f) == 3 {
		k.replica = f[2]
	}
	return k, nil
}

// failoverCount is how the requests fared around a replica's death.
type failoverCount struct {
	after          int // requests started after the replica was gone
	inFlightFailed int // in flight on the killed replica, and failed: allowed
	hung           int // ran into the timeout: never allowed
	errors         int // every other failure
}

// failoverOf sorts the failures around the kill k. A request in flight
// then (started before the replica was gone, ended after the signal) that
// failed is allowed when it was on that replica or, having failed before
// the balancer named its replica, may have been; every other failure, and
// every request that hung, is an error.
func failoverOf(recs []turnRecord, k kill) failoverCount {
	var fc failoverCount
	for _, r := range recs {
		if r.Start >= k.to {
			fc.after++
		}
		switch {
		case r.Err == "":
		case r.Hung:
			fc.hung++
			fc.errors++
		case r.Start < k.to && r.End >= k.from && (r.Replica == "" || k.replica == "" || r.Replica == k.replica):
			fc.inFlightFailed++
		default:
			fc.errors++
		}
	}
	return fc
}
