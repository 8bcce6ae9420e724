package native

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
)

// moeDir holds a recent llama.cpp's runs of the tiny mixtures of experts
// (testdata/families/moe/README.md). Their files are not committed: synth
// writes them again, byte for byte, on any machine.
var moeDir = filepath.Join(familyDir, "moe")

// moeFile synthesizes the file a reference names, SHAPE[-seedN]-TYPE.gguf
// ("tiny-qwen3moe-Q4_K_M.gguf": shape tiny-qwen3moe, type Q4_K_M, seed 1;
// "tiny-gpt-oss-seed2-MXFP4_MOE.gguf"), and checks that it is the file
// llama.cpp ran, by its SHA-256.
func moeFile(t *testing.T, name, sha string) string {
	t.Helper()
	path := moeSynth(t, name)
	if got := fileSHA256(t, path); got != sha {
		t.Fatalf("synth wrote %s with SHA-256 %s, llama.cpp ran %s", name, got, sha)
	}
	return path
}

// moeSynth synthesizes the file a reference names (moeFile).
func moeSynth(t *testing.T, name string) string {
	t.Helper()
	base := strings.TrimSuffix(name, ".gguf")
	var shape, ft string
	for _, s := range models.ShapeNames() {
		if rest, ok := strings.CutPrefix(base, s+"-"); ok && len(s) > len(shape) {
			shape, ft = s, rest
		}
	}
	seed := uint64(1)
	if rest, ok := strings.CutPrefix(ft, "seed"); ok {
		n, after, _ := strings.Cut(rest, "-")
		v, err := strconv.ParseUint(n, 10, 64)
		if err != nil {
			t.Fatalf("reference of a file %s synth cannot name", name)
		}
		seed, ft = v, after
	}
	if shape == "" {
		t.Fatalf("reference of a file %s synth cannot name", name)
	}
	return testmodel.SynthSeed(t, shape, ft, seed)
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestMoEParity replays the recent llama.cpp's runs of the tiny mixtures of
// experts (qwen3moe, gpt-oss) in every file type, as TestFamilyParity
// replays the dense families': teacher-forced, the same tokens, logits
// within ruleOtherBuild's bound and top-5 probabilities within 0.02.
func TestMoEParity(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(moeDir, "*", "*.logits.json"))
	if len(files) == 0 {
		t.Fatalf("no reference runs in %s", moeDir)
	}
	for _, file := range files {
		model := filepath.Base(filepath.Dir(file))
		prompt := strings.TrimSuffix(filepath.Base(file), ".logits.json")
		t.Run(model+"/"+prompt, func(t *testing.T) {
			ref := readReference(t, file)
			b, _, _ := openFile(t, moeFile(t, ref.ModelFile, ref.ModelSHA256), backends.Options{Threads: 2})
			checkReference(t, b, ref, ruleFor(model, ref))
		})
	}
}

// denseExperts is the mixture-of-experts sublayer computed densely: every
// expert on every token, its output weighted by the token's routing
// weight for it (zero where the token did not choose it) and summed. No
// grouping, no gathering of tokens, no per-slot outputs: a second way to
// what b.experts computes sparsely.
func denseExperts(b *Backend) func(l, n int, t *tensors, xn, proj []float32, act func(dst, gate, up []float32)) {
	return func(l, n int, t *tensors, xn, proj []float32, act func(dst, gate, up []float32)) {
		cfg, mb, ly := b.cfg, &b.moe, &b.moeLayers[l]
		dim, k, f := cfg.Dim, cfg.ExpertsUsed, cfg.ExpertFFN
		b.route(l, n, t, xn)
		weight := make([]float32, n*cfg.Experts) // (token, expert)
		for r := range n {
			for j := range k {
				weight[r*cfg.Experts+int(mb.chosen[r*k+j])] = mb.weight[r*k+j]
			}
		}
		clear(proj[:n*dim])
		gate, up, down := make([]float32, n*f), make([]float32, n*f), make([]float32, n*dim)
		for e := range cfg.Experts {
			b.expertProduct(ly.gate, e, xn, n, gate, ly.gateB)
			b.expertProduct(ly.up, e, xn, n, up, ly.upB)
			for i := range n {
				act(gate[i*f:(i+1)*f], gate[i*f:(i+1)*f], up[i*f:(i+1)*f])
			}
			b.expertProduct(ly.down, e, gate, n, down, ly.downB)
			for r := range n {
				w := weight[r*cfg.Experts+e]
				for i, v := range down[r*dim : (r+1)*dim] {
					proj[r*dim+i] += w * v
				}
			}
		}
	}
}

// TestMoEDenseParity checks the routing a second way: the tiny mixtures of
// experts computed densely (every expert evaluated, the routing weights
// applied; denseExperts) choose llama.cpp's tokens at every step of its
// runs, with its logits within ruleOtherBuild's bound, as the sparse
// computation does (TestMoEParity).
func TestMoEDenseParity(t *testing.T) {
	for _, model := range []string{"tiny-qwen3moe-F32", "tiny-qwen3moe-Q4_K_M", "tiny-gpt-oss-F32", "tiny-gpt-oss-MXFP4_MOE"} {
		files, _ := filepath.Glob(filepath.Join(moeDir, model, "*.logits.json"))
		if len(files) == 0 {
			t.Fatalf("no reference runs of %s in %s", model, moeDir)
		}
		for _, file := range files {
			prompt := strings.TrimSuffix(filepath.Base(file), ".logits.json")
			t.Run(model+"/"+prompt, func(t *testing.T) {
				ref := readReference(t, file)
				b, _, _ := openFile(t, moeFile(t, ref.ModelFile, ref.ModelSHA256), backends.Options{Threads: 2})
				b.moeFFN = denseExperts(b)
				checkReference(t, b, ref, ruleOtherBuild)
			})
		}
	}
}

// TestMoEPerplexity compares with the recent llama.cpp's perplexities of
// the tiny mixtures of experts in testdata/families/moe/perplexity.json
// (README.md there): ln ppl within 0.01, 0.04% of theirs.
//
// A file takes a minute or more (the tiny models have Qwen3's and gpt-oss's
// real vocabularies, so every token's logits are large): by default the
// F32 files (both architectures' float path) and gpt-oss's MXFP4 one of
// seed 1 run; RUVLLM_MOE_PPL=all runs the 18. TestMoEParity holds every
// file's logits to llama.cpp's on every run.
func TestMoEPerplexity(t *testing.T) {
	if testing.Short() {
		t.Skip("files of 5583 tokens take minutes; run without -short")
	}
	all := os.Getenv("RUVLLM_MOE_PPL") == "all"
	checkPerplexities(t, moeDir, func(t *testing.T, name string) string {
		if !all && (strings.Contains(name, "seed") || !strings.Contains(name, "F32") && !strings.Contains(name, "MXFP4")) {
			t.Skip("RUVLLM_MOE_PPL=all runs this file too")
		}
		return moeSynth(t, name)
	})
}

// TestMoEEngineFeatures holds the tiny mixtures of experts to what the
// dense families keep: a prompt split into micro-batches, token by token or
// beside another sequence computes the same logits, prefix reuse too, and
// a decode step allocates nothing. The prompt's logits agree within 0.5%
// of the largest rather than 0.1%: one token's products are vec_dot's sums
// and a batch's tinyBLAS's (as in llama.cpp), which these random models of
// large weights amplify; an expert chosen differently would move logits by
// their own size. F32 files: in Q8_0 a router's near-tie flips between the
// two orders of summing, as it would in llama.cpp.
func TestMoEEngineFeatures(t *testing.T) {
	for _, shape := range []string{"tiny-qwen3moe", "tiny-gpt-oss"} {
		path := testmodel.Synth(t, shape, "F32")
		t.Run(shape+"/prefill splits", func(t *testing.T) { checkPrefillSplits(t, path, 5e-3) })
		t.Run(shape+"/prefix reuse", func(t *testing.T) { checkPrefixReuse(t, path) })
		t.Run(shape+"/decode allocates nothing", func(t *testing.T) { checkDecodeAllocs(t, path) })
	}
}

// TestMoEAdapters: an adapter of the attention and the router of a mixture
// of experts applies (it moves the logits); one of the experts is refused
// with why.
func TestMoEAdapters(t *testing.T) {
	for _, shape := range []string{"tiny-qwen3moe", "tiny-gpt-oss"} {
		t.Run(shape, func(t *testing.T) {
			b, _, cfg := openFile(t, testmodel.Synth(t, shape, "Q8_0"), backends.Options{Threads: 2})
			a, err := lora.Random(cfg, lora.RandomSpec{Rank: 4, Seed: 3, Amplitude: 0.1,
				Targets: []string{"blk.0.attn_q.weight", "blk.1.attn_v.weight", "blk.2.ffn_gate_inp.weight"}})
			if err != nil {
				t.Fatal(err)
			}
			prompt := longPrompt[:12]
			base, with := make([]float32, cfg.VocabSize), make([]float32, cfg.VocabSize)
			forward(t, b, backends.Step{Seq: newSeq(t, b, backends.SequenceOptions{MaxLen: 64}), Tokens: prompt, Logits: base})
			s := newSeq(t, b, backends.SequenceOptions{MaxLen: 64})
			setAdapter(t, s, a, 1)
			forward(t, b, backends.Step{Seq: s, Tokens: prompt, Logits: with})
			moved := 0.0
			for i := range base {
				moved = max(moved, math.Abs(float64(with[i]-base[i])))
			}
			if moved < 0.01 {
				t.Errorf("the adapter moved the logits by %.3g", moved)
			}
			tg, err := lora.NewTarget("blk.0.ffn_up_exps.weight", cfg.Dim, cfg.ExpertFFN, 2, make([]float32, 2*cfg.Dim), make([]float32, 2*cfg.ExpertFFN), 1)
			if err != nil {
				t.Fatal(err)
			}
			exps, err := lora.New("experts", cfg.Arch, 2, false, lora.FormatGGUF, []*lora.Target{tg})
			if err != nil {
				t.Fatal(err)
			}
			err = newSeq(t, b, backends.SequenceOptions{MaxLen: 64}).(backends.AdapterSequence).SetAdapter(exps, 1)
			if err == nil || !errors.Is(err, lora.ErrInvalid) || !strings.Contains(err.Error(), "adapters on the experts are not supported") {
				t.Errorf("an adapter of the experts: %v", err)
			}
		})
	}
}
