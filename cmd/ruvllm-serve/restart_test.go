package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// firstToken streams a completion of prompt and returns the time to its
// first token and the prompt tokens the server found cached.
func firstToken(t *testing.T, base string, prompt []int) (time.Duration, int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"prompt": prompt, "max_tokens": 2, "temperature": 0, "stream": true,
		"stream_options": map[string]any{"include_usage": true},
	})
	start := time.Now()
	resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ttft time.Duration
	cached := -1
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Choices []struct{ Text string } `json:"choices"`
			Usage   *struct {
				Details *struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		if ttft == 0 && len(ev.Choices) > 0 {
			ttft = time.Since(start)
		}
		if ev.Usage != nil {
			cached = 0
			if ev.Usage.Details != nil {
				cached = ev.Usage.Details.Cached
			}
		}
	}
	if ttft == 0 || cached < 0 {
		t.Fatalf("no token or no usage in the stream (status %d)", resp.StatusCode)
	}
	return ttft, cached
}

// TestRestartTTFT measures what the store gives a chat that returns after a
// crash: a server with --store computes a chat's history (RUVLLM_RESTART_TOKENS,
// 1500 by default), is killed with SIGKILL once its blocks are written, and
// is started again; the next turn (the history and 30 new tokens) is sent to
// it and to a server with an empty store. It logs the cached share of the
// prompt, both times to first token and the restore rate, over
// RUVLLM_RESTART_RUNS runs (3 by default), alternating the two servers.
// It needs RUVLLM_RESTART_MODEL, a model file (docs/performance.md's figures: the
// tinyllama-1.1b shape in Q4_0), and runs the servers with RUVLLM_RESTART_ARGS
// (default "--threads 2 --ctx 2048 --parallel 1"); time it when nothing else
// runs on the machine.
func TestRestartTTFT(t *testing.T) {
	model := os.Getenv("RUVLLM_RESTART_MODEL")
	if model == "" {
		t.Skip("set RUVLLM_RESTART_MODEL to a model file to measure a restart")
	}
	history, runs := 1500, 3
	if v := os.Getenv("RUVLLM_RESTART_TOKENS"); v != "" {
		fmt.Sscan(v, &history)
	}
	if v := os.Getenv("RUVLLM_RESTART_RUNS"); v != "" {
		fmt.Sscan(v, &runs)
	}
	extra := strings.Fields(os.Getenv("RUVLLM_RESTART_ARGS"))
	if len(extra) == 0 {
		extra = []string{"--threads", "2", "--ctx", "2048", "--parallel", "1"}
	}
	args := append([]string{"--model", model}, extra...)
	r := rand.New(rand.NewPCG(31, 32))
	for run := range runs {
		prompt := make([]int, history+30)
		for i := range prompt {
			prompt[i] = 1 + r.IntN(30000)
		}
		store := t.TempDir()
		srv := startChild(t, append(args, "--store", store)...)
		firstToken(t, srv.base, prompt[:history])
		// The blocks are queued as they are committed; wait until the
		// store has written them, then crash.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			if metric(t, srv.base, "ruvllm_kv_store_written_pages_total") >= float64(history/32) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the store did not write the history's blocks")
			}
		}
		srv.kill()

		measure := func(restart bool) (time.Duration, int, float64) {
			dir := store
			if !restart {
				dir = t.TempDir()
			}
			s := startChild(t, append(args, "--store", dir)...)
			defer s.kill()
			ttft, cached := firstToken(t, s.base, prompt)
			sec := metric(t, s.base, "ruvllm_kv_restore_seconds_sum")
			return ttft, cached, sec
		}
		// Alternate which is timed first.
		var restored, empty time.Duration
		var cached int
		var restoreSec float64
		if run%2 == 0 {
			restored, cached, restoreSec = measure(true)
			empty, _, _ = measure(false)
		} else {
			empty, _, _ = measure(false)
			restored, cached, restoreSec = measure(true)
		}
		t.Logf("run %d: %d of %d prompt tokens cached (%.1f%%); TTFT %v restored against %v with an empty store (%.1f%%); restore took %.1f ms",
			run, cached, len(prompt), 100*float64(cached)/float64(len(prompt)), restored.Round(time.Millisecond),
			empty.Round(time.Millisecond), 100*restored.Seconds()/empty.Seconds(), 1000*restoreSec)
	}
}
