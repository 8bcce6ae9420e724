package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/internal/testmodel"
)

// lnPPL runs perplexity and returns the log of its last line's ppl.
func lnPPL(t *testing.T, args ...string) float64 {
	t.Helper()
	out, stderr, code := run(t, append([]string{"perplexity"}, args...)...)
	if code != 0 {
		t.Fatalf("perplexity %v: %s", args, stderr)
	}
	m := regexp.MustCompile(`ppl = ([0-9.]+)\s*$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("perplexity %v printed %q", args, out)
	}
	ppl, _ := strconv.ParseFloat(m[1], 64)
	return math.Log(ppl)
}

// TestSparsify sparsifies a synthesized model and runs the file through
// the commands: whole it is the dense model, at a level another one, and
// the flags that cannot apply are refused.
func TestSparsify(t *testing.T) {
	dense := testmodel.Synth(t, "tiny", "Q4_0")
	dir := t.TempDir()
	text := filepath.Join(dir, "calib.txt")
	var words []string
	for i := range 600 {
		words = append(words, strconv.Itoa(i*7919%1000), "the", "cat")
	}
	if err := os.WriteFile(text, []byte(strings.Join(words, " ")), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "tiny.sparse.gguf")
	for _, alloc := range []string{"uniform", "greedy"} {
		_, stderr, code := run(t, "sparsify", "--model", dense, "--calib", text, "--sparsity", "0.5", "--out", out,
			"--ctx", "64", "--allocation", alloc, "--greedy-tokens", "128", "-t", "2")
		if code != 0 || !strings.Contains(stderr, "14 matrices channel-major") {
			t.Fatalf("sparsify --allocation %s: exit %d, %s", alloc, code, stderr)
		}
	}
	js, stderr, code := run(t, "inspect", "--model", out, "--json")
	if code != 0 {
		t.Fatal(stderr)
	}
	var r inspectReport
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Layout {
		if strings.HasPrefix(e.Tensor, "ffn_") && e.Tensor != "ffn_norm.weight" && (e.ChannelMajor != 2 || e.Present != 2) {
			t.Errorf("inspect: %+v", e)
		}
	}
	if r.Metadata["ruvllm.sparsity.allocation"] != "greedy" {
		t.Errorf("metadata %v", r.Metadata)
	}

	ppl := []string{"--file", text, "--ctx", "64", "-t", "2"}
	whole := lnPPL(t, append([]string{"--model", out, "--sparsity", "0"}, ppl...)...)
	if d := lnPPL(t, append([]string{"--model", dense}, ppl...)...); whole != d {
		t.Errorf("the sparsified file run whole: ln ppl %g, the dense file %g", whole, d)
	}
	if s := lnPPL(t, append([]string{"--model", out}, ppl...)...); s == whole {
		t.Errorf("at its calibrated level the file gives the dense ln ppl %g", s)
	}
	if _, stderr, code := run(t, "generate", "--model", out, "--prompt", "the cat", "-n", "4", "--sparsity", "0.3", "--temp", "0"); code != 0 {
		t.Errorf("generate --sparsity 0.3: %s", stderr)
	}
	if _, stderr, code := run(t, "bench", "--model", out, "-p", "8", "-n", "4", "-r", "1", "-t", "1", "--json"); code != 0 {
		t.Errorf("bench: %s", stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"perplexity", "--model", dense, "--file", text, "--sparsity", "0.5"}, "not sparsified"},
		{[]string{"perplexity", "--model", out, "--file", text, "--sparsity", "0.5", "--backend", "native"}, "runs on --backend native-sparse"},
		{[]string{"perplexity", "--model", out, "--file", text, "--sparsity", "0", "--backend", "native-sparse"}, "use --backend native"},
		{[]string{"perplexity", "--model", out, "--file", text, "--sparsity", "1.5"}, "not a fraction"},
		{[]string{"sparsify", "--model", dense, "--calib", text, "--out", out, "--allocation", "best"}, "uniform or greedy"},
	} {
		if _, stderr, code := run(t, c.args...); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want a usage error mentioning %q", c.args, code, stderr, c.want)
		}
	}
	if _, stderr, code := run(t, "quantize", "--model", out, "--out", filepath.Join(dir, "q.gguf"), "--type", "Q8_0"); code != 1 || !strings.Contains(stderr, "sparsified") {
		t.Errorf("quantize of a sparsified file: exit %d, %q", code, stderr)
	}
}

// TestSparseStoriesPerplexity calibrates stories260K on text it generates
// (seeds other than the reference sample's) and checks that its ln
// perplexity on the reference sample rises with the sparsity, slowly at
// first: the measured curve is in README.md.
func TestSparseStoriesPerplexity(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	sample := shared.Path(t, "reference", "stories-sample.txt")
	dir := t.TempDir()
	var text strings.Builder
	for seed := range 8 {
		out, stderr, code := run(t, "generate", "--model", stories, "--prompt", "", "-n", "256", "--temp", "1",
			"--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", strconv.Itoa(1001+seed))
		if code != 0 {
			t.Fatal(stderr)
		}
		text.WriteString(out + "\n")
	}
	calib := filepath.Join(dir, "calib.txt")
	if err := os.WriteFile(calib, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "stories.sparse.gguf")
	if _, stderr, code := run(t, "sparsify", "--model", stories, "--calib", calib, "--sparsity", "0.4", "--out", out, "--ctx", "128"); code != 0 {
		t.Fatal(stderr)
	}
	dense := lnPPL(t, "--model", stories, "--file", sample, "--ctx", "128")
	prev := dense
	for _, c := range []struct {
		s   string
		max float64 // ln ppl relative to the dense one
	}{{"0.1", 1.01}, {"0.25", 1.08}, {"0.4", 1.35}} {
		l := lnPPL(t, "--model", out, "--file", sample, "--ctx", "128", "--sparsity", c.s)
		if l < prev-0.002 || l > c.max*dense {
			t.Errorf("sparsity %s: ln ppl %.4f (dense %.4f, previous level %.4f)", c.s, l, dense, prev)
		}
		prev = l
	}
}
