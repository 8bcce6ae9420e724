package native

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/sparse"
)

// sparsifiedModel is m's file sparsified (sparsify), run at level s.
func sparsifiedModel(m testModel, s float64) testModel {
	return testModel{name: m.name + "-sparsified", path: func(tb testing.TB) string { return sparsify(tb, m.path(tb)) },
		naiveTol: m.naiveTol, sparsity: s}
}

var (
	sparsifiedMu    sync.Mutex
	sparsifiedFiles = map[string]string{}
)

// sparsify writes the model at path sparsified, with thresholds calibrated
// on 512 pseudo-random tokens (uniform allocation, level 0.4), into the
// temp dir's cache of test models (testmodel.Synth's), once: a file of the
// same name is reused.
func sparsify(tb testing.TB, path string) string { return sparsifyAs(tb, path, false) }

// sparsifyAs is sparsify, with the residual stream first rotated by the
// PCA of its normalised vectors on the same tokens (sparse.Rotate) when
// rotate is set.
func sparsifyAs(tb testing.TB, path string, rotate bool) string {
	tb.Helper()
	sparsifiedMu.Lock()
	defer sparsifiedMu.Unlock()
	key, suffix := path, ".sparse-v1.gguf"
	if rotate {
		key, suffix = path+" rotated", ".rotated-sparse-v1.gguf"
	}
	if out, ok := sparsifiedFiles[key]; ok {
		return out
	}
	dir := filepath.Join(os.TempDir(), "ruvllm-testmodels-v1")
	out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), ".gguf")+suffix)
	if _, err := os.Stat(out); err == nil {
		sparsifiedFiles[key] = out
		return out
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	opt := backends.Options{Threads: 2, MaxBatch: 128, KVTokens: 128}
	b, f, cfg := openFile(tb, path, opt)
	// feed runs b over the calibration tokens, showing f their inputs.
	feed := func(b *Backend, f func(name string, x []float32)) {
		b.ObserveInputs(func(_ int, name string, x []float32) { f(name, x) })
		defer b.ObserveInputs(nil)
		r := rand.New(rand.NewPCG(7, 8))
		toks := make([]tokenizer.ID, 128)
		hidden := make([]float32, len(toks)*cfg.Dim)
		seq := newSeq(tb, b, backends.SequenceOptions{MaxLen: 128})
		defer seq.Close()
		for range 4 {
			for i := range toks {
				toks[i] = tokenizer.ID(r.IntN(cfg.VocabSize))
			}
			seq.Reset()
			forward(tb, b, backends.Step{Seq: seq, Tokens: toks, Outputs: backends.AllTokens, Hidden: hidden})
		}
	}
	if rotate {
		cov, err := sparse.NewCovariance(f, cfg)
		if err != nil {
			tb.Fatal(err)
		}
		feed(b, cov.Observe)
		q, _, err := cov.PCA()
		if err != nil {
			tb.Fatal(err)
		}
		rotated := fmt.Sprintf("%s.%d.rotated.tmp", out, os.Getpid())
		if err := sparse.Rotate(f, cfg, q, rotated, 2); err != nil {
			tb.Fatal(err)
		}
		defer os.Remove(rotated)
		b, f, cfg = openFile(tb, rotated, opt)
	}
	cal := sparse.NewCalibration()
	feed(b, cal.Observe)
	tables := map[string]sparse.Table{}
	for _, n := range cal.Names() {
		tables[n] = cal.Uniform(n)
	}
	// Written under this process's name and renamed, as testmodel.Synth does.
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	if _, err := sparse.Write(f, cfg, tables, sparse.Info{Sparsity: 0.4, Allocation: "uniform", Tokens: 512}, tmp, 2); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, out); err != nil {
		tb.Fatal(err)
	}
	sparsifiedFiles[key] = out
	return out
}

// decodeTol is how far a sparsified file's single tokens (the sparse
// mat-vec) may be from the dense kernels' logits, relative to their
// largest: float rounding in another order, which F16 keys and values
// round again (a key one ulp apart in float32 may round to halves 2^-11
// apart).
func decodeTol(ft string) float64 {
	if ft == "F16" {
		return 1e-3
	}
	return 1e-4
}

// openSparse opens the sparsified file at path on native-sparse.
func openSparse(tb testing.TB, path string, opt backends.Options) *Backend {
	tb.Helper()
	b, _, _ := openWith(tb, path, opt, NewSparse)
	return b
}

// TestSparsifiedFileRunsAsTheDenseOne checks that a sparsified file run
// whole (the native backend) gives the dense file's logits: bit for bit
// for a prompt (the dense kernels over the packed rows), within float
// rounding token by token (the sparse mat-vec skipping nothing).
func TestSparsifiedFileRunsAsTheDenseOne(t *testing.T) {
	for _, ft := range []string{"F32", "F16", "Q8_0", "Q4_0"} {
		t.Run(ft, func(t *testing.T) {
			path := testmodel.Synth(t, "tiny", ft)
			dense, _, _ := openFile(t, path, backends.Options{Threads: 2})
			sp, _, _ := openFile(t, sparsify(t, path), backends.Options{Threads: 2})
			if sp.Sparsity() != 0 || len(sp.w.sparseMatrices()) != 7*sp.cfg.Layers || len(sp.w.stacks()) != 2*sp.cfg.Layers {
				t.Fatalf("sparsity %g, %d channel-major matrices, %d stacks", sp.Sparsity(), len(sp.w.sparseMatrices()), len(sp.w.stacks()))
			}
			wantP, wantD := alone(t, dense, promptA, []tokenizer.ID{432, 291}, 32)
			gotP, gotD := alone(t, sp, promptA, []tokenizer.ID{432, 291}, 32)
			closeRel(t, "prompt", gotP, wantP, 0)
			closeRel(t, "decode", gotD, wantD, decodeTol(ft))
		})
	}
}

// TestSparseDecodeIsThePromptsModel checks that at a level the sparse
// mat-vec of single tokens computes the model the dense kernels compute on
// the thresholded inputs of a prompt, and that the level changes it.
func TestSparseDecodeIsThePromptsModel(t *testing.T) {
	for _, ft := range []string{"F16", "Q8_0", "Q4_0"} {
		t.Run(ft, func(t *testing.T) {
			path := sparsify(t, testmodel.Synth(t, "tiny", ft))
			whole, _, _ := openFile(t, path, backends.Options{Threads: 2})
			b := openSparse(t, path, backends.Options{Threads: 2, Sparsity: 0.5})
			if b.Sparsity() != 0.5 {
				t.Fatalf("Sparsity() = %g", b.Sparsity())
			}
			vocab := b.Model().VocabSize
			prompt, _ := alone(t, b, promptA, nil, 32)
			_, single := alone(t, b, promptA[:1], promptA[1:], 32)
			closeRel(t, "token by token", single, prompt[vocab:], decodeTol(ft))
			dense, _ := alone(t, whole, promptA, nil, 32)
			if d := maxRelDiff(prompt, dense); d < 1e-3 {
				t.Fatalf("sparsity 0.5 moved the logits by %g only", d)
			}
			calibrated := openSparse(t, path, backends.Options{Threads: 1})
			if calibrated.Sparsity() != 0.4 {
				t.Fatalf("the calibrated level is %g, want 0.4", calibrated.Sparsity())
			}
		})
	}
}

// TestStacksRunAsTheirParts runs sparsified files with each block's q, k,
// v and gate, up stacked (the default) and apart (NoRepack), biases
// (qwen2) and an adapter on every projection included: run whole, a prompt
// gives the same logits to the bit (the dense kernels' rows do not depend
// on their neighbours) and single tokens within float rounding (the
// stack's mat-vec adds its partial sums in other groups); at a level, the
// rounding may move an input across its threshold, so they are only
// close.
func TestStacksRunAsTheirParts(t *testing.T) {
	for _, m := range []testModel{
		synthModel("tiny", "Q8_0", 0),
		synthModel("tiny", "Q4_0", 0),
		synthModel("tiny", "F16", 0),
		sharedModel(0, "models", "mini", "mini-qwen2-Q8_0.gguf"),
	} {
		t.Run(m.name, func(t *testing.T) {
			path := sparsify(t, m.path(t))
			for _, level := range []float64{0, 0.5} {
				open := func(noRepack bool) *Backend {
					opt := backends.Options{Threads: 2, NoRepack: noRepack, Sparsity: level}
					if level == 0 {
						b, _, _ := openFile(t, path, opt)
						return b
					}
					return openSparse(t, path, opt)
				}
				stacked, apart := open(false), open(true)
				if n := len(stacked.w.stacks()); n != 2*stacked.cfg.Layers || len(apart.w.stacks()) != 0 {
					t.Fatalf("%d stacks by default, %d with NoRepack: want %d and none", n, len(apart.w.stacks()), 2*stacked.cfg.Layers)
				}
				a := randomAdapter(t, stacked.cfg, 4, 12)
				var logits [2][]float32
				for i, b := range []*Backend{stacked, apart} {
					s := newSeq(t, b, backends.SequenceOptions{MaxLen: 32})
					setAdapter(t, s, a, 1)
					vocab := b.Model().VocabSize
					logits[i] = make([]float32, (len(promptA)+2)*vocab)
					forward(t, b, backends.Step{Seq: s, Tokens: promptA, Outputs: backends.AllTokens, Logits: logits[i][:len(promptA)*vocab]})
					for k, tok := range []tokenizer.ID{432, 291} {
						at := (len(promptA) + k) * vocab
						forward(t, b, backends.Step{Seq: s, Tokens: []tokenizer.ID{tok}, Logits: logits[i][at : at+vocab]})
					}
				}
				vocab := stacked.Model().VocabSize
				split := len(promptA) * vocab
				if level == 0 {
					closeRel(t, "prompt", logits[0][:split], logits[1][:split], 0)
					closeRel(t, "decode", logits[0][split:], logits[1][split:], decodeTol(strings.TrimPrefix(m.name, "tiny-")))
				} else {
					closeRel(t, "at 0.5", logits[0], logits[1], 5e-2)
				}
			}
		})
	}
}

func TestSparseBackendRefuses(t *testing.T) {
	path := testmodel.Synth(t, "tiny", "Q8_0")
	m := testmodel.Load(t, path)
	if _, err := backends.Open(SparseBackend, m, backends.Options{}); err == nil || !strings.Contains(err.Error(), "not sparsified") {
		t.Errorf("native-sparse on a dense file: %v", err)
	}
	sm := testmodel.Load(t, sparsify(t, path))
	if _, err := backends.Open(SparseBackend, sm, backends.Options{Sparsity: 0.995}); err == nil {
		t.Error("a sparsity past the calibrated levels was accepted")
	}
	if _, err := backends.Open(SparseBackend, sm, backends.Options{Sparsity: 1.5}); err == nil {
		t.Error("a sparsity of 1.5 was accepted")
	}
}

// TestSparseAdaptersAndPrefixReuse runs a LoRA adapter on a sparsified
// file (whole: the dense file's logits with it) and checks that a
// sequence reusing another's cached prefix gets the logits of a fresh one
// at a level.
func TestSparseAdaptersAndPrefixReuse(t *testing.T) {
	path := testmodel.Synth(t, "tiny", "Q8_0")
	dense, _, cfg := openFile(t, path, backends.Options{Threads: 2})
	whole, _, _ := openFile(t, sparsify(t, path), backends.Options{Threads: 2})
	a := randomAdapter(t, cfg, 4, 11)
	var logits [2][]float32
	for i, b := range []*Backend{dense, whole} {
		s := newSeq(t, b, backends.SequenceOptions{MaxLen: 32})
		setAdapter(t, s, a, 1)
		logits[i] = make([]float32, b.Model().VocabSize)
		forward(t, b, backends.Step{Seq: s, Tokens: promptA, Logits: logits[i]})
	}
	// The last block of a step that wants the last token's logits runs one
	// row: the sparse mat-vec, equal to float rounding.
	closeRel(t, "adapter", logits[1], logits[0], 1e-4)

	b := openSparse(t, sparsify(t, path), backends.Options{Threads: 2, Sparsity: 0.5, KVTokens: 256})
	first := newSeq(t, b, backends.SequenceOptions{MaxLen: 128})
	long := append(append([]tokenizer.ID{}, promptA...), promptA...)
	long = append(long, promptA...)
	long = append(long, promptA...)
	long = append(long, promptA...) // 40 tokens: one whole KV block
	forward(t, b, backends.Step{Seq: first, Tokens: long})
	first.Close() // its full block stays cached
	reuse := newSeq(t, b, backends.SequenceOptions{MaxLen: 128})
	n := reuse.Reuse(append(long, 291), len(long))
	if n == 0 {
		t.Fatal("nothing of the prefix was reused")
	}
	got := make([]float32, b.Model().VocabSize)
	forward(t, b, backends.Step{Seq: reuse, Tokens: append(long[n:], 291), Logits: got})
	fresh := make([]float32, b.Model().VocabSize)
	forward(t, b, backends.Step{Seq: newSeq(t, b, backends.SequenceOptions{MaxLen: 128}), Tokens: append(long, 291), Logits: fresh})
	closeRel(t, "after prefix reuse", got, fresh, 0)
}

func TestSparseDecodeAllocatesNothing(t *testing.T) {
	path := sparsify(t, testmodel.Synth(t, "tiny", "Q4_0"))
	for _, threads := range []int{1, 2} {
		b := openSparse(t, path, backends.Options{Threads: threads, Sparsity: 0.5})
		vocab := b.Model().VocabSize
		s := newSeq(t, b, backends.SequenceOptions{MaxLen: 512})
		l := make([]float32, vocab)
		forward(t, b, backends.Step{Seq: s, Tokens: promptA, Logits: l})
		step := []backends.Step{{Seq: s, Tokens: []tokenizer.ID{1}, Logits: l}}
		allocs := testing.AllocsPerRun(20, func() {
			if err := b.Forward(step); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%d threads: a sparse decode step allocates %.1f times", threads, allocs)
		}
	}
}

// TestSparseKLOnReferencePrompts measures, on every llama.cpp reference
// run whose model has channel-major matrices once sparsified, the mean KL
// divergence of the next-token distributions at each sparsity level from
// the same file run whole (the dense model): llama.cpp's prompt in one
// batch, then its tokens one at a time, as TestReferenceParity replays
// them. The same is measured for the file sparsified with its residual
// stream rotated first (sparsify --rotate), against the same dense model,
// and for that file run whole (what quantizing the rotated matrices again
// costs). The divergence must grow with the level and stay finite; the
// figures are logged (go test -run KLOnReference -v) for docs/performance.md.
func TestSparseKLOnReferencePrompts(t *testing.T) {
	dir := shared.Path(t, "reference")
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.logits.json"))
	if err != nil || len(files) == 0 {
		t.Skipf("no reference runs in %s", dir)
	}
	root := filepath.Dir(dir)
	levels := []float64{0.25, 0.4, 0.5, 0.6}
	byModel := map[string][]string{}
	var names []string
	for _, file := range files {
		model := filepath.Base(filepath.Dir(file))
		if byModel[model] == nil {
			names = append(names, model)
		}
		byModel[model] = append(byModel[model], file)
	}
	for _, model := range names {
		t.Run(model, func(t *testing.T) {
			refs := make([]reference, len(byModel[model]))
			for i, file := range byModel[model] {
				raw, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(raw, &refs[i]); err != nil {
					t.Fatal(err)
				}
			}
			dense := modelPath(root, refs[0].ModelFile)
			path := sparsify(t, dense)
			whole, _, cfg := openFile(t, path, backends.Options{Threads: 2})
			if len(whole.w.sparseMatrices()) == 0 {
				t.Skipf("%s has no matrix of a format with a channel-major layout", model)
			}
			wants := make([][][]float32, len(refs))
			for r := range refs {
				wants[r] = replay(t, whole, &refs[r])
			}
			for _, rotate := range []bool{false, true} {
				name := "plain"
				if rotate {
					name = "rotated"
					if sparse.Rotatable(cfg.Architecture()) != nil {
						continue
					}
				}
				path := sparsifyAs(t, dense, rotate)
				kl := make([]float64, len(levels)+1) // [0]: the file run whole
				steps := 0
				for r := range refs {
					want := wants[r]
					steps += len(want)
					for k, s := range append([]float64{0}, levels...) {
						b := whole
						if s > 0 {
							b = openSparse(t, path, backends.Options{Threads: 2, Sparsity: s})
						} else if rotate {
							b, _, _ = openFile(t, path, backends.Options{Threads: 2})
						}
						got := replay(t, b, &refs[r])
						for i := range got {
							kl[k] += klDivergence(want[i], got[i])
						}
					}
				}
				line := fmt.Sprintf("  whole: %.3g", kl[0]/float64(steps))
				for k, s := range levels {
					k++
					kl[k] /= float64(steps)
					line += fmt.Sprintf("  %.2f: %.3g", s, kl[k])
					if math.IsNaN(kl[k]) || math.IsInf(kl[k], 0) || kl[k] <= 0 || (k > 1 && kl[k] < kl[k-1]*0.9) {
						t.Errorf("%s, sparsity %.2f: mean KL %g, after %g", name, s, kl[k], kl[k-1])
					}
				}
				t.Logf("%s %s: mean KL from dense over %d steps of %d prompts:%s", model, name, steps, len(refs), line)
			}
		})
	}
}

// replay runs a reference's prompt in one batch and its chosen tokens one
// at a time, returning the logits of every step.
func replay(t *testing.T, b *Backend, ref *reference) [][]float32 {
	s := newSeq(t, b, backends.SequenceOptions{MaxLen: len(ref.PromptTokens) + len(ref.Steps)})
	defer s.Close()
	toks := ref.PromptTokens
	out := make([][]float32, len(ref.Steps))
	for i, st := range ref.Steps {
		out[i] = make([]float32, b.Model().VocabSize)
		forward(t, b, backends.Step{Seq: s, Tokens: toks, Logits: out[i]})
		toks = []tokenizer.ID{tokenizer.ID(st.Chosen)}
	}
	return out
}

// klDivergence is KL(softmax(p) ‖ softmax(q)) of two rows of logits.
func klDivergence(p, q []float32) float64 {
	pp, qq := make([]float64, len(p)), make([]float64, len(q))
	softmax(p, pp)
	softmax(q, qq)
	var kl float64
	for i := range pp {
		if pp[i] > 0 {
			kl += pp[i] * (math.Log(pp[i]) - math.Log(max(qq[i], 1e-300)))
		}
	}
	return kl
}
