package native

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// openFile loads the model at path, returning the backend and its file.
func openFile(tb testing.TB, path string, opt backends.Options) (*Backend, *gguf.File, *models.Config) {
	tb.Helper()
	return openWith(tb, path, opt, New)
}

// openWith is openFile with the backend's constructor (New or NewSparse).
func openWith(tb testing.TB, path string, opt backends.Options, open func(*gguf.File, *models.Config, backends.Options) (*Backend, error)) (*Backend, *gguf.File, *models.Config) {
	tb.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	cfg, err := models.ReadConfig(f)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := open(f, cfg, opt)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	return b, f, cfg
}

func setAdapter(tb testing.TB, s backends.Sequence, a *lora.Adapter, scale float32) {
	tb.Helper()
	if err := s.(backends.AdapterSequence).SetAdapter(a, scale); err != nil {
		tb.Fatal(err)
	}
}

// randomAdapter makes a random adapter of rank r updating every linear
// layer and the output, strong enough to change the model's outputs.
func randomAdapter(tb testing.TB, cfg *models.Config, rank int, seed uint64) *lora.Adapter {
	tb.Helper()
	a, err := lora.Random(cfg, lora.RandomSpec{Rank: rank, Seed: seed, Amplitude: 0.1})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// maxRelDiff is max |x−y| relative to the largest |y|.
func maxRelDiff(x, y []float32) float64 {
	d, s := 0.0, 0.0
	for i := range x {
		d = max(d, math.Abs(float64(x[i]-y[i])))
		s = max(s, math.Abs(float64(y[i])))
	}
	return d / s
}

// TestAdapterMatchesMerged checks the run-time application of adapters of
// rank 1, 4 and 8, read from PEFT and GGUF files, against the model with
// the same adapter merged into its F32 weights: logits within 1e-5
// relative (about 4e-7 is measured) with an F32 KV cache — with F16 the
// rounding of keys and values to F16 alone makes 1e-4 — and the same greedy
// tokens with the default F16 cache.
func TestAdapterMatchesMerged(t *testing.T) {
	cases := []struct {
		model testModel
		rank  int
	}{
		{synthModel("tiny", "F32", 0), 1},
		{synthModel("tiny", "F32", 0), 4},
		{synthModel("tiny", "F32", 0), 8},
		{sharedModel(0, "models", "mini", "mini-qwen2-F32.gguf"), 4},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s rank %d", c.model.name, c.rank), func(t *testing.T) {
			b, f, cfg := openFile(t, c.model.path(t), backends.Options{Threads: 2})
			a := randomAdapter(t, cfg, c.rank, uint64(c.rank))
			dir := t.TempDir()
			peftDir, ggufPath, merged := filepath.Join(dir, "peft"), filepath.Join(dir, "a.gguf"), filepath.Join(dir, "merged.gguf")
			if err := a.WritePEFT(peftDir, cfg); err != nil {
				t.Fatal(err)
			}
			if err := a.WriteGGUF(ggufPath, kernels.F32); err != nil {
				t.Fatal(err)
			}
			if err := lora.Merge(f, a, merged, lora.MergeOptions{}); err != nil {
				t.Fatal(err)
			}
			m, _, _ := openFile(t, merged, backends.Options{Threads: 2})
			vocab := b.Model().VocabSize

			f32KV := backends.SequenceOptions{MaxLen: 64, KV: kvcache.F32}
			want := make([]float32, len(promptA)*vocab)
			forward(t, m, backends.Step{Seq: newSeq(t, m, f32KV), Tokens: promptA, Outputs: backends.AllTokens, Logits: want})
			wantGreedy := greedy(t, m, newSeq(t, m, backends.SequenceOptions{MaxLen: 64}), promptB, 24)

			plain := make([]float32, len(promptA)*vocab)
			forward(t, b, backends.Step{Seq: newSeq(t, b, f32KV), Tokens: promptA, Outputs: backends.AllTokens, Logits: plain})
			if d := maxRelDiff(plain, want); d < 0.05 {
				t.Fatalf("the adapter changes the logits by only %.3g: the test would not see it missing", d)
			}

			for _, path := range []string{peftDir, ggufPath} {
				loaded, err := lora.Load(path, cfg, f)
				if err != nil {
					t.Fatal(err)
				}
				s := newSeq(t, b, f32KV)
				setAdapter(t, s, loaded, 1)
				got := make([]float32, len(promptA)*vocab)
				forward(t, b, backends.Step{Seq: s, Tokens: promptA, Outputs: backends.AllTokens, Logits: got})
				closeRel(t, string(loaded.Format)+" logits", got, want, 1e-5)

				g := newSeq(t, b, backends.SequenceOptions{MaxLen: 64})
				setAdapter(t, g, loaded, 1)
				if got := greedy(t, b, g, promptB, 24); fmt.Sprint(got) != fmt.Sprint(wantGreedy) {
					t.Fatalf("%s greedy:\n got %v\nwant %v (merged)", loaded.Format, got, wantGreedy)
				}
			}
		})
	}
}

// TestAdapterBatchEqualsAlone runs sequences with adapter A, A again, A at
// half scale, B and none in one batch — prefill and decode — and checks
// that each gets exactly what it gets alone, also when the batch is split
// over passes.
func TestAdapterBatchEqualsAlone(t *testing.T) {
	path := testmodel.Synth(t, "tiny", "F32")
	for _, maxBatch := range []int{0, 5} {
		t.Run(fmt.Sprintf("max batch %d", maxBatch), func(t *testing.T) {
			b, _, cfg := openFile(t, path, backends.Options{Threads: 2, MaxBatch: maxBatch})
			vocab := b.Model().VocabSize
			aA, aB := randomAdapter(t, cfg, 4, 1), randomAdapter(t, cfg, 8, 2)
			type spec struct {
				a      *lora.Adapter
				scale  float32
				prompt []tokenizer.ID
			}
			specs := []spec{
				{aA, 1, promptA},
				{aA, 1, promptB},
				{aA, 0.5, promptA},
				{aB, 1, promptA},
				{nil, 0, promptA},
			}
			next := []tokenizer.ID{432, 17, 300}
			// Alone.
			wantPre := make([][]float32, len(specs))
			wantDec := make([][]float32, len(specs))
			for i, sp := range specs {
				s := newSeq(t, b, backends.SequenceOptions{MaxLen: 32})
				setAdapter(t, s, sp.a, sp.scale)
				wantPre[i] = make([]float32, len(sp.prompt)*vocab)
				forward(t, b, backends.Step{Seq: s, Tokens: sp.prompt, Outputs: backends.AllTokens, Logits: wantPre[i]})
				for _, tok := range next {
					l := make([]float32, vocab)
					forward(t, b, backends.Step{Seq: s, Tokens: []tokenizer.ID{tok}, Logits: l})
					wantDec[i] = append(wantDec[i], l...)
				}
			}
			// Together.
			seqs := make([]backends.Sequence, len(specs))
			steps := make([]backends.Step, len(specs))
			for i, sp := range specs {
				seqs[i] = newSeq(t, b, backends.SequenceOptions{MaxLen: 32})
				setAdapter(t, seqs[i], sp.a, sp.scale)
				steps[i] = backends.Step{Seq: seqs[i], Tokens: sp.prompt, Outputs: backends.AllTokens, Logits: make([]float32, len(sp.prompt)*vocab)}
			}
			forward(t, b, steps...)
			for i := range specs {
				closeRel(t, fmt.Sprintf("sequence %d prefill", i), steps[i].Logits, wantPre[i], 0)
			}
			for k, tok := range next {
				for i := range specs {
					steps[i] = backends.Step{Seq: seqs[i], Tokens: []tokenizer.ID{tok}, Logits: make([]float32, vocab)}
				}
				forward(t, b, steps...)
				for i := range specs {
					closeRel(t, fmt.Sprintf("sequence %d decode %d", i, k), steps[i].Logits, wantDec[i][k*vocab:(k+1)*vocab], 0)
				}
			}
			// The adapters made a difference: A differs from none, B from A.
			if d := maxRelDiff(wantPre[0], wantPre[4]); d < 0.05 {
				t.Errorf("adapter A moves the logits by %.3g only", d)
			}
			if d := maxRelDiff(wantPre[3], wantPre[0]); d < 0.05 {
				t.Errorf("adapters A and B differ by %.3g only", d)
			}
		})
	}
}

func TestSetAdapter(t *testing.T) {
	b, _, cfg := openFile(t, testmodel.Synth(t, "tiny", "F32"), backends.Options{Threads: 1})
	vocab := b.Model().VocabSize
	a := randomAdapter(t, cfg, 2, 3)
	s := newSeq(t, b, backends.SequenceOptions{MaxLen: 32})
	as := s.(backends.AdapterSequence)
	forward(t, b, backends.Step{Seq: s, Tokens: promptB})
	if got, _ := as.Adapter(); got != nil {
		t.Fatal("a new sequence has an adapter")
	}
	setAdapter(t, s, nil, 1)
	if s.Len() != len(promptB) {
		t.Fatal("setting no adapter on a sequence without one dropped its tokens")
	}
	setAdapter(t, s, a, 1)
	if s.Len() != 0 {
		t.Fatalf("changing the adapter kept %d tokens computed without it", s.Len())
	}
	forward(t, b, backends.Step{Seq: s, Tokens: promptB})
	setAdapter(t, s, a, 1)
	if got, sc := as.Adapter(); got != a || sc != 1 || s.Len() != len(promptB) {
		t.Fatalf("setting the same adapter again: adapter %p scale %v, %d tokens", got, sc, s.Len())
	}
	setAdapter(t, s, a, 0.5)
	if s.Len() != 0 {
		t.Fatal("changing the scale kept the tokens")
	}

	other := *cfg
	other.FFN *= 2
	misfit, _ := lora.Random(&other, lora.RandomSpec{Rank: 2, Targets: []string{"blk.0.ffn_up.weight"}})
	embd, _ := lora.New("embd", "llama", 1, false, "", []*lora.Target{mustTarget(t, models.TensorName(models.TokenEmbd, 0), cfg.Dim, cfg.VocabSize)})
	for name, bad := range map[string]*lora.Adapter{"shape": misfit, "token_embd": embd} {
		if err := as.SetAdapter(bad, 1); !errors.Is(err, lora.ErrInvalid) {
			t.Errorf("%s: SetAdapter error %v, want ErrInvalid", name, err)
		}
	}
	if err := as.SetAdapter(a, float32(math.NaN())); err == nil {
		t.Error("a NaN scale was accepted")
	}
	if got, sc := as.Adapter(); got != a || sc != 0.5 {
		t.Fatal("a failed SetAdapter changed the adapter")
	}

	// Scale 0 is the base model, bit for bit.
	zero, plain := make([]float32, vocab), make([]float32, vocab)
	setAdapter(t, s, a, 0)
	forward(t, b, backends.Step{Seq: s, Tokens: promptA, Logits: zero})
	forward(t, b, backends.Step{Seq: newSeq(t, b, backends.SequenceOptions{MaxLen: 32}), Tokens: promptA, Logits: plain})
	closeRel(t, "scale 0", zero, plain, 0)

	s.Close()
	if err := as.SetAdapter(a, 1); !errors.Is(err, backends.ErrClosed) {
		t.Fatalf("SetAdapter after Close: %v", err)
	}
}

func mustTarget(t *testing.T, name string, in, out int) *lora.Target {
	t.Helper()
	tg, err := lora.NewTarget(name, in, out, 1, make([]float32, in), make([]float32, out), 1)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestAdapterDecodeAllocatesNothing keeps the hot path allocation-free
// with adapters.
func TestAdapterDecodeAllocatesNothing(t *testing.T) {
	b, _, cfg := openFile(t, testmodel.Synth(t, "tiny", "Q4_K_M"), backends.Options{Threads: 2})
	vocab := b.Model().VocabSize
	a1, a2 := randomAdapter(t, cfg, 4, 1), randomAdapter(t, cfg, 8, 2)
	s1 := newSeq(t, b, backends.SequenceOptions{MaxLen: 256})
	s2 := newSeq(t, b, backends.SequenceOptions{MaxLen: 256})
	s3 := newSeq(t, b, backends.SequenceOptions{MaxLen: 256})
	setAdapter(t, s1, a1, 1)
	setAdapter(t, s2, a2, 1)
	l1, l2, l3 := make([]float32, vocab), make([]float32, vocab), make([]float32, vocab)
	steps := []backends.Step{{Seq: s1, Tokens: []tokenizer.ID{1}, Logits: l1}, {Seq: s2, Tokens: []tokenizer.ID{2}, Logits: l2}, {Seq: s3, Tokens: []tokenizer.ID{3}, Logits: l3}}
	forward(t, b, steps...)
	allocs := testing.AllocsPerRun(20, func() {
		if err := b.Forward(steps); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a decode step with adapters allocates %.1f times", allocs)
	}
}
