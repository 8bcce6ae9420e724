package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

func init() {
	register("bench", "measure prompt-processing and generation speed as llama-bench does", runBench)
}

// benchResult is one test of a bench run (as llama-bench's pp128 or tg64).
type benchResult struct {
	Test        string    `json:"test"`
	Prompt      int       `json:"n_prompt"`
	Gen         int       `json:"n_gen"`
	Threads     int       `json:"threads"`
	TokensPerS  float64   `json:"tokens_per_s"` // median of the runs
	Samples     []float64 `json:"samples_tokens_per_s"`
	ModelBytes  uint64    `json:"model_bytes"`
	ModelParams uint64    `json:"model_params"`
	// Depth is the tokens in the sequence before the timed ones.
	Depth int    `json:"n_depth,omitempty"`
	KV    string `json:"kv"`
	// KVBytesPerToken is the KV memory the sequence held at the end of
	// its last run, as the pool counts it, over its tokens.
	KVBytesPerToken int64 `json:"kv_bytes_per_token"`
}

func runBench(e *env, args []string) error {
	fs := newFlags("bench", "--model PATH [-p 128[,512]] [-n 64] [-d 0] [-t T[,T2]] [-r 3] [--kv f16|q8|q4|tiered] [--concurrency C] [--prefix-reuse] [--spec ngram|suffix|draft [--draft M.gguf] [--prompt TEXT] [--temp T --seed S]] [--json]")
	src := addModelFlags(fs)
	bf := addBackendFlags(fs, false)
	kf := addKVFlags(fs, defaultToolKV)
	depth := fs.Int("d", 0, "tokens in the sequence before each timed test (llama-bench's -d): prefilled untimed, so tg measures decode at that context")
	fs.IntVar(depth, "depth", 0, "same as -d")
	prompts := fs.String("p", "128", "prompt lengths to time, comma-separated; 0 skips prompt processing")
	gens := fs.String("n", "64", "generation lengths to time, comma-separated; 0 skips generation")
	threadList := fs.String("t", "", "thread counts, comma-separated (default: all cores)")
	fs.StringVar(threadList, "threads", "", "same as -t")
	reps := fs.Int("r", 3, "repetitions; the median is reported")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	concurrency := fs.Int("concurrency", 0, "also run C streams at once through the engine (aggregate and per-stream tokens/s, against 1 stream)")
	prefixReuse := fs.Bool("prefix-reuse", false, "also time the first token of each turn of a 6-turn chat, with prefix reuse and without")
	turnTokens := fs.Int("turn-tokens", 150, "with --prefix-reuse: new tokens per turn")
	trainWhile := fs.String("train-while", "", "with --concurrency: time the C streams also while a MicroLoRA trainer learns this preference set's pairs, in alternation (-r times each)")
	microCPU := fs.Float64("micro-lora-cpu", 0.25, "with --train-while: the trainer's share of one core")
	// With --spec, bench runs only an A/B of generations with drafts and
	// without (and with --concurrency C, also of C streams at once).
	sf := addSpecFlags(fs, "off")
	specPrompt := fs.String("prompt", "", "with --spec: the prompt of the A/B generations (text, tokenized as generate does; default: 16 random tokens per stream)")
	temp := fs.Float64("temp", 0, "with --spec: the sampling temperature of the A/B generations (0: greedy)")
	seed := fs.Int64("seed", 1, "with --spec and --temp: the seed of stream i is this + i")
	if _, err := fs.parse(args, e.stdout); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	pList, err := intList(*prompts)
	if err != nil {
		return fmt.Errorf("%w: -p: %v", errUsage, err)
	}
	nList, err := intList(*gens)
	if err != nil {
		return fmt.Errorf("%w: -n: %v", errUsage, err)
	}
	tList, err := intList(*threadList)
	if err != nil {
		return fmt.Errorf("%w: -t: %v", errUsage, err)
	}
	if len(tList) == 0 {
		tList = []int{0}
	}
	if *reps < 1 {
		return fmt.Errorf("%w: -r must be at least 1", errUsage)
	}
	if *depth < 0 {
		return fmt.Errorf("%w: -d must not be negative", errUsage)
	}
	if err := kf.check(); err != nil {
		return err
	}
	if err := sf.check(); err != nil {
		return err
	}
	if p := (backends.Params{Temperature: float32(*temp)}); p.Validate() != nil {
		return fmt.Errorf("%w: --temp %v", errUsage, *temp)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	m, err := src.load(ctx, models.LoadOptions{Logger: e.log})
	if err != nil {
		return err
	}
	defer m.Close()
	var size, params uint64
	for _, t := range m.File.Tensors {
		size += t.Size
		params += t.Elements()
	}
	var results []benchResult
	var conc []concurrencyResult
	var turns []prefixTurn
	var specs []specResult
	var prompt []tokenizer.ID
	if *specPrompt != "" {
		prompt = session.EncodePrompt(m.Tokenizer, *specPrompt)
	}
	specOn := sf.sourceName() != "off"
	// One KV pool serves every test: room for the longest prompt, the
	// concurrent streams and the whole chat.
	kvTokens := m.Config.ContextLength
	for _, p := range pList {
		kvTokens = max(kvTokens, *depth+p+1)
	}
	for _, n := range nList {
		kvTokens = max(kvTokens, *depth+n+1)
	}
	kvTokens = max(kvTokens, *concurrency*(16+benchConcurrencyGen(nList)+1), 6*(*turnTokens+16))
	for _, threads := range tList {
		o := backends.Options{Threads: threads, KVTokens: kvTokens}
		kf.apply(&o)
		b, err := bf.open(m, o)
		if err != nil {
			return err
		}
		var tests []benchResult
		for _, p := range pList {
			if p > 0 {
				tests = append(tests, benchResult{Test: fmt.Sprintf("pp%d", p), Prompt: p})
			}
		}
		for _, n := range nList {
			if n > 0 {
				tests = append(tests, benchResult{Test: fmt.Sprintf("tg%d", n), Gen: n})
			}
		}
		if specOn {
			// --spec runs its A/B only, which times the same generations
			// without drafts.
			tests = nil
		}
		for _, t := range tests {
			t.Threads, t.ModelBytes, t.ModelParams = b.Threads(), size, params
			t.Depth, t.KV = *depth, kf.precision.String()
			// One untimed warm-up run pages the weights in and warms caches, as
			// llama-bench does.
			for r := -1; r < *reps; r++ {
				if err := ctx.Err(); err != nil {
					b.Close()
					return err
				}
				tps, kvBytes, err := benchOnce(b, kf.precision, *depth, t.Prompt, t.Gen)
				if err != nil {
					b.Close()
					return err
				}
				t.KVBytesPerToken = kvBytes
				if r >= 0 {
					t.Samples = append(t.Samples, tps)
				}
			}
			t.TokensPerS = median(t.Samples)
			results = append(results, t)
			if !*asJSON {
				fmt.Fprintf(e.stderr, "%s: %d threads, %s: %.2f tokens/s\n", m.ID(), t.Threads, t.Test, t.TokensPerS)
			}
		}
		if *concurrency > 0 && !specOn {
			gen := benchConcurrencyGen(nList)
			var single float64
			for _, c := range []int{1, *concurrency} {
				r, err := benchConcurrency(ctx, b, kf.precision, c, 16, gen)
				if err != nil {
					b.Close()
					return err
				}
				r.Threads = b.Threads()
				if c == 1 {
					single = r.AggregateTPS
				}
				r.SingleStreamTS = single
				conc = append(conc, r)
				if *concurrency == 1 {
					break
				}
			}
		}
		if *trainWhile != "" && *concurrency > 0 {
			tw, err := benchTrainWhile(ctx, m, b, kf.precision, *trainWhile, *concurrency, benchConcurrencyGen(nList), *reps, *microCPU)
			if err != nil {
				b.Close()
				return err
			}
			printTrainWhile(e.stdout, tw)
		}
		if specOn {
			dm, db, err := sf.openDraft(e.log, m, b.Threads(), kvTokens)
			if err != nil {
				b.Close()
				return err
			}
			streams := []int{1}
			if *concurrency > 1 {
				streams = append(streams, *concurrency)
			}
			for _, n := range nList {
				for _, c := range streams {
					if n == 0 {
						continue
					}
					r := specResult{Test: fmt.Sprintf("tg%d", n), Spec: sf.sourceName(), Streams: c, Gen: n, Threads: b.Threads(), Temp: *temp}
					p := backends.Params{Temperature: float32(*temp), Seed: seed}
					r, err = benchSpecAB(ctx, b, kf.precision, sf.options(m, db), prompt, p, *reps, r)
					if err != nil {
						break
					}
					specs = append(specs, r)
					if !*asJSON {
						fmt.Fprintf(e.stderr, "%s: %s x%d spec %s: %.2f against %.2f tokens/s off (%.2fx), accept_rate %.2f\n",
							m.ID(), r.Test, c, r.Spec, r.TokensPerS, r.OffTokensPerS, r.Speedup, r.AcceptRate)
					}
				}
			}
			if db != nil {
				db.Close()
				dm.Close()
			}
			if err != nil {
				b.Close()
				return err
			}
		}
		if *prefixReuse {
			t, err := benchPrefixReuse(ctx, b, kf.precision, 6, *turnTokens, 16)
			if err != nil {
				b.Close()
				return err
			}
			turns = t
		}
		b.Close()
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if conc == nil && turns == nil && specs == nil {
			return enc.Encode(results)
		}
		return enc.Encode(map[string]any{"tests": results, "concurrency": conc, "prefix_reuse": turns, "speculative": specs})
	}
	if len(results) > 0 {
		// The pool's figure after the last test (the largest context,
		// when it is a tg test after -d).
		fmt.Fprintf(e.stdout, "kv_bytes_per_token = %d\n", results[len(results)-1].KVBytesPerToken)
	}
	fmt.Fprintf(e.stdout, "| model | size | params | threads | kv | test | t/s |\n|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		test := r.Test
		if r.Depth > 0 {
			test += fmt.Sprintf(" @ d%d", r.Depth)
		}
		fmt.Fprintf(e.stdout, "| %s | %s | %.2f M | %d | %s | %s | %.2f |\n", m.ID(), humanBytes(r.ModelBytes), float64(r.ModelParams)/1e6, r.Threads, r.KV, test, r.TokensPerS)
	}
	if len(conc) > 0 {
		fmt.Fprintf(e.stdout, "\n| threads | streams | n_gen | aggregate t/s | per-stream t/s | vs 1 stream |\n|---|---|---|---|---|---|\n")
		for _, r := range conc {
			fmt.Fprintf(e.stdout, "| %d | %d | %d | %.2f | %.2f | %.2fx |\n", r.Threads, r.Streams, r.Gen, r.AggregateTPS, r.PerStreamTPS, r.AggregateTPS/r.SingleStreamTS)
		}
	}
	if len(turns) > 0 {
		fmt.Fprintln(e.stdout)
		printPrefixTurns(e.stdout, turns)
	}
	if len(specs) > 0 {
		printSpecResults(e.stdout, specs)
	}
	return nil
}

// benchOnce times one test on a fresh sequence of KV precision kv, after
// depth random tokens prefilled untimed: a prompt of p random tokens in one
// batch, or n tokens decoded one at a time after a single start token. It
// also returns the KV bytes per token the sequence holds at the end.
func benchOnce(b backends.Backend, kv kvcache.Precision, depth, p, n int) (tps float64, kvBytes int64, err error) {
	vocab := b.Model().VocabSize
	seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: depth + max(p, n+1), KV: kv})
	if err != nil {
		return 0, 0, err
	}
	defer seq.Close()
	logits := make([]float32, vocab)
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(k int) []tokenizer.ID {
		tokens := make([]tokenizer.ID, k)
		for i := range tokens {
			tokens[i] = tokenizer.ID(rng.IntN(vocab))
		}
		return tokens
	}
	if depth > 0 {
		if err := b.Forward([]backends.Step{{Seq: seq, Tokens: random(depth)}}); err != nil {
			return 0, 0, err
		}
	}
	if p > 0 {
		tokens := random(p)
		start := time.Now()
		if err := b.Forward([]backends.Step{{Seq: seq, Tokens: tokens, Logits: logits}}); err != nil {
			return 0, 0, err
		}
		tps = float64(p) / time.Since(start).Seconds()
	} else {
		one := random(1)
		start := time.Now()
		for i := 0; i < n; i++ {
			if err := b.Forward([]backends.Step{{Seq: seq, Tokens: one, Logits: logits}}); err != nil {
				return 0, 0, err
			}
			one[0] = tokenizer.ID(argmax(logits))
		}
		tps = float64(n) / time.Since(start).Seconds()
	}
	return tps, seq.CacheBytes() / int64(max(seq.Len(), 1)), nil
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchConcurrencyGen is the tokens each concurrent stream generates: the
// first -n length, 64 without one.
func benchConcurrencyGen(nList []int) int {
	if len(nList) > 0 && nList[0] > 0 {
		return nList[0]
	}
	return 64
}
