package native

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// testModel is a model file the structural tests run on.
type testModel struct {
	name string
	path func(testing.TB) string // the file, or the test skips
	// naiveTol is how far from the float64 implementation the model's
	// outputs may be, relative to their largest magnitude: float32 sums for
	// F32 weights; for quantized weights, activations are re-quantized at
	// every layer, so a one-ulp difference can move a value by a
	// quantization step.
	naiveTol float64
	// sparsity, for a sparsified file (sparsifiedModel), is the level it
	// runs at on native-sparse; 0 runs it on native.
	sparsity float64
}

func synthModel(shape, ft string, naiveTol float64) testModel {
	return testModel{name: shape + "-" + ft, path: func(tb testing.TB) string { return testmodel.Synth(tb, shape, ft) }, naiveTol: naiveTol}
}

func sharedModel(naiveTol float64, parts ...string) testModel {
	return testModel{name: parts[len(parts)-1], path: func(tb testing.TB) string { return shared.Path(tb, parts...) }, naiveTol: naiveTol}
}

func (m testModel) open(tb testing.TB, opt backends.Options) *Backend {
	tb.Helper()
	if m.sparsity > 0 {
		opt.Sparsity = m.sparsity
		return openSparse(tb, m.path(tb), opt)
	}
	b, _, _ := openFile(tb, m.path(tb), opt)
	return b
}

// testModels are the models the structural tests run on: synthesized
// llamas in F32 and in llama-quantize's Q4_K_M mix, which need nothing
// beside the repository; and, from ../shared, a trained F32 llama, a
// Q4_K_M llama of llama.cpp's quantizer, and qwen2 with biases and NeoX
// RoPE.
var testModels = []testModel{
	synthModel("tiny", "F32", 1e-4),
	synthModel("tiny", "Q4_K_M", 2e-2),
	sharedModel(1e-4, "models", "stories260K.gguf"),
	sharedModel(2e-2, "models", "mini", "mini-llama-Q4_K_M.gguf"),
	sharedModel(2e-2, "models", "mini", "mini-qwen2-Q8_0.gguf"),
	// Sparsified files: run whole (native) they are the dense model; run
	// sparsely they are another model, which the naive one is not.
	sparsifiedModel(synthModel("tiny", "Q8_0", 2e-2), 0),
	sparsifiedModel(synthModel("tiny", "Q4_0", 2e-2), 0.5),
	sparsifiedModel(sharedModel(1e-4, "models", "stories260K.gguf"), 0),
	sparsifiedModel(sharedModel(2e-2, "models", "mini", "mini-qwen2-Q8_0.gguf"), 0.4),
}

func newSeq(t testing.TB, b *Backend, opts backends.SequenceOptions) backends.Sequence {
	t.Helper()
	s, err := b.NewSequence(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func forward(t testing.TB, b *Backend, steps ...backends.Step) {
	t.Helper()
	if err := b.Forward(steps); err != nil {
		t.Fatal(err)
	}
}

// closeRel fails unless got and want agree within tol relative to the
// largest magnitude of want.
func closeRel(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); d > tol*max(scale, 1e-6) || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s[%d] = %g, want %g (tolerance %g of %g)", what, i, got[i], want[i], tol, scale)
		}
	}
}

var promptA = []tokenizer.ID{1, 403, 407, 261, 378, 432, 383, 286}
var promptB = []tokenizer.ID{1, 291, 376}

// alone runs prompt in one step with every token's logits, then decodes
// the tokens of next one by one, on a fresh sequence of maxLen tokens.
func alone(t *testing.T, b *Backend, prompt, next []tokenizer.ID, maxLen int) (prefill, decode []float32) {
	vocab := b.Model().VocabSize
	s := newSeq(t, b, backends.SequenceOptions{MaxLen: maxLen})
	prefill = make([]float32, len(prompt)*vocab)
	forward(t, b, backends.Step{Seq: s, Tokens: prompt, Outputs: backends.AllTokens, Logits: prefill})
	for _, tok := range next {
		l := make([]float32, vocab)
		forward(t, b, backends.Step{Seq: s, Tokens: []tokenizer.ID{tok}, Logits: l})
		decode = append(decode, l...)
	}
	return prefill, decode
}

// TestBatchedEqualsAlone forwards two sequences of different lengths in one
// call, then a decode token of one beside a prefill chunk of the other, and
// compares every logit with each sequence run alone.
func TestBatchedEqualsAlone(t *testing.T) {
	for _, m := range testModels {
		t.Run(m.name, func(t *testing.T) {
			b := m.open(t, backends.Options{Threads: 2})
			vocab := b.Model().VocabSize
			wantA, wantADecode := alone(t, b, promptA, []tokenizer.ID{432}, 32)
			wantB, _ := alone(t, b, append(append([]tokenizer.ID{}, promptB...), promptA[1:6]...), nil, 32)

			a := newSeq(t, b, backends.SequenceOptions{MaxLen: 32})
			bs := newSeq(t, b, backends.SequenceOptions{MaxLen: 32})
			gotA := make([]float32, len(promptA)*vocab)
			gotB := make([]float32, len(promptB)*vocab)
			forward(t, b,
				backends.Step{Seq: a, Tokens: promptA, Outputs: backends.AllTokens, Logits: gotA},
				backends.Step{Seq: bs, Tokens: promptB, Outputs: backends.AllTokens, Logits: gotB})
			// A sparse run takes the sparse mat-vec for each of a few
			// tokens and packs the rows back for more (sparse.MatMul), so
			// a prompt alone and in a batch of twice the tokens may sum in
			// other orders: the rounding steps TestPrefillEqualsTokenByToken
			// describes.
			tol := 1e-4
			if m.sparsity > 0 {
				tol = 5e-2
			}
			closeRel(t, "A prefill", gotA, wantA, tol)
			closeRel(t, "B prefill", gotB, wantB[:len(gotB)], tol)

			// Mixed: A decodes one token while B prefills five more.
			decA := make([]float32, vocab)
			restB := make([]float32, 5*vocab)
			forward(t, b,
				backends.Step{Seq: bs, Tokens: promptA[1:6], Outputs: backends.AllTokens, Logits: restB},
				backends.Step{Seq: a, Tokens: []tokenizer.ID{432}, Logits: decA})
			closeRel(t, "A decode", decA, wantADecode, tol)
			closeRel(t, "B second chunk", restB, wantB[len(gotB):], tol)
			if a.Len() != len(promptA)+1 || bs.Len() != len(promptB)+5 {
				t.Fatalf("lengths %d and %d after the calls", a.Len(), bs.Len())
			}
		})
	}
}

// TestPrefillEqualsTokenByToken checks that a prompt in one batch, in
// micro-batches of 3, and one token per call give the same logits.
func TestPrefillEqualsTokenByToken(t *testing.T) {
	for _, m := range testModels {
		t.Run(m.name, func(t *testing.T) {
			b := m.open(t, backends.Options{Threads: 2})
			small := m.open(t, backends.Options{Threads: 1, MaxBatch: 3})
			vocab := b.Model().VocabSize
			batched, _ := alone(t, b, promptA, nil, 32)
			split, _ := alone(t, small, promptA, nil, 32)
			closeRel(t, "micro-batches of 3", split, batched, 1e-4)
			_, single := alone(t, b, promptA[:1], promptA[1:], 32)
			// single holds the logits after tokens 1..n-1, batched after
			// 0..n-1. A sparse run's single tokens take the sparse mat-vec,
			// which sums in another order than the dense kernels of a
			// prompt: a rounding difference can carry an input across its
			// threshold or an activation across a rounding edge of its Q8_0
			// quant, and a random-weight model carries such steps on (the
			// mini qwen2 at 0.4 measured 2.2%).
			tol := 1e-4
			if m.sparsity > 0 {
				tol = 5e-2
			}
			closeRel(t, "token by token", single, batched[vocab:], tol)
		})
	}
}

// TestAgainstNaive compares logits and hidden states of every prompt
// token with the plain float64 implementation in naive_test.go.
func TestAgainstNaive(t *testing.T) {
	for _, m := range testModels {
		if m.sparsity > 0 {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			b := m.open(t, backends.Options{Threads: 2})
			info := b.Model()
			for _, kv := range []kvcache.Precision{kvcache.F16, kvcache.F32} {
				s := newSeq(t, b, backends.SequenceOptions{MaxLen: 16, KV: kv})
				logits := make([]float32, len(promptA)*info.VocabSize)
				hidden := make([]float32, len(promptA)*info.Dim)
				forward(t, b, backends.Step{Seq: s, Tokens: promptA, Outputs: backends.AllTokens, Logits: logits, Hidden: hidden})
				nv := newNaive(b, true, kv == kvcache.F16)
				for i, tok := range promptA {
					wl, wh := nv.step(int(tok))
					closeRel(t, kv.String()+" logits", logits[i*info.VocabSize:(i+1)*info.VocabSize], wl, m.naiveTol)
					closeRel(t, kv.String()+" hidden", hidden[i*info.Dim:(i+1)*info.Dim], wh, m.naiveTol)
				}
			}
		})
	}
}

// TestOutputsSelection checks LastToken against AllTokens, hidden-only
// steps, and a step with no outputs at all.
func TestOutputsSelection(t *testing.T) {
	b := openSynth(t, backends.Options{Threads: 2}, "tiny", "F32")
	info := b.Model()
	all := make([]float32, len(promptA)*info.VocabSize)
	allH := make([]float32, len(promptA)*info.Dim)
	forward(t, b, backends.Step{Seq: newSeq(t, b, backends.SequenceOptions{}), Tokens: promptA,
		Outputs: backends.AllTokens, Logits: all, Hidden: allH})

	last := make([]float32, info.VocabSize)
	lastH := make([]float32, info.Dim)
	forward(t, b, backends.Step{Seq: newSeq(t, b, backends.SequenceOptions{}), Tokens: promptA, Logits: last, Hidden: lastH})
	n := len(promptA)
	closeRel(t, "last logits", last, all[(n-1)*info.VocabSize:], 0)
	closeRel(t, "last hidden", lastH, allH[(n-1)*info.Dim:], 0)

	onlyH := make([]float32, len(promptA)*info.Dim)
	quiet := newSeq(t, b, backends.SequenceOptions{})
	forward(t, b,
		backends.Step{Seq: newSeq(t, b, backends.SequenceOptions{}), Tokens: promptA, Outputs: backends.AllTokens, Hidden: onlyH},
		backends.Step{Seq: quiet, Tokens: promptA})
	closeRel(t, "hidden without logits", onlyH, allH, 0)
	if quiet.Len() != n {
		t.Fatalf("a step without outputs left Len %d, want %d", quiet.Len(), n)
	}
}

// TestTruncateReusesPrefix checks that truncating and re-feeding a
// different suffix gives the logits of a fresh sequence.
func TestTruncateReusesPrefix(t *testing.T) {
	b := openSynth(t, backends.Options{Threads: 2}, "tiny", "Q8_0")
	vocab := b.Model().VocabSize
	s := newSeq(t, b, backends.SequenceOptions{MaxLen: 32})
	forward(t, b, backends.Step{Seq: s, Tokens: promptA})
	if err := s.Truncate(3); err != nil {
		t.Fatal(err)
	}
	if got := s.Tokens(); len(got) != 3 || got[2] != promptA[2] {
		t.Fatalf("Tokens() after Truncate(3) = %v", got)
	}
	suffix := []tokenizer.ID{291, 376, 400}
	got := make([]float32, vocab)
	forward(t, b, backends.Step{Seq: s, Tokens: suffix, Logits: got})

	want := make([]float32, vocab)
	fresh := append(append([]tokenizer.ID{}, promptA[:3]...), suffix...)
	forward(t, b, backends.Step{Seq: newSeq(t, b, backends.SequenceOptions{MaxLen: 32}), Tokens: fresh, Logits: want})
	closeRel(t, "after truncate", got, want, 0)

	s.Reset()
	if s.Len() != 0 || len(s.Tokens()) != 0 {
		t.Fatalf("Reset left %d tokens", s.Len())
	}
	if err := s.Truncate(1); err == nil {
		t.Fatal("Truncate past Len succeeded")
	}
}

// TestForwardRejects checks that bad steps are errors that change nothing.
func TestForwardRejects(t *testing.T) {
	b := openSynth(t, backends.Options{Threads: 1}, "tiny", "F32")
	other := openSynth(t, backends.Options{Threads: 1}, "tiny", "F32")
	info := b.Model()
	good := newSeq(t, b, backends.SequenceOptions{MaxLen: 8})
	forward(t, b, backends.Step{Seq: good, Tokens: []tokenizer.ID{1, 2}})
	closed := newSeq(t, b, backends.SequenceOptions{MaxLen: 8})
	closed.Close()
	foreign := newSeq(t, other, backends.SequenceOptions{MaxLen: 8})

	cases := []struct {
		name  string
		steps []backends.Step
		is    error
	}{
		{"nil sequence", []backends.Step{{Tokens: []tokenizer.ID{1}}}, nil},
		{"foreign sequence", []backends.Step{{Seq: foreign, Tokens: []tokenizer.ID{1}}}, nil},
		{"closed sequence", []backends.Step{{Seq: closed, Tokens: []tokenizer.ID{1}}}, backends.ErrClosed},
		{"no tokens", []backends.Step{{Seq: good}}, nil},
		{"negative token", []backends.Step{{Seq: good, Tokens: []tokenizer.ID{-1}}}, nil},
		{"token past vocab", []backends.Step{{Seq: good, Tokens: []tokenizer.ID{tokenizer.ID(info.VocabSize)}}}, nil},
		{"too long", []backends.Step{{Seq: good, Tokens: make([]tokenizer.ID, 7)}}, backends.ErrContextFull},
		{"twice", []backends.Step{{Seq: good, Tokens: []tokenizer.ID{1}}, {Seq: good, Tokens: []tokenizer.ID{1}}}, nil},
		{"short logits", []backends.Step{{Seq: good, Tokens: []tokenizer.ID{1}, Logits: make([]float32, info.VocabSize-1)}}, nil},
		{"logits for last, all wanted", []backends.Step{{Seq: good, Tokens: []tokenizer.ID{1, 2}, Outputs: backends.AllTokens,
			Logits: make([]float32, info.VocabSize)}}, nil},
		{"long hidden", []backends.Step{{Seq: good, Tokens: []tokenizer.ID{1}, Hidden: make([]float32, info.Dim+1)}}, nil},
		{"unknown outputs", []backends.Step{{Seq: good, Tokens: []tokenizer.ID{1}, Outputs: 7}}, nil},
		// The first step is fine; the second's error must leave it undone.
		{"second step bad", []backends.Step{{Seq: foreign, Tokens: []tokenizer.ID{1}}, {Seq: good, Tokens: []tokenizer.ID{-5}}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := b.Forward(c.steps)
			if err == nil {
				t.Fatal("Forward succeeded")
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Fatalf("error %v is not %v", err, c.is)
			}
			if good.Len() != 2 {
				t.Fatalf("a failed Forward changed Len to %d", good.Len())
			}
		})
	}
	if _, err := b.NewSequence(backends.SequenceOptions{MaxLen: info.ContextLength + 1}); err == nil {
		t.Fatal("a sequence longer than the KV pool (the context, by default) was made")
	}
	if _, err := b.NewSequence(backends.SequenceOptions{MaxLen: -1}); err == nil {
		t.Fatal("a sequence of negative length was made")
	}
	b.Close()
	if err := b.Forward([]backends.Step{{Seq: good, Tokens: []tokenizer.ID{1}}}); !errors.Is(err, backends.ErrClosed) {
		t.Fatalf("Forward after Close: %v", err)
	}
}

// TestDecodeAllocatesNothing is the house rule for the hot path.
func TestDecodeAllocatesNothing(t *testing.T) {
	for _, threads := range []int{1, 2} {
		b := openSynth(t, backends.Options{Threads: threads}, "tiny", "Q4_K_M")
		vocab := b.Model().VocabSize
		s1 := newSeq(t, b, backends.SequenceOptions{MaxLen: 512})
		s2 := newSeq(t, b, backends.SequenceOptions{MaxLen: 512, KV: kvcache.F32})
		l1, l2 := make([]float32, vocab), make([]float32, vocab)
		forward(t, b, backends.Step{Seq: s1, Tokens: promptA, Logits: l1}, backends.Step{Seq: s2, Tokens: promptB, Logits: l2})
		one := []backends.Step{{Seq: s1, Tokens: []tokenizer.ID{1}, Logits: l1}}
		two := []backends.Step{{Seq: s1, Tokens: []tokenizer.ID{1}, Logits: l1}, {Seq: s2, Tokens: []tokenizer.ID{2}, Logits: l2}}
		for name, steps := range map[string][]backends.Step{"one sequence": one, "two sequences": two} {
			allocs := testing.AllocsPerRun(20, func() {
				if err := b.Forward(steps); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%d threads, %s: a decode step allocates %.1f times", threads, name, allocs)
			}
		}
	}
}

func TestModelInfo(t *testing.T) {
	for _, c := range []struct {
		model            testModel
		want             backends.ModelInfo
		kvHeads, headDim int
	}{
		{synthModel("tiny", "Q4_K_M", 0), backends.ModelInfo{Arch: "llama", VocabSize: 1024, Dim: 256, Layers: 2, ContextLength: 512}, 2, 64},
		{sharedModel(0, "models", "mini", "mini-qwen2-Q4_K_M.gguf"), backends.ModelInfo{Arch: "qwen2", VocabSize: 512, Dim: 256, Layers: 4, ContextLength: 512}, 4, 32},
	} {
		t.Run(c.model.name, func(t *testing.T) {
			b := c.model.open(t, backends.Options{Threads: 3})
			info := b.Model()
			info.Name = ""
			if info != c.want {
				t.Fatalf("Model() = %+v, want %+v", info, c.want)
			}
			if b.Threads() != 3 {
				t.Fatalf("Threads() = %d, want 3", b.Threads())
			}
			s := newSeq(t, b, backends.SequenceOptions{MaxLen: 100})
			// A block: layers × 32 positions × kv heads × head dims × (k + v)
			// × 2 bytes. A sequence holds the blocks its tokens fill; the pool
			// has the model's context, 512 positions (16 blocks), by default.
			block := int64(c.want.Layers * 32 * c.kvHeads * c.headDim * 2 * 2)
			if s.CacheBytes() != 0 || s.MaxLen() != 100 {
				t.Fatalf("empty sequence: CacheBytes() = %d, MaxLen() = %d", s.CacheBytes(), s.MaxLen())
			}
			forward(t, b, backends.Step{Seq: s, Tokens: make([]tokenizer.ID, 33)})
			if s.CacheBytes() != 2*block {
				t.Fatalf("33 tokens: CacheBytes() = %d, want %d", s.CacheBytes(), 2*block)
			}
			st := b.KVStats()
			if st.Blocks != 16 || st.BlockBytes != block || st.UsedBlocks != 2 || st.TotalBytes != 16*block {
				t.Fatalf("KVStats() = %+v", st)
			}
		})
	}
}

// TestKVPoolFull: a step that needs more blocks than the pool has left
// fails before anything changes, with an error the engine recognises.
func TestKVPoolFull(t *testing.T) {
	b := openSynth(t, backends.Options{Threads: 1, KVTokens: 64}, "tiny", "Q4_K_M")
	s1 := newSeq(t, b, backends.SequenceOptions{MaxLen: 64})
	s2 := newSeq(t, b, backends.SequenceOptions{MaxLen: 64})
	forward(t, b, backends.Step{Seq: s1, Tokens: make([]tokenizer.ID, 40)})
	err := b.Forward([]backends.Step{{Seq: s2, Tokens: make([]tokenizer.ID, 10)}, {Seq: s1, Tokens: make([]tokenizer.ID, 20)}})
	if !errors.Is(err, backends.ErrNoRoom) || s1.Len() != 40 || s2.Len() != 0 {
		t.Fatalf("Forward past the pool: %v; lengths %d, %d", err, s1.Len(), s2.Len())
	}
	if _, err := b.NewSequence(backends.SequenceOptions{MaxLen: 65}); err == nil {
		t.Fatal("a sequence longer than the pool was made")
	}
}

// TestRepackDecodesTheSame runs Q4_0, Q4_K and Q5_K models with the packed copy
// of the weights (the default, which every product reads) and with the
// file's layout only (NoRepack): a prompt, decode steps, and a batched
// decode step of 5 sequences (a token each, after prompts of their own);
// every logit must be equal to the bit, with one thread and with two.
func TestRepackDecodesTheSame(t *testing.T) {
	for _, m := range []testModel{
		synthModel("tiny", "Q4_0", 0),
		synthModel("tiny", "Q4_K_M", 0),
		synthModel("tiny", "Q5_K_M", 0),
		sharedModel(0, "models", "mini", "mini-llama-Q4_0.gguf"),
		sharedModel(0, "models", "mini", "mini-llama-Q4_K_M.gguf"),
		sharedModel(0, "models", "mini", "mini-llama-Q5_K_M.gguf"),
	} {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%dthreads", m.name, threads), func(t *testing.T) {
				packed := m.open(t, backends.Options{Threads: threads})
				plain := m.open(t, backends.Options{Threads: threads, NoRepack: true})
				if n, none := countPacked(packed.w), countPacked(plain.w); n == 0 || none != 0 {
					t.Fatalf("%d packed matrices by default, %d with NoRepack: want some and none", n, none)
				}
				wantPrefill, want := alone(t, plain, promptA[:3], promptA[3:], 32)
				gotPrefill, got := alone(t, packed, promptA[:3], promptA[3:], 32)
				sameBits(t, "prompt", gotPrefill, wantPrefill)
				sameBits(t, "decode", got, want)
				sameBits(t, "batched decode", batchOf5(t, packed), batchOf5(t, plain))
			})
		}
	}
}

// batchOf5 gives 5 sequences prompts of 1 to 5 tokens, then decodes a
// token of each in one step, and returns that step's logits.
func batchOf5(t *testing.T, b *Backend) []float32 {
	vocab := b.Model().VocabSize
	logits := make([]float32, 5*vocab)
	var steps []backends.Step
	for i := range 5 {
		s := newSeq(t, b, backends.SequenceOptions{MaxLen: 32})
		forward(t, b, backends.Step{Seq: s, Tokens: promptA[:i+1]})
		steps = append(steps, backends.Step{Seq: s, Tokens: promptA[i+1 : i+2], Logits: logits[i*vocab : (i+1)*vocab]})
	}
	forward(t, b, steps...)
	return logits
}

// countPacked is the number of matrices of w with a packed copy.
func countPacked(w *weights) int {
	n := 0
	for _, m := range w.matrices() {
		if m.packed != nil {
			n++
		}
	}
	return n
}
