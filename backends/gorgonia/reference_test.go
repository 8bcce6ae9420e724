package gorgonia

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// reference is llama.cpp's greedy run of one prompt (../shared/reference).
type reference struct {
	ModelFile    string         `json:"model_file"`
	PromptTokens []tokenizer.ID `json:"prompt_tokens"`
	Steps        []struct {
		Chosen int `json:"chosen"`
		Top    []struct {
			ID    int     `json:"id"`
			Logit float64 `json:"logit"`
		} `json:"top"`
	} `json:"steps"`
}

// TestReferenceParity replays llama.cpp's greedy runs of the F32 models of
// ../shared/reference on this backend and on the native one (replayParity).
func TestReferenceParity(t *testing.T) {
	dir := shared.Path(t, "reference")
	// next/ holds a recent llama.cpp's runs of families b4748 does not
	// know; those this backend runs are checked as the others.
	for _, model := range []string{"mini-llama-F32", "mini-qwen2-F32", "stories260K", "next/mini-qwen3-F32"} {
		files, _ := filepath.Glob(filepath.Join(dir, model, "*.logits.json"))
		if len(files) == 0 {
			t.Errorf("no reference runs of %s", model)
		}
		for _, file := range files {
			t.Run(model+"/"+filepath.Base(file), func(t *testing.T) {
				ref := readReference(t, file)
				path := filepath.Join(filepath.Dir(dir), "models", "mini", ref.ModelFile)
				if _, err := os.Stat(path); err != nil {
					path = filepath.Join(filepath.Dir(dir), "models", ref.ModelFile)
				}
				replayParity(t, path, ref)
			})
		}
	}
}

// TestFamilyParity replays, as TestReferenceParity does, a recent
// llama.cpp's runs of the native backend's tiny family files
// (../native/testdata/families, README there) of the families this backend
// runs: Qwen3, Phi-3 (without LongRoPE), and Llama 3.1's RoPE scaling given as rope_freqs.weight or
// by the rope.scaling keys (held to the runs of the file with the tensor).
func TestFamilyParity(t *testing.T) {
	const dir = "../native/testdata/families"
	for _, c := range []struct{ file, runs string }{
		{"tiny-qwen3-F32.gguf", "tiny-qwen3-F32"},
		{"tiny-llama3-F32.gguf", "tiny-llama3-F32"},
		{"tiny-llama3-keys-F32.gguf", "tiny-llama3-F32"},
		{"tiny-phi3-F32.gguf", "tiny-phi3-F32"},
		{"tiny-gemma2-F32.gguf", "tiny-gemma2-F32"},
		{"tiny-gemma3-F32.gguf", "tiny-gemma3-F32"},
	} {
		files, _ := filepath.Glob(filepath.Join(dir, c.runs, "*.logits.json"))
		if len(files) == 0 {
			t.Errorf("no runs of %s", c.runs)
		}
		for _, file := range files {
			t.Run(c.file+"/"+filepath.Base(file), func(t *testing.T) {
				replayParity(t, filepath.Join(dir, c.file), readReference(t, file))
			})
		}
	}
}

// readReference reads one run of ../shared/reference's format.
func readReference(t *testing.T, file string) *reference {
	t.Helper()
	var ref reference
	shared.ReadJSON(t, file, &ref)
	return &ref
}

// replayParity runs ref teacher-forced on the model at path on this
// backend and on the native one, with an F16 KV cache as llama.cpp had and
// with an F32 one: every step must choose llama.cpp's token. With F32 keys
// and values the two backends compute the same F32 arithmetic in other
// orders, and their logits must agree within 1e-4 relative (the largest
// difference over the largest logit). With F16 ones both round keys,
// values, queries and attention weights to F16 as ggml does, and a
// last-bit difference of F32 sums that lands on either side of an F16
// rounding step becomes an F16 ulp (5e-4 relative): there the bound is
// 2e-3, and how far this backend is from llama.cpp's own top logits is
// logged. Gemma's GeGLU looks its GELU up by the F16 rounding of each
// input, as ggml does, so its bound is 2e-3 with either cache.
func replayParity(t *testing.T, path string, ref *reference) {
	m := testmodel.Load(t, path)
	gor := testmodel.Backend(t, "gorgonia", m, backends.Options{Threads: 1})
	nat := testmodel.Backend(t, "native", m, backends.Options{Threads: 1})
	geglu := strings.HasPrefix(m.Config.Arch, "gemma")
	for _, kv := range []kvcache.Precision{kvcache.F16, kvcache.F32} {
		got := teacherForced(t, gor, ref, kv)
		want := teacherForced(t, nat, ref, kv)
		worst, refDev := 0.0, 0.0
		for i, st := range ref.Steps {
			if g := argmax(got[i]); g != st.Chosen {
				t.Errorf("KV %v, step %d: chose %d, llama.cpp %d", kv, i, g, st.Chosen)
			}
			worst = max(worst, relDev(got[i], want[i]))
			for _, top := range st.Top {
				refDev = max(refDev, math.Abs(float64(got[i][top.ID])-top.Logit))
			}
		}
		t.Logf("KV %v: %d steps; logits within %.3g relative of the native backend's, within %.3g of llama.cpp's top logits",
			kv, len(ref.Steps), worst, refDev)
		bound := 1e-4
		if kv == kvcache.F16 || geglu {
			bound = 2e-3
		}
		if worst > bound {
			t.Errorf("KV %v: logits deviate from the native backend's by %.3g relative, more than %g", kv, worst, bound)
		}
	}
}

// teacherForced runs the reference's prompt, then each of its chosen
// tokens, and returns the logits of every step.
func teacherForced(t *testing.T, b backends.Backend, ref *reference, kv kvcache.Precision) [][]float32 {
	t.Helper()
	seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: len(ref.PromptTokens) + len(ref.Steps), KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	var out [][]float32
	toks := ref.PromptTokens
	for _, st := range ref.Steps {
		logits := make([]float32, b.Model().VocabSize)
		if err := b.Forward([]backends.Step{{Seq: seq, Tokens: toks, Logits: logits}}); err != nil {
			t.Fatal(err)
		}
		out = append(out, logits)
		toks = []tokenizer.ID{tokenizer.ID(st.Chosen)}
	}
	return out
}

// TestRefusesUnsupported checks that the families and RoPE variants this
// backend has no graph for are refused when opened, not run wrongly.
func TestRefusesUnsupported(t *testing.T) {
	const dir = "../native/testdata/families"
	for _, c := range []struct{ file, want string }{
		{"tiny-phi3-longrope-F32.gguf", "LongRoPE"},
	} {
		t.Run(c.file, func(t *testing.T) {
			m := testmodel.Load(t, filepath.Join(dir, c.file))
			b, err := backends.Open("gorgonia", m, backends.Options{Threads: 1})
			if err == nil {
				b.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}
