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
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

func TestTokenize(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"Once upon a time"}, "[1,403,407,261,378]\n"},
		{[]string{"--no-bos", "Once upon a time"}, "[403,407,261,378]\n"},
		{[]string{"--no-bos", ""}, "[]\n"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, stderr, code := run(t, append([]string{"tokenize", "--model", stories}, c.args...)...)
			if code != 0 || out != c.want {
				t.Fatalf("exit %d, out %q, stderr %q; want %q", code, out, stderr, c.want)
			}
		})
	}
	t.Run("file byte for byte", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "in.txt")
		os.WriteFile(p, []byte("Once upon a time"), 0o644)
		out, _, code := run(t, "tokenize", "--model", stories, "--file", p)
		if code != 0 || out != "[1,403,407,261,378]\n" {
			t.Fatalf("exit %d, %q", code, out)
		}
	})
	t.Run("show", func(t *testing.T) {
		out, _, _ := run(t, "tokenize", "--model", stories, "--show", "Once")
		if !strings.Contains(out, `403 -> " Once"`) {
			t.Fatalf("%q", out)
		}
	})
	t.Run("special", func(t *testing.T) {
		// The Phi-3 vocab has <|user|> as a control token (id 32010).
		phi := shared.Path(t, "vocab", "ggml-vocab-phi-3.gguf")
		plain, _, _ := run(t, "tokenize", "--model", phi, "--no-bos", "<|user|>")
		special, _, _ := run(t, "tokenize", "--model", phi, "--no-bos", "--special", "<|user|>")
		if special != "[32010]\n" || plain == special {
			t.Fatalf("plain %q, special %q", plain, special)
		}
	})
}

func TestChatTemplateCommand(t *testing.T) {
	dir := shared.Path(t, "templates")
	var cases []struct {
		Messages            json.RawMessage `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
		BOS                 string          `json:"bos_token"`
		EOS                 string          `json:"eos_token"`
		Expected            *string         `json:"expected"`
		Error               *string         `json:"error"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "Qwen-Qwen2.5-7B-Instruct.cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	for i, c := range cases {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			msgs := filepath.Join(tmp, "m.json")
			os.WriteFile(msgs, c.Messages, 0o644)
			args := []string{"chat-template", "--template", filepath.Join(dir, "Qwen-Qwen2.5-7B-Instruct.jinja"),
				"--messages", msgs, "--bos-token", c.BOS, "--eos-token", c.EOS}
			if len(c.Tools) > 0 && string(c.Tools) != "null" {
				tools := filepath.Join(tmp, "t.json")
				os.WriteFile(tools, c.Tools, 0o644)
				args = append(args, "--tools", tools)
			}
			if c.AddGenerationPrompt {
				args = append(args, "--add-generation-prompt")
			}
			out, stderr, code := run(t, args...)
			if c.Error != nil {
				if code != 1 || stderr == "" {
					t.Fatalf("want an error, got exit %d", code)
				}
				return
			}
			if code != 0 || out != *c.Expected {
				t.Fatalf("exit %d, stderr %q\n got %q\nwant %q", code, stderr, out, *c.Expected)
			}
		})
	}
}

// TestChatTemplateKwargs renders, for every case of ../shared/templates with
// kwargs, the case's template with --kwargs; the output is Python Jinja2's
// render byte for byte.
func TestChatTemplateKwargs(t *testing.T) {
	dir := shared.Path(t, "templates")
	files, err := filepath.Glob(filepath.Join(dir, "*.cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ran := 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".cases.json")
		var cases []struct {
			Messages            json.RawMessage `json:"messages"`
			Tools               json.RawMessage `json:"tools"`
			Kwargs              json.RawMessage `json:"kwargs"`
			AddGenerationPrompt bool            `json:"add_generation_prompt"`
			BOS                 string          `json:"bos_token"`
			EOS                 string          `json:"eos_token"`
			Expected            *string         `json:"expected"`
			Error               *string         `json:"error"`
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &cases); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, c := range cases {
			if len(c.Kwargs) == 0 {
				continue
			}
			ran++
			t.Run(name+"/"+strconv.Itoa(i), func(t *testing.T) {
				args := []string{"chat-template", "--template", filepath.Join(dir, name+".jinja"),
					"--messages", write("m.json", c.Messages), "--kwargs", write("k.json", c.Kwargs),
					"--bos-token", c.BOS, "--eos-token", c.EOS, "--date", "2026-01-15"} // the renders' clock
				if len(c.Tools) > 0 && string(c.Tools) != "null" {
					args = append(args, "--tools", write("t.json", c.Tools))
				}
				if c.AddGenerationPrompt {
					args = append(args, "--add-generation-prompt")
				}
				out, stderr, code := run(t, args...)
				if c.Error != nil {
					if code != 1 || stderr == "" {
						t.Fatalf("want an error, got exit %d", code)
					}
					return
				}
				if code != 0 || out != *c.Expected {
					t.Fatalf("exit %d, stderr %q\n got %q\nwant %q", code, stderr, out, *c.Expected)
				}
			})
		}
	}
	if ran == 0 {
		t.Fatal("no case in ../shared/templates has kwargs")
	}
}

// TestChatTemplateArgs covers --template given as Jinja text and the
// checks on --kwargs.
func TestChatTemplateArgs(t *testing.T) {
	tmp := t.TempDir()
	msgs := filepath.Join(tmp, "m.json")
	os.WriteFile(msgs, []byte(`[{"role": "user", "content": "hi"}]`), 0o644)
	kwargs := func(s string) string {
		p := filepath.Join(tmp, "k"+strconv.Itoa(len(s))+".json")
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	tests := []struct {
		name string
		args []string
		want string // "" means the command must fail
	}{
		{"inline", []string{"--template", "{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}"}, "[user] hi"},
		{"builtin", []string{"--template", "mistral-v7", "--add-generation-prompt"}, "[INST] hi[/INST]"},
		{"kwargs", []string{"--template", "{{ messages[0].content }}/{{ enable_thinking }}/{{ opts.depth }}", "--kwargs", kwargs(`{"enable_thinking": false, "opts": {"depth": 2}}`)}, "hi/False/2"},
		{"kwargs not an object", []string{"--template", "chatml", "--kwargs", kwargs(`[1]`)}, ""},
		{"kwargs null", []string{"--template", "chatml", "--kwargs", kwargs(`null`)}, ""},
		{"kwargs missing", []string{"--template", "chatml", "--kwargs", filepath.Join(tmp, "none.json")}, ""},
		{"neither name, file nor Jinja", []string{"--template", "no-such-template"}, ""},
		{"date", []string{"--template", "{{ strftime_now('%d %B %Y') }}", "--date", "2026-01-15"}, "15 January 2026"},
		{"bad date", []string{"--template", "chatml", "--date", "15/01/2026"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := run(t, append([]string{"chat-template", "--messages", msgs}, tt.args...)...)
			if tt.want == "" {
				if code == 0 || stderr == "" {
					t.Fatalf("want an error, got exit %d, %q", code, out)
				}
				return
			}
			if code != 0 || out != tt.want {
				t.Fatalf("exit %d, stderr %q\n got %q\nwant %q", code, stderr, out, tt.want)
			}
		})
	}
}

func TestGenerateGreedyMatchesLlamaCpp(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	out, stderr, code := run(t, "generate", "--model", stories, "--prompt", "", "--temp", "0", "-n", "40", "--top-probs", "5", "--json")
	if code != 0 {
		t.Fatal(stderr)
	}
	var r generateResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	// ../shared/models/README.md: llama.cpp's greedy run from BOS.
	want := "403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 265 282 295 433 426 385 328 432 358 394 261 370 432 352"
	got := strings.Trim(strings.Join(strings.Fields(strings.Trim(fmtInts(r.IDs), "[]")), " "), " ")
	if got != want || len(r.PromptIDs) != 1 || r.PromptIDs[0] != 1 {
		t.Fatalf("prompt %v ids %s", r.PromptIDs, got)
	}
	if !strings.HasPrefix(r.Text, " Once upon a time, there was a little girl named Lily.") {
		t.Errorf("text %q", r.Text)
	}
	if len(r.Top) != 40 || len(r.Top[0]) != 5 || r.Top[0][0].ID != 403 || r.Top[0][0].P < r.Top[0][1].P {
		t.Errorf("top %v", r.Top[:1])
	}
}

// TestGenerateThroughTheSession checks that generate runs the server's
// session: stop strings end the text (and say so), and a JSON schema
// constrains it.
func TestGenerateThroughTheSession(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	schema := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object","properties":{"name":{"enum":["Lily","Tom"]}},"required":["name"],"additionalProperties":false}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		text   string
		finish string
	}{
		{"stop", []string{"--stop", "Lily", "--stop", "zebra"}, " Once upon a time, there was a little girl named ", "stop_sequence"},
		{"schema", []string{"--json-schema", schema}, "", "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := run(t, append([]string{"generate", "--model", stories, "--prompt", "", "--temp", "0", "-n", "40", "--json"}, tc.args...)...)
			if code != 0 {
				t.Fatal(stderr)
			}
			var r generateResult
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if r.Finish != tc.finish {
				t.Errorf("finish %q, want %q", r.Finish, tc.finish)
			}
			if tc.text != "" && r.Text != tc.text {
				t.Errorf("text %q, want %q", r.Text, tc.text)
			}
			if tc.name == "schema" {
				var v struct{ Name string }
				if err := json.Unmarshal([]byte(r.Text), &v); err != nil || (v.Name != "Lily" && v.Name != "Tom") {
					t.Errorf("text %q does not follow the schema: %v", r.Text, err)
				}
			}
		})
	}
}

func fmtInts(x []tokenizer.ID) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = strconv.Itoa(int(v))
	}
	return strings.Join(s, " ")
}

func TestPerplexityMatchesLlamaCpp(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	text := shared.Path(t, "reference", "stories-sample.txt")
	out, stderr, code := run(t, "perplexity", "--model", stories, "--file", text, "--ctx", "128")
	if code != 0 {
		t.Fatal(stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	m := regexp.MustCompile(`^ppl = ([0-9.]+)$`).FindStringSubmatch(lines[len(lines)-1])
	if m == nil {
		t.Fatalf("last line %q", lines[len(lines)-1])
	}
	ppl, _ := strconv.ParseFloat(m[1], 64)
	// ../shared/reference/perplexity.json: llama-perplexity -c 128 gives ln ppl 0.948293.
	if d := math.Abs(math.Log(ppl) - 0.948293); d > 0.01 {
		t.Fatalf("ppl %g (ln %g), llama.cpp ln ppl 0.948293", ppl, math.Log(ppl))
	}
}

func TestBench(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	out, stderr, code := run(t, "bench", "--model", stories, "-p", "16", "-n", "8", "-r", "2", "-t", "1", "--json")
	if code != 0 {
		t.Fatal(stderr)
	}
	var rs []benchResult
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Test != "pp16" || rs[1].Test != "tg8" || len(rs[1].Samples) != 2 || rs[1].TokensPerS <= 0 || rs[0].Threads != 1 {
		t.Fatalf("%+v", rs)
	}
}

// TestPerplexityKV runs perplexity with each KV precision: the output ends
// with kv_bytes_per_token, then ppl; the bytes are the pool's for
// stories260K's dimensions (5 layers, 4 kv heads of 8), and the quantized
// caches stay near F16's perplexity.
func TestPerplexityKV(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	text := shared.Path(t, "reference", "stories-sample.txt")
	// A block of 32 tokens and one layer of one kv head: F16 keys and values
	// are 2·32·8·2 bytes; a KV tile is 4 + 2·8 bytes of codes and 32·8
	// elements of 8 or 4 bits.
	const layersHeads = 5 * 4
	tile8, tile4 := 4+16+32*8, 4+16+32*4
	want := map[string]int{
		"f16": layersHeads * 2 * 32 * 8 * 2 / 32,
		"q8":  layersHeads * 2 * tile8 / 32,
		"q4":  layersHeads * 2 * tile4 / 32,
		// 512 tokens: 16 blocks at 4 bits, the two hot ones also at F16.
		"tiered": (16*layersHeads*2*tile4 + 2*layersHeads*2*32*8*2) / 512,
	}
	var lnF16 float64
	for _, kv := range []string{"f16", "q8", "q4", "tiered"} {
		out, stderr, code := run(t, "perplexity", "--model", stories, "--file", text, "--ctx", "512", "--kv", kv)
		if code != 0 {
			t.Fatal(stderr)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		b := regexp.MustCompile(`^kv_bytes_per_token = ([0-9]+)$`).FindStringSubmatch(lines[len(lines)-2])
		p := regexp.MustCompile(`^ppl = ([0-9.]+)$`).FindStringSubmatch(lines[len(lines)-1])
		if b == nil || p == nil {
			t.Fatalf("%s: last lines %q", kv, lines[len(lines)-2:])
		}
		if n, _ := strconv.Atoi(b[1]); n != want[kv] {
			t.Errorf("%s: kv_bytes_per_token = %d, want %d", kv, n, want[kv])
		}
		ppl, _ := strconv.ParseFloat(p[1], 64)
		if kv == "f16" {
			lnF16 = math.Log(ppl)
		} else if d := math.Log(ppl)/lnF16 - 1; d > 0.005 {
			t.Errorf("%s: ln ppl %g is %.3g%% above F16's %g", kv, math.Log(ppl), 100*d, lnF16)
		}
	}
}

// TestBenchDepthKV: bench -d prefills before the timed tokens and reports
// the KV precision and the pool's bytes per token.
func TestBenchDepthKV(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	out, stderr, code := run(t, "bench", "--model", stories, "-p", "0", "-n", "8", "-d", "64", "-r", "1", "-t", "1", "--kv", "q8", "--json")
	if code != 0 {
		t.Fatal(stderr)
	}
	var rs []benchResult
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatal(err)
	}
	// 72 tokens: two blocks at 8 bits and the third, being filled, at F16
	// beside its 8-bit form.
	const block8, block16 = 5 * 4 * 2 * (4 + 16 + 32*8), 5 * 4 * 2 * 32 * 8 * 2
	if len(rs) != 1 || rs[0].Depth != 64 || rs[0].KV != "q8" || rs[0].KVBytesPerToken != (3*block8+block16)/72 {
		t.Fatalf("%+v, want %d bytes a token", rs, (3*block8+block16)/72)
	}
}

// TestGenerateSpeculative: generate's --spec sources (and llama-server's
// flag spellings) give the ids it gives without drafts, report what they
// drafted, and bench --spec prints accept_rate in its JSON; bad flags
// are usage errors.
func TestGenerateSpeculative(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	// The prompt quotes the story stories260K tells from BOS, so the
	// sequence repeats itself and prompt lookup drafts right.
	const story = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. Once upon a time,"
	gen := func(t *testing.T, args ...string) generateResult {
		t.Helper()
		out, stderr, code := run(t, append([]string{"generate", "--model", stories, "--prompt", story, "--temp", "0", "-n", "48", "--json", "-t", "1"}, args...)...)
		if code != 0 {
			t.Fatal(stderr)
		}
		var r generateResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	off := gen(t, "--spec", "off")
	if off.Drafted != 0 {
		t.Fatalf("--spec off drafted %d", off.Drafted)
	}
	// stories260K is too small to gain from drafts: by default it drafts
	// nothing.
	if def := gen(t); def.Drafted != 0 || fmtInts(def.IDs) != fmtInts(off.IDs) {
		t.Fatalf("default: drafted %d, ids %v, want none and %v", def.Drafted, def.IDs, off.IDs)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"ngram", []string{"--spec", "ngram"}},
		{"suffix", []string{"--spec", "suffix", "--spec-max", "4"}},
		{"draft", []string{"-md", stories, "--draft-max", "6", "--draft-min", "2", "--draft-p-min", "0.5", "-td", "1"}},
		{"draft-n", []string{"--spec", "draft", "--model-draft", stories, "--draft", "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := gen(t, tc.args...)
			if fmtInts(r.IDs) != fmtInts(off.IDs) {
				t.Errorf("ids %v, without drafts %v", r.IDs, off.IDs)
			}
			if r.Drafted == 0 || r.Accepted == 0 || r.Accepted > r.Drafted {
				t.Errorf("drafted %d, accepted %d", r.Drafted, r.Accepted)
			}
		})
	}
	t.Run("bench", func(t *testing.T) {
		out, stderr, code := run(t, "bench", "--model", stories, "-p", "0", "-n", "24", "-r", "1", "-t", "1", "--spec", "ngram", "--prompt", story, "--json")
		if code != 0 {
			t.Fatal(stderr)
		}
		var r struct {
			Speculative []specResult `json:"speculative"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Speculative) != 1 || r.Speculative[0].AcceptRate <= 0 || r.Speculative[0].TokensPerS <= 0 || r.Speculative[0].OffTokensPerS <= 0 {
			t.Fatalf("%s", out)
		}
	})
	for _, args := range [][]string{
		{"--spec", "eagle"},
		{"--spec", "draft"},
		{"--spec-max", "0"},
		{"--draft-max", "4", "--draft-min", "5"},
		{"--draft-p-min", "2"},
		{"--draft", "/nonexistent.gguf"},
	} {
		if _, stderr, code := run(t, append([]string{"generate", "--model", stories, "--prompt", story, "-n", "4"}, args...)...); code == 0 {
			t.Errorf("%v: exit 0 (%s)", args, stderr)
		}
	}
}
