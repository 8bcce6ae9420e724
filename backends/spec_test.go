package backends_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// specRun is a parity reference's prompt: the model file it was made on,
// its LoRA adapter if any, and the prompt's tokens.
type specRun struct {
	model, adapter string
	scale          float32
	prompt         []tokenizer.ID
}

// specReferenceRuns are the prompts of every llama.cpp reference run: those
// of ../shared/reference (when present) and of the families' files in
// native/testdata/families, grouped by model file and adapter.
func specReferenceRuns(t *testing.T) map[string][]specRun {
	t.Helper()
	var files []string
	root := shared.Dir()
	if root != "" {
		f1, _ := filepath.Glob(filepath.Join(root, "reference", "*", "*.logits.json"))
		f2, _ := filepath.Glob(filepath.Join(root, "reference", "next", "*", "*.logits.json"))
		files = append(f1, f2...)
	}
	fam := filepath.Join("native", "testdata", "families")
	f3, _ := filepath.Glob(filepath.Join(fam, "*", "*.logits.json"))
	f4, _ := filepath.Glob(filepath.Join(fam, "lora", "*", "*.logits.json"))
	files = append(files, append(f3, f4...)...)
	if len(f3) == 0 {
		t.Fatalf("no reference runs in %s", fam)
	}
	groups := map[string][]specRun{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var ref struct {
			ModelFile    string         `json:"model_file"`
			LoRAFile     string         `json:"lora_file"`
			LoRAScale    float32        `json:"lora_scale"`
			PromptTokens []tokenizer.ID `json:"prompt_tokens"`
		}
		if err := json.Unmarshal(data, &ref); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var model string
		if strings.HasPrefix(file, fam) {
			model = filepath.Join(fam, ref.ModelFile)
		} else if p := filepath.Join(root, "models", "mini", ref.ModelFile); fileExists(p) {
			model = p
		} else {
			model = filepath.Join(root, "models", ref.ModelFile)
		}
		r := specRun{model: model, prompt: ref.PromptTokens, scale: ref.LoRAScale}
		if ref.LoRAFile != "" {
			r.adapter = filepath.Join(fam, ref.LoRAFile)
		}
		key := filepath.Base(model)
		if r.adapter != "" {
			key += "+lora"
		}
		groups[key] = append(groups[key], r)
	}
	return groups
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// specGenerate runs every prompt at once through a new engine with options
// o, greedy, gen tokens each (fewer where the context ends), and returns
// each prompt's tokens and the engine's stats. rounds > 1 runs the prompts
// again after the first round ends (the suffix source then knows their
// outputs), returning the last round's tokens and checking that every
// round gave the same.
func specGenerate(t *testing.T, b backends.Backend, o backends.EngineOptions, runs []specRun, a *lora.Adapter, gen, rounds int) ([][]tokenizer.ID, backends.EngineStats) {
	t.Helper()
	e := newEngine(t, b, o)
	// Closed before the next engine shares the backend's KV pool.
	defer e.Close()
	var out [][]tokenizer.ID
	for round := range rounds {
		got := make([][]tokenizer.ID, len(runs))
		var wg sync.WaitGroup
		for i, r := range runs {
			n := min(gen, e.MaxLen()-len(r.prompt))
			req := backends.Request{Prompt: r.prompt, MaxTokens: n, TopLogprobs: -1, Adapter: a, AdapterScale: r.scale}
			s := submit(t, e, req)
			wg.Go(func() {
				res, err := drain(s, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if res[0].err != nil {
					t.Errorf("prompt %d: %v", i, res[0].err)
				}
				got[i] = res[0].ids()
			})
		}
		wg.Wait()
		if round > 0 {
			for i := range got {
				if !slices.Equal(got[i], out[i]) {
					t.Errorf("round %d, prompt %d: %v, round 1 gave %v", round+1, i, got[i], out[i])
				}
			}
		}
		out = got
	}
	st := e.Stats()
	if st.SpecAccepted > st.SpecDrafted {
		t.Errorf("%d drafted tokens, %d accepted", st.SpecDrafted, st.SpecAccepted)
	}
	return out, st
}

// TestSpecGreedyExact is the exactness target of speculative decoding:
// greedy ids with every draft source equal the ids without drafts, on the
// prompt of every llama.cpp reference run (every family the native
// backend serves, in every file type there is, the LoRA adapters of the
// families' runs too), every prompt of a model at once so that sequences
// with and without drafts share the forward passes. The draft source runs
// another model of the same vocabulary; the suffix source runs the prompts
// twice, the second time after their outputs are in its cache. The drafts
// must have been verified both ways (some kept, some rejected), or the
// test proves nothing.
func TestSpecGreedyExact(t *testing.T) {
	groups := specReferenceRuns(t)
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// The draft model: another file of the same vocabulary (512).
	draftFile := testmodel.Synth(t, "tiny-llama3", "Q8_0")
	draft := testmodel.Backend(t, "native", testmodel.Load(t, draftFile), backends.Options{Threads: 1})
	const gen = 48
	var mu sync.Mutex
	total := map[backends.SpecSource][2]uint64{}
	for _, key := range keys {
		runs := groups[key]
		t.Run(key, func(t *testing.T) {
			m := testmodel.Load(t, runs[0].model)
			b := testmodel.Backend(t, "native", m, backends.Options{Threads: 1})
			var a *lora.Adapter
			if runs[0].adapter != "" {
				var err error
				if a, err = lora.Load(runs[0].adapter, m.Config, m.File); err != nil {
					t.Fatal(err)
				}
			}
			base := backends.EngineOptions{Parallel: 4, MaxLen: 512}
			want, _ := specGenerate(t, b, base, runs, a, gen, 1)
			for _, src := range []backends.SpecSource{backends.SpecNgram, backends.SpecSuffix, backends.SpecDraft} {
				o := base
				o.Spec = backends.SpecOptions{Source: src, Max: 6}
				if src == backends.SpecDraft {
					if b.Model().VocabSize != draft.Model().VocabSize {
						continue
					}
					o.Spec.Draft = draft
				}
				rounds := 1
				if src == backends.SpecSuffix {
					rounds = 2
				}
				got, st := specGenerate(t, b, o, runs, a, gen, rounds)
				for i := range runs {
					if !slices.Equal(got[i], want[i]) {
						t.Errorf("%v, prompt %d: %v\nwithout drafts %v", src, i, got[i], want[i])
					}
				}
				mu.Lock()
				c := total[src]
				total[src] = [2]uint64{c[0] + st.SpecDrafted, c[1] + st.SpecAccepted}
				mu.Unlock()
			}
		})
	}
	for src, c := range total {
		t.Logf("%v: %d drafted, %d accepted", src, c[0], c[1])
		if c[1] == 0 || c[1] == c[0] {
			t.Errorf("%v: %d drafted, %d accepted: the runs did not verify drafts both ways", src, c[0], c[1])
		}
	}
}

// TestSpecEngineOptions: bad speculative settings of an engine or a
// request are refused with errors that say what is wrong, never a panic.
func TestSpecEngineOptions(t *testing.T) {
	b := openTiny(t)
	other := testmodel.Backend(t, "native", testmodel.Load(t, testmodel.Synth(t, "tiny-llama3", "Q8_0")), backends.Options{Threads: 1})
	for _, c := range []struct {
		name string
		o    backends.SpecOptions
		want string
	}{
		{"max", backends.SpecOptions{Source: backends.SpecNgram, Max: 1000}, "max 1000"},
		{"min above max", backends.SpecOptions{Source: backends.SpecNgram, Max: 4, Min: 5}, "min 5"},
		{"draft without a model", backends.SpecOptions{Source: backends.SpecDraft}, "needs a draft model"},
		{"other vocabulary", backends.SpecOptions{Source: backends.SpecDraft, Draft: other}, "vocabulary of 512"},
		{"itself", backends.SpecOptions{Source: backends.SpecDraft, Draft: b}, "itself"},
		{"batch", backends.SpecOptions{Source: backends.SpecNgram, MaxBatchTokens: -2}, "batch limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := backends.NewEngine(b, backends.EngineOptions{Parallel: 1, Spec: c.o})
			if err == nil {
				e.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
	e := newEngine(t, b, backends.EngineOptions{Parallel: 1, Spec: backends.SpecOptions{Source: backends.SpecNgram}})
	for _, c := range []struct {
		name string
		p    backends.SpecParams
		want string
	}{
		{"negative", backends.SpecParams{Max: -1}, "n_max -1"},
		{"huge", backends.SpecParams{Max: 1_000_000_000}, "n_max 1000000000"},
		{"min", backends.SpecParams{Min: 70}, "n_min 70"},
		{"min above max", backends.SpecParams{Max: 2, Min: 3}, "above n_max"},
		{"draft", backends.SpecParams{Source: backends.SpecDraft}, "draft model"},
		{"source", backends.SpecParams{Source: 99}, "unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.Submit(context.Background(), backends.Request{Prompt: []tokenizer.ID{1, 2}, MaxTokens: 4, Speculative: c.p})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// TestParseSpecSource reads the names --spec and requests use.
func TestParseSpecSource(t *testing.T) {
	for _, c := range []struct {
		in   string
		want backends.SpecSource
		ok   bool
	}{
		{"off", backends.SpecOff, true}, {"none", backends.SpecOff, true}, {"ngram", backends.SpecNgram, true},
		{"Suffix", backends.SpecSuffix, true}, {"draft", backends.SpecDraft, true}, {"", backends.SpecDefault, true},
		{"eagle", backends.SpecDefault, false},
	} {
		t.Run(fmt.Sprintf("%q", c.in), func(t *testing.T) {
			got, err := backends.ParseSpecSource(c.in)
			if got != c.want || (err == nil) != c.ok {
				t.Errorf("%v, %v; want %v, ok %v", got, err, c.want, c.ok)
			}
			if c.ok && c.in != "" && c.in != "none" && !strings.EqualFold(got.String(), c.in) {
				t.Errorf("String() = %q", got.String())
			}
		})
	}
}

// TestSpecDecodeAllocatesNothing: the decode step with drafts allocates
// nothing, as the plain one: over a choice of n tokens the loop allocates
// only the blocks of 256 Tokens it streams (two here), with every draft
// source and without drafts. Allocations are counted process-wide, so the
// least of three runs is taken (other goroutines only add to it).
func TestSpecDecodeAllocatesNothing(t *testing.T) {
	for _, src := range []backends.SpecSource{backends.SpecOff, backends.SpecNgram, backends.SpecSuffix, backends.SpecDraft} {
		t.Run(src.String(), func(t *testing.T) {
			b := openTiny(t)
			o := backends.SpecOptions{Source: src}
			if src == backends.SpecDraft {
				// The same weights drafting: every kind of step is seen.
				o.Draft = openTiny(t)
			}
			e := newEngine(t, b, backends.EngineOptions{Parallel: 2, MaxLen: 512, Spec: o})
			const n = 400
			warm := submit(t, e, backends.Request{Prompt: []tokenizer.ID{1, 2, 3}, MaxTokens: n})
			collect(t, warm, 1)
			least := uint64(math.MaxUint64)
			for run := range 3 {
				s := submit(t, e, backends.Request{Prompt: []tokenizer.ID{1, 2, 3, tokenizer.ID(4 + run)}, MaxTokens: n})
				<-s.Events
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				count := 1
				for range s.Events {
					count++
				}
				runtime.ReadMemStats(&m1)
				if count != n+1 {
					t.Fatalf("%d events, want %d", count, n+1)
				}
				least = min(least, m1.Mallocs-m0.Mallocs)
			}
			st := e.Stats()
			if src != backends.SpecOff && st.SpecAccepted == 0 {
				t.Fatalf("nothing drafted was accepted (%d drafted): the test measures no verification", st.SpecDrafted)
			}
			t.Logf("%s: at least %d allocations for %d tokens, %d of %d drafts accepted", src, least, n, st.SpecAccepted, st.SpecDrafted)
			// Two blocks of Tokens, and room for one stray allocation.
			if least > 3 {
				t.Errorf("%d allocations for %d tokens", least, n)
			}
		})
	}
}

// TestSpecSampledDistribution: sampled requests keep the distribution they
// have without drafts. stories260K continues a prompt that quotes its own
// story and starts it again, so that prompt lookup drafts the second token
// after the prompt (from the quote); over thousands of seeded choices the
// pairs of the first two tokens follow the exact distribution (computed
// from the model's logits and the sampler's chain, penalties and bias
// included) by a chi-square test, with drafts as without. The drafts must
// have been both kept and rejected.
func TestSpecSampledDistribution(t *testing.T) {
	b := openStories(t)
	vocab := b.Model().VocabSize
	story := parseIDs(storiesGreedy)
	prompt := slices.Concat([]tokenizer.ID{1}, story, story[:6])
	logitsAfter := func(toks []tokenizer.ID) []float32 {
		seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: 128})
		if err != nil {
			t.Fatal(err)
		}
		defer seq.Close()
		l := make([]float32, vocab)
		if err := b.Forward([]backends.Step{{Seq: seq, Tokens: toks, Logits: l}}); err != nil {
			t.Fatal(err)
		}
		return l
	}
	// post is the distribution a sampler of p draws from after history.
	post := func(p backends.Params, l []float32, history ...tokenizer.ID) []float64 {
		s := backends.NewSampler(p, vocab)
		for _, h := range history {
			s.Accept(h)
		}
		out := make([]float64, vocab)
		for id := range out {
			lp, _ := s.PostLogprobs(l, tokenizer.ID(id), 0, nil)
			out[id] = math.Exp(float64(lp))
		}
		return out
	}
	const draws, perRequest = 4000, 100
	for _, c := range []struct {
		name string
		p    backends.Params
	}{
		{"T=2", backends.Params{Temperature: 2}},
		{"chain", backends.Params{Temperature: 2, TopK: 20, MinP: 0.001, RepeatPenalty: 1.2,
			PresencePenalty: 0.2, LogitBias: map[tokenizer.ID]float32{story[7]: -0.5}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The exact distribution of the first two tokens.
			p1 := post(c.p, logitsAfter(prompt))
			exact := map[[2]tokenizer.ID]float64{}
			for t1, q1 := range p1 {
				if q1 < 1e-3 {
					continue
				}
				p2 := post(c.p, logitsAfter(slices.Concat(prompt, []tokenizer.ID{tokenizer.ID(t1)})), tokenizer.ID(t1))
				for t2, q2 := range p2 {
					if q := q1 * q2; q*draws >= 5 {
						exact[[2]tokenizer.ID{tokenizer.ID(t1), tokenizer.ID(t2)}] = q
					}
				}
			}
			for _, src := range []backends.SpecSource{backends.SpecOff, backends.SpecNgram} {
				e := newEngine(t, b, backends.EngineOptions{Parallel: 8, MaxLen: 128, Spec: backends.SpecOptions{Source: src, Max: 4}})
				counts := map[[2]tokenizer.ID]int{}
				for r := range draws / perRequest {
					p := c.p
					p.Seed = seedOf(int64(1000 + r*perRequest))
					s := submit(t, e, backends.Request{Prompt: prompt, MaxTokens: 3, N: perRequest, Sampling: p, TopLogprobs: -1})
					for _, res := range collect(t, s, perRequest) {
						if res.err != nil || len(res.tokens) < 2 {
							t.Fatalf("choice: %v, %d tokens", res.err, len(res.tokens))
						}
						counts[[2]tokenizer.ID{res.tokens[0].ID, res.tokens[1].ID}]++
					}
				}
				// Chi-square over the pairs expected 5 times or more and
				// the rest pooled.
				var x, rest float64
				seen := 0
				for k, q := range exact {
					e := q * draws
					o := float64(counts[k])
					x += (o - e) * (o - e) / e
					rest += q
					seen += counts[k]
				}
				eo := (1 - rest) * draws
				oo := float64(draws - seen)
				if eo > 0 {
					x += (oo - eo) * (oo - eo) / eo
				}
				z := chiSquareZ(x, len(exact))
				st := e.Stats()
				t.Logf("%v: chi-square %.1f over %d cells (z %.2f); %d drafted, %d accepted", src, x, len(exact)+1, z, st.SpecDrafted, st.SpecAccepted)
				if z > 4 {
					t.Errorf("%v: the first two tokens do not follow the distribution: chi-square %.1f, %d degrees of freedom", src, x, len(exact))
				}
				if src != backends.SpecOff && (st.SpecAccepted == 0 || st.SpecAccepted == st.SpecDrafted) {
					t.Errorf("%v: %d drafted, %d accepted: drafts were not verified both ways", src, st.SpecDrafted, st.SpecAccepted)
				}
				e.Close()
			}
		})
	}
}

func seedOf(v int64) *int64 { return &v }

// chiSquareZ is the Wilson–Hilferty normal deviate of a chi-square
// statistic x with df degrees of freedom: above 4 has probability 3e-5.
func chiSquareZ(x float64, df int) float64 {
	k := float64(df)
	return (math.Cbrt(x/k) - (1 - 2/(9*k))) / math.Sqrt(2/(9*k))
}
