package native

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// lnPerplexity scores tokens as llama-perplexity does: non-overlapping
// windows of nCtx tokens, the first of each replaced by BOS, every window
// scored on the predictions of its second half (positions nCtx/2 … nCtx−2
// predicting the next token). It returns the mean negative log-likelihood.
func lnPerplexity(t *testing.T, b backends.Backend, tokens []tokenizer.ID, nCtx, bos int) float64 {
	vocab := b.Model().VocabSize
	first := nCtx / 2
	scored := nCtx - 1 - first
	logits := make([]float32, scored*vocab)
	window := make([]tokenizer.ID, nCtx)
	var nll float64
	count := 0
	for start := 0; start+nCtx <= len(tokens); start += nCtx {
		copy(window, tokens[start:start+nCtx])
		window[0] = tokenizer.ID(bos)
		seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: nCtx})
		if err != nil {
			t.Fatal(err)
		}
		err = b.Forward([]backends.Step{{Seq: seq, Tokens: window[:first]}})
		if err == nil {
			err = b.Forward([]backends.Step{{Seq: seq, Tokens: window[first : nCtx-1], Outputs: backends.AllTokens, Logits: logits}})
		}
		if err != nil {
			t.Fatal(err)
		}
		seq.Close()
		for j := range scored {
			row := logits[j*vocab : (j+1)*vocab]
			m := math.Inf(-1)
			for _, v := range row {
				m = max(m, float64(v))
			}
			var sum float64
			for _, v := range row {
				sum += math.Exp(float64(v) - m)
			}
			nll += m + math.Log(sum) - float64(row[window[first+j+1]])
			count++
		}
	}
	if count == 0 {
		t.Fatalf("%d tokens make no window of %d", len(tokens), nCtx)
	}
	return nll / float64(count)
}

// TestPerplexity compares with llama-perplexity's figures in
// ../shared/reference/perplexity.json.
func TestPerplexity(t *testing.T) {
	dir := shared.Path(t, "reference")
	root := filepath.Dir(dir)
	checkPerplexities(t, dir, func(_ *testing.T, name string) string { return modelPath(root, name) })
}

// TestFamilyPerplexity compares with the recent llama.cpp's figures for the
// families' files in testdata/families/perplexity.json (README.md there).
func TestFamilyPerplexity(t *testing.T) {
	checkPerplexities(t, familyDir, func(_ *testing.T, name string) string { return filepath.Join(familyDir, name) })
}

// checkPerplexities measures every model of dir/perplexity.json, found by
// path, on its text in dir: ln ppl within 0.01 of llama.cpp's, 1% of ppl.
func checkPerplexities(t *testing.T, dir string, path func(t *testing.T, modelFile string) string) {
	raw, err := os.ReadFile(filepath.Join(dir, "perplexity.json"))
	if err != nil {
		t.Fatal(err)
	}
	var refs []struct {
		ModelFile string  `json:"model_file"`
		TextFile  string  `json:"text_file"`
		Ctx       int     `json:"ctx"`
		LnPPL     float64 `json:"ln_ppl"`
	}
	if err := json.Unmarshal(raw, &refs); err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		t.Run(strings.TrimSuffix(ref.ModelFile, ".gguf"), func(t *testing.T) {
			b, f, _ := openFile(t, path(t, ref.ModelFile), backends.Options{Threads: 2})
			tok, err := tokenizer.FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			text, err := os.ReadFile(filepath.Join(dir, ref.TextFile))
			if err != nil {
				t.Fatal(err)
			}
			// llama.cpp drops one trailing newline of a prompt file.
			ids := tok.Encode(strings.TrimSuffix(string(text), "\n"), tokenizer.EncodeOptions{AddSpecial: true})
			got := lnPerplexity(t, b, ids, ref.Ctx, int(tok.Vocab().BOS))
			t.Logf("%d tokens: ln ppl %.6f, llama.cpp %.6f", len(ids), got, ref.LnPPL)
			if math.Abs(got-ref.LnPPL) > 0.01 {
				t.Errorf("ln ppl %.6f, llama.cpp %.6f", got, ref.LnPPL)
			}
		})
	}
}
