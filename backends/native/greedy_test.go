package native

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// open loads a model file from the shared test data, skipping the test
// when it is absent.
func open(tb testing.TB, opt backends.Options, parts ...string) *Backend {
	tb.Helper()
	b, _, _ := openFile(tb, shared.Path(tb, parts...), opt)
	return b
}

// openSynth loads the synthesized model of shape in file type ft
// (testmodel.Synth: random weights, written on any machine), for the tests
// that need some model rather than a trained one or llama.cpp's files.
func openSynth(tb testing.TB, opt backends.Options, shape, ft string) *Backend {
	tb.Helper()
	b, _, _ := openFile(tb, testmodel.Synth(tb, shape, ft), opt)
	return b
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

// greedy feeds prompt in one step, then decodes n tokens one per step.
func greedy(tb testing.TB, b *Backend, seq backends.Sequence, prompt []tokenizer.ID, n int) []tokenizer.ID {
	tb.Helper()
	logits := make([]float32, b.Model().VocabSize)
	var out []tokenizer.ID
	toks := prompt
	for range n {
		if err := b.Forward([]backends.Step{{Seq: seq, Tokens: toks, Logits: logits}}); err != nil {
			tb.Fatal(err)
		}
		t := argmax(logits)
		out = append(out, tokenizer.ID(t))
		toks = []tokenizer.ID{tokenizer.ID(t)}
	}
	return out
}

func TestStoriesGreedy(t *testing.T) {
	const want = "403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 265 282 295 433 426 385 328 432 358 394 261 370 432 352"
	b := open(t, backends.Options{Threads: 2}, "models", "stories260K.gguf")
	seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	got := greedy(t, b, seq, []tokenizer.ID{1}, 40)
	var s []string
	for _, x := range got {
		s = append(s, strconv.Itoa(int(x)))
	}
	if g := strings.Join(s, " "); g != want {
		t.Fatalf("greedy from BOS:\n got %s\nwant %s", g, want)
	}
}
