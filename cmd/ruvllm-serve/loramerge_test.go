package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

func TestLoRAMerge(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "tiny.gguf")
	shape, _ := models.ShapeByName("tiny")
	ft, _ := models.ParseFileType("F32")
	if err := models.Synthesize(base, shape, ft, 3, 2); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := models.ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	a, err := lora.Random(cfg, lora.RandomSpec{Rank: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	peft, ggufAdapter := filepath.Join(dir, "peft"), filepath.Join(dir, "a.gguf")
	if err := a.WritePEFT(peft, cfg); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteGGUF(ggufAdapter, kernels.F32); err != nil {
		t.Fatal(err)
	}
	other := *cfg
	other.Dim *= 2
	misfit, _ := lora.Random(&other, lora.RandomSpec{Rank: 2, Seed: 2, Targets: []string{"blk.0.attn_q.weight"}})
	misfitPath := filepath.Join(dir, "misfit.gguf")
	if err := misfit.WriteGGUF(misfitPath, kernels.F32); err != nil {
		t.Fatal(err)
	}

	merged := func(name string, args ...string) []byte {
		t.Helper()
		out := filepath.Join(dir, name)
		_, stderr, code := run(t, append([]string{"lora-merge", "--model", base, "--out", out}, args...)...)
		if code != 0 || !strings.Contains(stderr, "merged") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	fromPEFT := merged("m1.gguf", "--adapter", peft)
	fromGGUF := merged("m2.gguf", "--adapter", ggufAdapter, "--threads", "1")
	if !bytes.Equal(fromPEFT, fromGGUF) {
		t.Error("merging the PEFT and the GGUF form of one adapter gave different files")
	}
	want := filepath.Join(dir, "want.gguf")
	if err := lora.Merge(f, a, want, lora.MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	if w, _ := os.ReadFile(want); !bytes.Equal(w, fromPEFT) {
		t.Error("lora-merge differs from lora.Merge")
	}
	if bytes.Equal(fromPEFT, mustRead(t, base)) {
		t.Error("the merged model equals the base model")
	}

	half := merged("m3.gguf", "--adapter", ggufAdapter, "--type", "F16", "--scale", "0.5")
	m, err := gguf.Parse(half)
	if err != nil {
		t.Fatal(err)
	}
	if ti, _ := m.Tensor("blk.1.ffn_down.weight"); ti.Type != kernels.F16 {
		t.Errorf("updated weight is %v, want F16", ti.Type)
	}
	if ti, _ := m.Tensor("token_embd.weight"); ti.Type != kernels.F32 {
		t.Errorf("untouched weight is %v, want F32", ti.Type)
	}

	errs := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"lora-merge", "--model", base}, 2, "are required"},
		{[]string{"lora-merge", "--model", base, "--adapter", misfitPath, "--out", filepath.Join(dir, "x.gguf")}, 1, "wrong base model"},
		{[]string{"lora-merge", "--model", base, "--adapter", base, "--out", filepath.Join(dir, "x.gguf")}, 1, "not \"adapter\""},
		{[]string{"lora-merge", "--model", base, "--adapter", ggufAdapter, "--out", filepath.Join(dir, "x.gguf"), "--type", "Q9"}, 1, "unknown tensor type"},
	}
	for _, c := range errs {
		_, stderr, code := run(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want %d with %q", c.args[3:], code, stderr, c.code, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.gguf")); err == nil {
		t.Error("a failed merge left a file")
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
