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

// benchFlags are bench's options, checked.
type benchFlags struct {
	src *modelSource
	bf  *backendFlags
	kf  *kvFlags
	sf  *specFlags
	// pList, nList and tList are the prompt lengths, generation lengths
	// and thread counts to time (tList [0]: all cores).
	pList, nList, tList []int
	depth, reps         int
	asJSON              bool
	cpuProfile          string
	concurrency         int
	prefixReuse         bool
	turnTokens          int
	trainWhile          string
	microCPU            float64
	// specPrompt, temp and seed shape --spec's A/B generations.
	specPrompt string
	temp       float64
	seed       int64
}

// benchReport is what a bench run measured, by kind of test.
type benchReport struct {
	results []benchResult
	conc    []concurrencyResult
	turns   []prefixTurn
	specs   []specResult
}

// runBench times the model as llama-bench does: read the options, load the
// model, run the tests at each thread count, print the report.
func runBench(e *env, args []string) error {
	f, err := parseBench(e, args)
	if err != nil {
		return err
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	m, err := f.src.load(ctx, models.LoadOptions{Logger: e.log})
	if err != nil {
		return err
	}
	defer m.Close()
	var rep benchReport
	kvTokens := f.kvTokens(m)
	for _, threads := range f.tList {
		if err := f.runThreads(ctx, e, m, threads, kvTokens, &rep); err != nil {
			return err
		}
	}
	return rep.print(e, m, f.asJSON)
}

// parseBench reads and checks bench's flags.
func parseBench(e *env, args []string) (*benchFlags, error) {
	f := &benchFlags{}
	fs := newFlags("bench", "--model PATH [-p 128[,512]] [-n 64] [-d 0] [-t T[,T2]] [-r 3] [--kv f16|q8|q4|tiered] [--concurrency C] [--prefix-reuse] [--spec ngram|suffix|draft [--draft M.gguf] [--prompt TEXT] [--temp T --seed S]] [--json]")
	f.src = addModelFlags(fs)
	f.bf = addBackendFlags(fs, false)
	f.kf = addKVFlags(fs, defaultToolKV)
	fs.IntVar(&f.depth, "d", 0, "tokens in the sequence before each timed test (llama-bench's -d): prefilled untimed, so tg measures decode at that context")
	fs.IntVar(&f.depth, "depth", 0, "same as -d")
	prompts := fs.String("p", "128", "prompt lengths to time, comma-separated; 0 skips prompt processing")
	gens := fs.String("n", "64", "generation lengths to time, comma-separated; 0 skips generation")
	threadList := fs.String("t", "", "thread counts, comma-separated (default: all cores)")
	fs.StringVar(threadList, "threads", "", "same as -t")
	fs.IntVar(&f.reps, "r", 3, "repetitions; the median is reported")
	fs.BoolVar(&f.asJSON, "json", false, "print the results as JSON")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	fs.IntVar(&f.concurrency, "concurrency", 0, "also run C streams at once through the engine (aggregate and per-stream tokens/s, against 1 stream)")
	fs.BoolVar(&f.prefixReuse, "prefix-reuse", false, "also time the first token of each turn of a 6-turn chat, with prefix reuse and without")
	fs.IntVar(&f.turnTokens, "turn-tokens", 150, "with --prefix-reuse: new tokens per turn")
	fs.StringVar(&f.trainWhile, "train-while", "", "with --concurrency: time the C streams also while a MicroLoRA trainer learns this preference set's pairs, in alternation (-r times each)")
	fs.Float64Var(&f.microCPU, "micro-lora-cpu", 0.25, "with --train-while: the trainer's share of one core")
	// With --spec, bench runs only an A/B of generations with drafts and
	// without (and with --concurrency C, also of C streams at once).
	f.sf = addSpecFlags(fs, "off")
	fs.StringVar(&f.specPrompt, "prompt", "", "with --spec: the prompt of the A/B generations (text, tokenized as generate does; default: 16 random tokens per stream)")
	fs.Float64Var(&f.temp, "temp", 0, "with --spec: the sampling temperature of the A/B generations (0: greedy)")
	fs.Int64Var(&f.seed, "seed", 1, "with --spec and --temp: the seed of stream i is this + i")
	if _, err := fs.parse(args, e.stdout); err != nil {
		return nil, err
	}
	var err error
	if f.pList, err = intList(*prompts); err != nil {
		return nil, fmt.Errorf("%w: -p: %v", errUsage, err)
	}
	if f.nList, err = intList(*gens); err != nil {
		return nil, fmt.Errorf("%w: -n: %v", errUsage, err)
	}
	if f.tList, err = intList(*threadList); err != nil {
		return nil, fmt.Errorf("%w: -t: %v", errUsage, err)
	}
	if len(f.tList) == 0 {
		f.tList = []int{0}
	}
	if f.reps < 1 {
		return nil, fmt.Errorf("%w: -r must be at least 1", errUsage)
	}
	if f.depth < 0 {
		return nil, fmt.Errorf("%w: -d must not be negative", errUsage)
	}
	if err := f.kf.check(); err != nil {
		return nil, err
	}
	if err := f.sf.check(); err != nil {
		return nil, err
	}
	if p := (backends.Params{Temperature: float32(f.temp)}); p.Validate() != nil {
		return nil, fmt.Errorf("%w: --temp %v", errUsage, f.temp)
	}
	return f, nil
}

// startCPUProfile profiles the process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	out, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); out.Close() }, nil
}

// specOn says bench runs --spec's A/B (and only it).
func (f *benchFlags) specOn() bool { return f.sf.sourceName() != "off" }

// kvTokens is the room of the one KV pool that serves every test: the
// longest prompt, the concurrent streams and the whole chat.
func (f *benchFlags) kvTokens(m *models.Model) int {
	kvTokens := m.Config.ContextLength
	for _, p := range f.pList {
		kvTokens = max(kvTokens, f.depth+p+1)
	}
	for _, n := range f.nList {
		kvTokens = max(kvTokens, f.depth+n+1)
	}
	return max(kvTokens, f.concurrency*(16+benchConcurrencyGen(f.nList)+1), 6*(f.turnTokens+16))
}

// runThreads runs every asked test on a backend of threads threads.
func (f *benchFlags) runThreads(ctx context.Context, e *env, m *models.Model, threads, kvTokens int, rep *benchReport) error {
	o := backends.Options{Threads: threads, KVTokens: kvTokens}
	f.kf.apply(&o)
	b, err := f.bf.open(m, o)
	if err != nil {
		return err
	}
	defer b.Close()
	if !f.specOn() {
		// --spec runs its A/B only, which times the same generations
		// without drafts.
		if err := f.timeTests(ctx, e, m, b, rep); err != nil {
			return err
		}
		if f.concurrency > 0 {
			if err := f.timeConcurrency(ctx, b, rep); err != nil {
				return err
			}
		}
	}
	if f.trainWhile != "" && f.concurrency > 0 {
		tw, err := benchTrainWhile(ctx, m, b, f.kf.precision, f.trainWhile, f.concurrency, benchConcurrencyGen(f.nList), f.reps, f.microCPU)
		if err != nil {
			return err
		}
		printTrainWhile(e.stdout, tw)
	}
	if f.specOn() {
		if err := f.timeSpec(ctx, e, m, b, kvTokens, rep); err != nil {
			return err
		}
	}
	if f.prefixReuse {
		t, err := benchPrefixReuse(ctx, b, f.kf.precision, 6, f.turnTokens, 16)
		if err != nil {
			return err
		}
		rep.turns = t
	}
	return nil
}

// timeTests times the pp and tg tests, the median of -r runs after an
// untimed warm-up run.
func (f *benchFlags) timeTests(ctx context.Context, e *env, m *models.Model, b backends.Backend, rep *benchReport) error {
	var size, params uint64
	for _, t := range m.File.Tensors {
		size += t.Size
		params += t.Elements()
	}
	var tests []benchResult
	for _, p := range f.pList {
		if p > 0 {
			tests = append(tests, benchResult{Test: fmt.Sprintf("pp%d", p), Prompt: p})
		}
	}
	for _, n := range f.nList {
		if n > 0 {
			tests = append(tests, benchResult{Test: fmt.Sprintf("tg%d", n), Gen: n})
		}
	}
	for _, t := range tests {
		t.Threads, t.ModelBytes, t.ModelParams = b.Threads(), size, params
		t.Depth, t.KV = f.depth, f.kf.precision.String()
		// One untimed warm-up run pages the weights in and warms caches, as
		// llama-bench does.
		for r := -1; r < f.reps; r++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			tps, kvBytes, err := benchOnce(b, f.kf.precision, f.depth, t.Prompt, t.Gen)
			if err != nil {
				return err
			}
			t.KVBytesPerToken = kvBytes
			if r >= 0 {
				t.Samples = append(t.Samples, tps)
			}
		}
		t.TokensPerS = median(t.Samples)
		rep.results = append(rep.results, t)
		if !f.asJSON {
			fmt.Fprintf(e.stderr, "%s: %d threads, %s: %.2f tokens/s\n", m.ID(), t.Threads, t.Test, t.TokensPerS)
		}
	}
	return nil
}

// timeConcurrency times one stream, then --concurrency streams at once.
func (f *benchFlags) timeConcurrency(ctx context.Context, b backends.Backend, rep *benchReport) error {
	gen := benchConcurrencyGen(f.nList)
	var single float64
	for _, c := range []int{1, f.concurrency} {
		r, err := benchConcurrency(ctx, b, f.kf.precision, c, 16, gen)
		if err != nil {
			return err
		}
		r.Threads = b.Threads()
		if c == 1 {
			single = r.AggregateTPS
		}
		r.SingleStreamTS = single
		rep.conc = append(rep.conc, r)
		if f.concurrency == 1 {
			break
		}
	}
	return nil
}

// timeSpec runs --spec's A/B of generations with drafts and without, for
// one stream and --concurrency streams.
func (f *benchFlags) timeSpec(ctx context.Context, e *env, m *models.Model, b backends.Backend, kvTokens int, rep *benchReport) error {
	dm, db, err := f.sf.openDraft(e.log, m, b.Threads(), kvTokens)
	if err != nil {
		return err
	}
	if db != nil {
		defer func() {
			db.Close()
			dm.Close()
		}()
	}
	var prompt []tokenizer.ID
	if f.specPrompt != "" {
		prompt = session.EncodePrompt(m.Tokenizer, f.specPrompt)
	}
	streams := []int{1}
	if f.concurrency > 1 {
		streams = append(streams, f.concurrency)
	}
	for _, n := range f.nList {
		for _, c := range streams {
			if n == 0 {
				continue
			}
			r := specResult{Test: fmt.Sprintf("tg%d", n), Spec: f.sf.sourceName(), Streams: c, Gen: n, Threads: b.Threads(), Temp: f.temp}
			seed := f.seed
			p := backends.Params{Temperature: float32(f.temp), Seed: &seed}
			if r, err = benchSpecAB(ctx, b, f.kf.precision, f.sf.options(m, db), prompt, p, f.reps, r); err != nil {
				return err
			}
			rep.specs = append(rep.specs, r)
			if !f.asJSON {
				fmt.Fprintf(e.stderr, "%s: %s x%d spec %s: %.2f against %.2f tokens/s off (%.2fx), accept_rate %.2f\n",
					m.ID(), r.Test, c, r.Spec, r.TokensPerS, r.OffTokensPerS, r.Speedup, r.AcceptRate)
			}
		}
	}
	return nil
}

// print writes the report: JSON, or llama-bench's table and the tables of
// the other tests.
func (rep *benchReport) print(e *env, m *models.Model, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if rep.conc == nil && rep.turns == nil && rep.specs == nil {
			return enc.Encode(rep.results)
		}
		return enc.Encode(map[string]any{"tests": rep.results, "concurrency": rep.conc, "prefix_reuse": rep.turns, "speculative": rep.specs})
	}
	if len(rep.results) > 0 {
		// The pool's figure after the last test (the largest context,
		// when it is a tg test after -d).
		fmt.Fprintf(e.stdout, "kv_bytes_per_token = %d\n", rep.results[len(rep.results)-1].KVBytesPerToken)
	}
	fmt.Fprintf(e.stdout, "| model | size | params | threads | kv | test | t/s |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rep.results {
		test := r.Test
		if r.Depth > 0 {
			test += fmt.Sprintf(" @ d%d", r.Depth)
		}
		fmt.Fprintf(e.stdout, "| %s | %s | %.2f M | %d | %s | %s | %.2f |\n", m.ID(), humanBytes(r.ModelBytes), float64(r.ModelParams)/1e6, r.Threads, r.KV, test, r.TokensPerS)
	}
	if len(rep.conc) > 0 {
		fmt.Fprintf(e.stdout, "\n| threads | streams | n_gen | aggregate t/s | per-stream t/s | vs 1 stream |\n|---|---|---|---|---|---|\n")
		for _, r := range rep.conc {
			fmt.Fprintf(e.stdout, "| %d | %d | %d | %.2f | %.2f | %.2fx |\n", r.Threads, r.Streams, r.Gen, r.AggregateTPS, r.PerStreamTPS, r.AggregateTPS/r.SingleStreamTS)
		}
	}
	if len(rep.turns) > 0 {
		fmt.Fprintln(e.stdout)
		printPrefixTurns(e.stdout, rep.turns)
	}
	if len(rep.specs) > 0 {
		printSpecResults(e.stdout, rep.specs)
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
