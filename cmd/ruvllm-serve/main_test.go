package main

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/internal/shared"
)

// run runs the command line and returns stdout, stderr and the exit status.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runMain(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// quietEnv is the env of a test that calls a command's functions itself
// and checks what they return: it writes nothing.
func quietEnv() *env {
	return &env{stdout: io.Discard, stderr: io.Discard, log: zerolog.Nop()}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"nosuch"}, 2, "unknown command"},
		{[]string{"inspect"}, 2, "--model PATH is required"},
		{[]string{"inspect", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"quantize", "--model", "x"}, 2, "required"},
		{[]string{"synth", "--shape", "huge", "--out", "x"}, 2, "unknown shape"},
		{[]string{"inspect", "--model", "/nonexistent.gguf"}, 1, "no model file /nonexistent.gguf (a model on the Hugging Face Hub is pulled by its name"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, stderr, code := run(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, c.code, c.want)
			}
		})
	}
	if out, _, code := run(t, "inspect", "-h"); code != 0 || !strings.Contains(out, "usage: ruvllm-serve inspect") {
		t.Errorf("-h: exit %d, %q", code, out)
	}
}

// TestTopLevelHelp: the program's -h lists the commands, serving first and
// the developer's tools after; serve -h is still serve's flags; --version
// prints the version.
func TestTopLevelHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		out, _, code := run(t, args...)
		serve, tools, generate := strings.Index(out, "\n  serve "), strings.Index(out, "developer tools:"), strings.Index(out, "\n  generate ")
		if code != 0 || serve < 0 || tools < serve || generate < tools {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
	if out, _, code := run(t, "serve", "-h"); code != 0 || !strings.Contains(out, "usage: ruvllm-serve serve") || !strings.Contains(out, "-port") {
		t.Errorf("serve -h: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		if out, _, code := run(t, args...); code != 0 || out != "ruvllm-serve "+version+"\n" {
			t.Errorf("%v: exit %d, %q", args, code, out)
		}
	}
}

func TestSynthQuantizeInspect(t *testing.T) {
	dir := t.TempDir()
	f16 := filepath.Join(dir, "tiny-f16.gguf")
	q4 := filepath.Join(dir, "tiny-q4km.gguf")
	if _, stderr, code := run(t, "synth", "--shape", "tiny", "--type", "F16", "--out", f16, "-t", "2"); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	if _, stderr, code := run(t, "quantize", "--model", f16, "--out", q4, "--type", "q4_k_m"); code != 0 {
		t.Fatalf("quantize: %s", stderr)
	}
	out, stderr, code := run(t, "inspect", "--model", q4, "--json")
	if code != 0 {
		t.Fatalf("inspect: %s", stderr)
	}
	var r struct {
		Architecture string `json:"architecture"`
		Tensors      []struct {
			Name, Type string
		} `json:"tensors"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, t := range r.Tensors {
		types[t.Name] = t.Type
	}
	if r.Architecture != "llama" || types["blk.0.attn_q.weight"] != "Q4_K" || types["output.weight"] != "Q6_K" || types["blk.0.attn_norm.weight"] != "F32" {
		t.Fatalf("arch %q, types %v", r.Architecture, types)
	}
}

func TestInspectShared(t *testing.T) {
	p := shared.Path(t, "models", "stories260K.gguf")
	out, stderr, code := run(t, "inspect", "--model", p)
	if code != 0 {
		t.Fatal(stderr)
	}
	for _, want := range []string{"architecture:  llama", "dim 64, layers 5", "blk.4.ffn_down.weight", "tokenizer:"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q", want)
		}
	}
}
