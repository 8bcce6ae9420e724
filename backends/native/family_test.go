package native

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// familyDir holds the random-weight files of the families newer than
// llama.cpp b4748 and a recent llama.cpp's runs of them (README.md there).
var familyDir = filepath.Join("testdata", "families")

// TestFamilyParity replays the recent llama.cpp's runs of testdata/families
// as TestReferenceParity replays ../shared's: every file (F32, F16, Q8_0 and
// Q4_K_M of each family) and prompt, teacher-forced, the same tokens, logits
// within ruleOtherBuild's bound and top-5 probabilities within 0.02. The
// runs under lora/ apply a GGUF LoRA adapter (llama.cpp's --lora). The
// Llama 3 file with rope.scaling keys instead of rope_freqs.weight must give
// the runs of the file with the tensor, the form llama.cpp reads.
func TestFamilyParity(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(familyDir, "*", "*.logits.json"))
	withLoRA, _ := filepath.Glob(filepath.Join(familyDir, "lora", "*", "*.logits.json"))
	if len(files) == 0 || len(withLoRA) == 0 {
		t.Fatalf("no reference runs in %s", familyDir)
	}
	for _, file := range append(files, withLoRA...) {
		model := filepath.Base(filepath.Dir(file))
		prompt := strings.TrimSuffix(filepath.Base(file), ".logits.json")
		ref := readReference(t, file)
		paths := []string{filepath.Join(familyDir, ref.ModelFile)}
		if ref.ModelFile == "tiny-llama3-F32.gguf" {
			keys := "tiny-llama3-keys-F32.gguf"
			paths = append(paths, filepath.Join(familyDir, keys))
		}
		for i, path := range paths {
			name := model // the run's directory
			if i > 0 {
				name = strings.TrimSuffix(filepath.Base(path), ".gguf")
			}
			if ref.LoRAFile != "" {
				name += "+lora"
			}
			t.Run(name+"/"+prompt, func(t *testing.T) {
				b, f, cfg := openFile(t, path, backends.Options{Threads: 2})
				var a *lora.Adapter
				if ref.LoRAFile != "" {
					var err error
					if a, err = lora.Load(filepath.Join(familyDir, ref.LoRAFile), cfg, f); err != nil {
						t.Fatal(err)
					}
				}
				checkReferenceWith(t, b, ref, ruleFor(model, ref), a)
			})
		}
	}
}

// familyFiles are the files the structural tests of the families run on:
// each family in F32 and in Q8_0.
var familyFiles = []string{
	"tiny-qwen3-F32.gguf", "tiny-gemma2-F32.gguf", "tiny-gemma3-Q8_0.gguf", "tiny-phi3-Q8_0.gguf", "tiny-llama3-Q8_0.gguf",
}

// longPrompt is longer than the tiny families' sliding window (8) and than
// a KV block (32), in the vocab of their files.
var longPrompt = func() []tokenizer.ID {
	p := []tokenizer.ID{1}
	for i := range 70 {
		p = append(p, tokenizer.ID(260+(i*37)%240))
	}
	return p
}()

// TestFamilyPrefillSplits checks, for each family, that a prompt longer than
// the sliding window gives the same logits in one batch, in micro-batches of
// 5 and one token per call (the window masks positions within a pass and
// across passes alike), and batched beside another sequence. The bound is
// looser than llama's: a prompt and single tokens sum F32 weights' dot
// products in different orders (tinyBLAS's and ggml's vec_dot, as
// llama.cpp), and the tiny families' large weights amplify that to 1.4e-4
// of the largest logit (Gemma 2 in F32); a window or cap misapplied moves
// logits by their own size.
func TestFamilyPrefillSplits(t *testing.T) {
	for _, file := range familyFiles {
		t.Run(file, func(t *testing.T) { checkPrefillSplits(t, filepath.Join(familyDir, file), 1e-3) })
	}
}

// checkPrefillSplits is TestFamilyPrefillSplits of the model at path, with
// the logits within tol of the largest.
func checkPrefillSplits(t *testing.T, path string, tol float64) {
	b, _, _ := openFile(t, path, backends.Options{Threads: 2})
	small, _, _ := openFile(t, path, backends.Options{Threads: 1, MaxBatch: 5})
	vocab := b.Model().VocabSize
	prompt := longPrompt[:40]
	batched, _ := alone(t, b, prompt, nil, 64)
	split, _ := alone(t, small, prompt, nil, 64)
	closeRel(t, "micro-batches of 5", split, batched, tol)
	_, single := alone(t, b, prompt[:1], prompt[1:], 64)
	closeRel(t, "token by token", single, batched[vocab:], tol)

	other := newSeq(t, b, backends.SequenceOptions{MaxLen: 64})
	s := newSeq(t, b, backends.SequenceOptions{MaxLen: 64})
	got := make([]float32, len(prompt)*vocab)
	forward(t, b,
		backends.Step{Seq: other, Tokens: longPrompt[20:50]},
		backends.Step{Seq: s, Tokens: prompt, Outputs: backends.AllTokens, Logits: got})
	closeRel(t, "beside another sequence", got, batched, tol)
}

// TestFamilyPrefixReuse checks that a sequence that reuses the committed
// blocks of another (two blocks of 32, past several windows) and computes
// only the rest gets the logits of a sequence that computes everything.
func TestFamilyPrefixReuse(t *testing.T) {
	for _, file := range familyFiles {
		t.Run(file, func(t *testing.T) { checkPrefixReuse(t, filepath.Join(familyDir, file)) })
	}
}

// checkPrefixReuse is TestFamilyPrefixReuse of the model at path.
func checkPrefixReuse(t *testing.T, path string) {
	b, _, _ := openFile(t, path, backends.Options{Threads: 2})
	vocab := b.Model().VocabSize
	first := newSeq(t, b, backends.SequenceOptions{MaxLen: 128})
	forward(t, b, backends.Step{Seq: first, Tokens: longPrompt})
	first.Close()

	prompt := append(append([]tokenizer.ID{}, longPrompt[:66]...), 300, 301, 302)
	want := make([]float32, vocab)
	forward(t, b, backends.Step{Seq: newSeq(t, b, backends.SequenceOptions{MaxLen: 128}), Tokens: prompt, Logits: want})

	s := newSeq(t, b, backends.SequenceOptions{MaxLen: 128})
	n := s.Reuse(prompt, len(prompt)-1)
	if n != 64 {
		t.Fatalf("reused %d tokens, want the 64 of two committed blocks", n)
	}
	got := make([]float32, vocab)
	forward(t, b, backends.Step{Seq: s, Tokens: prompt[n:], Logits: got})
	closeRel(t, "after reuse", got, want, 1e-3)
}

// TestFamilyDecodeAllocatesNothing is the house rule for the new blocks.
func TestFamilyDecodeAllocatesNothing(t *testing.T) {
	for _, file := range familyFiles {
		t.Run(file, func(t *testing.T) { checkDecodeAllocs(t, filepath.Join(familyDir, file)) })
	}
}

// checkDecodeAllocs is TestFamilyDecodeAllocatesNothing of the model at path.
func checkDecodeAllocs(t *testing.T, path string) {
	b, _, _ := openFile(t, path, backends.Options{Threads: 2})
	vocab := b.Model().VocabSize
	s := newSeq(t, b, backends.SequenceOptions{MaxLen: 128})
	l := make([]float32, vocab)
	forward(t, b, backends.Step{Seq: s, Tokens: longPrompt[:20], Logits: l})
	steps := []backends.Step{{Seq: s, Tokens: []tokenizer.ID{300}, Logits: l}}
	if a := testing.AllocsPerRun(20, func() { forward(t, b, steps...) }); a != 0 {
		t.Errorf("a decode step allocates %.1f times", a)
	}
}

// TestLongRoPESequences checks that a LongRoPE model rotates a sequence
// longer than its original context (256) by the long factors and a shorter
// one by the short factors, so that the two never share cached blocks.
func TestLongRoPESequences(t *testing.T) {
	b, _, _ := openFile(t, filepath.Join(familyDir, "tiny-phi3-longrope-F32.gguf"), backends.Options{Threads: 2})
	long := backends.SequenceOptions{MaxLen: 512}
	short := backends.SequenceOptions{MaxLen: 256}
	first := newSeq(t, b, long)
	forward(t, b, backends.Step{Seq: first, Tokens: longPrompt})
	if n := newSeq(t, b, short).Reuse(longPrompt, len(longPrompt)-1); n != 0 {
		t.Errorf("a short sequence reused %d tokens of a long one", n)
	}
	if n := newSeq(t, b, long).Reuse(longPrompt, len(longPrompt)-1); n != 64 {
		t.Errorf("a long sequence reused %d tokens of a long one, want 64", n)
	}
	if err := newSeq(t, b, short).ShareFrom(first); err == nil {
		t.Error("a short sequence shared a long one's blocks")
	}
	vocab := b.Model().VocabSize
	l, s := make([]float32, vocab), make([]float32, vocab)
	forward(t, b, backends.Step{Seq: newSeq(t, b, long), Tokens: longPrompt[:20], Logits: l})
	forward(t, b, backends.Step{Seq: newSeq(t, b, short), Tokens: longPrompt[:20], Logits: s})
	if maxRelDiff(l, s) < 1e-3 {
		t.Error("long and short sequences give the same logits")
	}
}
