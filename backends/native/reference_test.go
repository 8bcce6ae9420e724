package native

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/gguf"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// reference is llama.cpp's greedy run of one prompt (../shared/reference).
type reference struct {
	LlamaCpp     string         `json:"llama_cpp"` // the build, when not c392e509
	ModelFile    string         `json:"model_file"`
	ModelSHA256  string         `json:"model_sha256"`
	LoRAFile     string         `json:"lora_file"` // a GGUF LoRA adapter the run applies
	LoRAScale    float32        `json:"lora_scale"`
	NCtx         int            `json:"n_ctx"` // the context of the run's sequence
	PromptTokens []tokenizer.ID `json:"prompt_tokens"`
	Steps        []struct {
		Chosen int `json:"chosen"`
		Top    []struct {
			ID      int      `json:"id"`
			Logit   *float64 `json:"logit"` // null where the tool gave probabilities only
			Logprob float64  `json:"logprob"`
		} `json:"top"`
		Logits []float64 `json:"logits"` // every logit, for some steps
	} `json:"steps"`
}

// parityRule is how closely a run must follow llama.cpp's.
//
// The kernels do the arithmetic of ggml's AVX2 CPU code (the references were
// made by llama.cpp's AVX2 build) operation for operation, rounding for
// rounding, so a run matches llama.cpp's logits bit for bit. The one known
// exception: llama.cpp multiplies F32, F16 and BF16 weights by a prompt of
// two or more tokens with llamafile's tinyBLAS, which sums in another order
// than the dot products kernels.MatMul uses (kernels.GemmVecDot has
// tinyBLAS's); the prompt's keys and values then differ in the last bits
// and so does every later step, slightly.
//
// Every step is teacher-forced (fed llama.cpp's token), must choose
// llama.cpp's token, and must give logits within maxDev of llama.cpp's (its
// top 10, or all of them where the reference stores all); the top-5
// probabilities must then agree within 0.02, as the issue asks.
type parityRule struct {
	maxDev float64 // bound on |our logit − llama.cpp's|; 0: bit for bit
}

var (
	ruleExact       = parityRule{maxDev: 0}
	rulePromptOrder = parityRule{maxDev: 0.25} // random weights amplify the last bits
	// ruleOtherBuild is for the references of a recent llama.cpp
	// (node-llama-cpp's prebuilt one, see testdata/families/README.md),
	// which give logits (up to ±37 in the tiny families' runs): decoding
	// matches them bit for bit in most runs, but prompts of F32 and F16
	// weights sum in other orders (see above), which the tiny families'
	// large weights amplify to 0.016 at most (measured over every run,
	// F16 prompts the largest); a LoRA adapter left out moves them by 0.75
	// or more.
	ruleOtherBuild = parityRule{maxDev: 0.05}
)

// ruleFor picks the rule of a reference directory such as "mini-llama-Q4_K_M".
func ruleFor(model string, ref *reference) parityRule {
	if strings.Contains(ref.LlamaCpp, "node-llama-cpp") {
		return ruleOtherBuild
	}
	for _, float := range []string{"-F32", "-F16", "-BF16"} {
		if strings.HasSuffix(model, float) {
			return rulePromptOrder
		}
	}
	switch model {
	case "stories260K", "llama-2-tiny-random": // F32 and F16 weights
		return rulePromptOrder
	}
	return ruleExact
}

// modelPath finds the GGUF file a reference was made from.
func modelPath(dir, name string) string {
	if p := filepath.Join(dir, "models", "mini", name); fileExists(p) {
		return p
	}
	return filepath.Join(dir, "models", name)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestReferenceParity replays every llama.cpp reference run: the prompt in
// one batch, then one token per step, always feeding llama.cpp's chosen token
// so that the history of every step is llama.cpp's. The runs of families
// newer than b4748, kept in reference/next, are replayed for the families
// this backend runs.
func TestReferenceParity(t *testing.T) {
	dir := shared.Path(t, "reference")
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.logits.json"))
	if err != nil || len(files) == 0 {
		t.Skipf("no reference runs in %s", dir)
	}
	next, _ := filepath.Glob(filepath.Join(dir, "next", "*", "*.logits.json"))
	root := filepath.Dir(dir)
	for _, file := range append(files, next...) {
		model := filepath.Base(filepath.Dir(file))
		prompt := strings.TrimSuffix(filepath.Base(file), ".logits.json")
		t.Run(model+"/"+prompt, func(t *testing.T) {
			ref := readReference(t, file)
			path := modelPath(root, ref.ModelFile)
			if !served(t, path) {
				t.Skipf("%s: this backend does not run its architecture yet", ref.ModelFile)
			}
			rel, _ := filepath.Rel(root, path)
			b := open(t, backends.Options{Threads: 2}, strings.Split(rel, string(filepath.Separator))...)
			checkReference(t, b, ref, ruleFor(model, ref))
		})
	}
}

// readReference reads one reference run.
func readReference(t *testing.T, file string) *reference {
	t.Helper()
	var ref reference
	shared.ReadJSON(t, file, &ref)
	return &ref
}

// served reports whether the architecture of the model file at path has a
// block in this backend.
func served(t *testing.T, path string) bool {
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	arch, _ := f.GetString("general.architecture")
	_, ok := families[arch]
	return ok
}

func checkReference(t *testing.T, b *Backend, ref *reference, rule parityRule) {
	checkReferenceWith(t, b, ref, rule, nil)
}

// checkReferenceWith replays ref on a sequence that runs adapter a (nil:
// none) at the reference's LoRA scale.
func checkReferenceWith(t *testing.T, b *Backend, ref *reference, rule parityRule, a *lora.Adapter) {
	// The sequence is as long as the run's context where the model holds
	// it: a LongRoPE model picks its factors by that length, as llama.cpp
	// picks them by n_ctx_seq.
	maxLen := len(ref.PromptTokens) + len(ref.Steps)
	if ref.NCtx >= maxLen && ref.NCtx <= b.cfg.ContextLength {
		maxLen = ref.NCtx
	}
	seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: maxLen})
	if err != nil {
		t.Fatal(err)
	}
	if a != nil {
		setAdapter(t, seq, a, ref.LoRAScale)
	}
	logits := make([]float32, b.Model().VocabSize)
	probs := make([]float64, len(logits))
	toks := ref.PromptTokens
	worstDev, worstProb := 0.0, 0.0
	for i, st := range ref.Steps {
		if err := b.Forward([]backends.Step{{Seq: seq, Tokens: toks, Logits: logits}}); err != nil {
			t.Fatal(err)
		}
		toks = []tokenizer.ID{tokenizer.ID(st.Chosen)} // teacher forcing
		// The references print float32 logits with the 9 digits that
		// identify them: rounded back to float32 they are llama.cpp's bits.
		dev := 0.0
		for _, top := range st.Top {
			if top.Logit != nil {
				dev = max(dev, math.Abs(float64(logits[top.ID]-float32(*top.Logit))))
			}
		}
		for id, l := range st.Logits {
			dev = max(dev, math.Abs(float64(logits[id]-float32(l))))
		}
		worstDev = max(worstDev, dev)
		if dev > rule.maxDev {
			t.Errorf("step %d: logits deviate from llama.cpp's by %.3g, more than %.3g", i, dev, rule.maxDev)
		}
		if got := argmax(logits); got != st.Chosen {
			t.Errorf("step %d: chose %d, llama.cpp %d", i, got, st.Chosen)
		}
		softmax(logits, probs)
		for _, top := range st.Top[:5] {
			d := math.Abs(probs[top.ID] - math.Exp(top.Logprob))
			worstProb = max(worstProb, d)
			if d > 0.02 {
				t.Errorf("step %d: p(%d) = %.4f, llama.cpp %.4f", i, top.ID, probs[top.ID], math.Exp(top.Logprob))
			}
		}
	}
	t.Logf("%d steps; largest logit deviation %.3g, largest top-5 probability difference %.3g", len(ref.Steps), worstDev, worstProb)
}

// softmax writes the probabilities of logits at temperature 1 into p.
func softmax(logits []float32, p []float64) {
	m := math.Inf(-1)
	for _, v := range logits {
		m = max(m, float64(v))
	}
	var sum float64
	for i, v := range logits {
		p[i] = math.Exp(float64(v) - m)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
}
