package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/internal/testmodel"
)

// childArgsEnv, when set in the environment of the test binary, makes it
// run the command line it holds (a JSON array) instead of the tests: the
// crash test runs servers as child processes it can SIGKILL.
const childArgsEnv = "RUVLLM_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if v := os.Getenv(childArgsEnv); v != "" {
		var args []string
		if err := json.Unmarshal([]byte(v), &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(runMain(args, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// child is a server running as a child process.
type child struct {
	cmd  *exec.Cmd
	base string
}

// startChild runs serve with args in a child process on a free port and
// waits until it answers /health.
func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	args = append([]string{"serve", "--host", "127.0.0.1", "--port", "0"}, args...)
	js, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(js), "RUVLLM_LOG=info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd}
	// The log's first line with an address says where it listens.
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			var line struct{ Addr string }
			if !sent && json.Unmarshal(sc.Bytes(), &line) == nil && line.Addr != "" {
				addr <- line.Addr
				sent = true
			}
		}
	}()
	select {
	case c.base = <-addr:
	case <-time.After(20 * time.Second):
		c.kill()
		t.Fatal("the server did not listen")
	}
	waitHealthy(t, c.base)
	return c
}

func (c *child) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()
}

// completion is a greedy completion of a prompt of token ids: the tokens
// generated, their log-probabilities as the server wrote them, and the
// prompt tokens the server found cached.
type completion struct {
	tokens   []string
	logprobs []string
	cached   int
}

func complete(base string, prompt []int, maxTokens int) (completion, error) {
	body, _ := json.Marshal(map[string]any{
		"prompt": prompt, "max_tokens": maxTokens, "temperature": 0, "logprobs": 0,
	})
	resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return completion{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return completion{}, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var r struct {
		Choices []struct {
			Logprobs struct {
				Tokens        []string          `json:"tokens"`
				TokenLogprobs []json.RawMessage `json:"token_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage struct {
			Details *struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) != 1 {
		return completion{}, fmt.Errorf("%v: %s", err, b)
	}
	var c completion
	if r.Usage.Details != nil {
		c.cached = r.Usage.Details.Cached
	}
	c.tokens = r.Choices[0].Logprobs.Tokens
	for _, lp := range r.Choices[0].Logprobs.TokenLogprobs {
		c.logprobs = append(c.logprobs, string(lp))
	}
	return c, nil
}

// metric reads one series of a server's /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// dirBytes is the size of the files in dir.
func dirBytes(t *testing.T, dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// TestCrashSafety kills a server that spills its KV blocks to a store with
// SIGKILL at 50 random moments of heavy traffic (four clients sending
// prompts that share prefixes, so blocks are committed, spilled, evicted
// and restored all the time), damaging the store's files now and then, and
// restarts it each time. After each restart it sends prompts whose
// prefixes the earlier traffic stored, and checks that every restored
// prefix gives the same greedy tokens as a server without a store that
// computes them, that the store's files never exceed --store-max, and that
// pages that failed their checksums (the damaged ones) were dropped, not
// served: the outputs stay right while the failures are counted.
func TestCrashSafety(t *testing.T) {
	rounds := 50
	if testing.Short() {
		rounds = 5
	}
	model := testmodel.Synth(t, "tiny", "Q8_0")
	store := t.TempDir()
	const storeMax = 4 << 20 // about 110 pages of the tiny model's blocks
	common := []string{"--model", model, "--ctx", "512", "--parallel", "4", "--batch", "2048", "--threads", "1"}
	ref := startChild(t, append(common, "--kv", "f16")...)
	defer ref.kill()

	r := rand.New(rand.NewPCG(21, 22))
	// Prompts are one of a few prefixes of 2-5 blocks, then a suffix.
	prefixes := make([][]int, 6)
	for i := range prefixes {
		prefixes[i] = make([]int, 64+32*r.IntN(4))
		for j := range prefixes[i] {
			prefixes[i][j] = 1 + r.IntN(1000)
		}
	}
	promptOf := func(r *rand.Rand) []int {
		p := slices.Clone(prefixes[r.IntN(len(prefixes))])
		for range 1 + r.IntN(60) {
			p = append(p, 1+r.IntN(1000))
		}
		return p
	}
	restored, failures := 0.0, 0.0
	for round := range rounds {
		// Runs of five rounds of one precision: a run's first round finds
		// what the run before left of its own precision, if anything.
		kv := []string{"f16", "tiered"}[round/5%2]
		srv := startChild(t, append(common, "--store", store, "--store-max", "4MiB", "--kv", kv)...)
		if round > 0 {
			// Prefixes the traffic of earlier rounds stored come back.
			for i := range 3 {
				p := promptOf(rand.New(rand.NewPCG(uint64(round), uint64(i))))
				got, err := complete(srv.base, p, 6)
				if err != nil {
					srv.kill()
					t.Fatalf("round %d: %v", round, err)
				}
				refKV := startRefKV(t, ref, kv, common)
				want, err := complete(refKV.base, p, 6)
				if err != nil {
					t.Fatal(err)
				}
				// The restored keys and values are the computed ones, so
				// even the log-probabilities agree to the last digit.
				if !slices.Equal(got.tokens, want.tokens) || !slices.Equal(got.logprobs, want.logprobs) {
					srv.kill()
					t.Fatalf("round %d (%s): a prompt with %d tokens restored gives %q %v, recomputed %q %v",
						round, kv, got.cached, got.tokens, got.logprobs, want.tokens, want.logprobs)
				}
			}
			restored += metric(t, srv.base, "ruvllm_kv_store_hit_tokens_total")
			failures += metric(t, srv.base, "ruvllm_kv_store_checksum_failures_total")
		}
		// Heavy traffic until a random moment, then SIGKILL.
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rw := rand.New(rand.NewPCG(uint64(round), uint64(100+w)))
				for ctx.Err() == nil {
					_, _ = complete(srv.base, promptOf(rw), 1+rw.IntN(4))
				}
			}()
		}
		time.Sleep(time.Duration(50+r.IntN(400)) * time.Millisecond)
		srv.kill()
		cancel()
		wg.Wait()
		if n := dirBytes(t, store); n > storeMax {
			t.Fatalf("round %d: the store takes %d bytes, more than --store-max %d", round, n, storeMax)
		}
		if round%7 == 3 {
			damage(t, store, r)
		}
	}
	t.Logf("%d kills: %.0f prompt tokens restored after restarts, %.0f damaged pages dropped", rounds, restored, failures)
	if restored == 0 {
		t.Fatal("no prefix was ever restored from the store")
	}
	if failures == 0 && rounds >= 50 {
		t.Fatal("no damaged page was ever read: the test did not exercise the checksums")
	}
}

// refServers are reference servers without a store, by KV precision.
var refServers = map[string]*child{}

// startRefKV is a reference server of KV precision kv (f16 is ref).
func startRefKV(t *testing.T, ref *child, kv string, common []string) *child {
	if kv == "f16" {
		return ref
	}
	if c, ok := refServers[kv]; ok {
		return c
	}
	c := startChild(t, append(common, "--kv", kv)...)
	t.Cleanup(c.kill)
	refServers[kv] = c
	return c
}

// damage flips bytes in the pages of the store's segment files, as a
// failing disk would.
func damage(t *testing.T, dir string, r *rand.Rand) {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "seg-*.nf"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || len(b) < 64<<10 {
			continue
		}
		for range 20 {
			i := 64<<10 + r.IntN(len(b)-64<<10)
			b[i] ^= byte(1 + r.IntN(255))
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
