package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/pagination"
	"github.com/openai/openai-go/v3/responses"

	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/session"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// modelsOf renders what a config serves: NAME=PATH (or NAME=hf:REF) per
// model, with +TEMPLATE and @ADAPTER-DIR when set.
func modelsOf(c *serveConfig) string {
	var parts []string
	for _, m := range c.models {
		s := m.name + "="
		if m.hf != "" {
			s += "hf:" + m.hf
		} else {
			s += m.path
		}
		if m.chatTemplate != "" {
			s += "+" + m.chatTemplate
		}
		if m.backend != "" {
			s += "/" + m.backend
		}
		if m.adapterDir != "" {
			s += "@" + m.adapterDir
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func TestServeArgs(t *testing.T) {
	yamlConfig := writeFile(t, "ruvllm.yaml", `
model: /models/a.gguf
alias: tiny
port: 9000
parallel: 2
threads: 3
api_key: from-file
cors-origins: [https://a.example, https://b.example]
shutdown-timeout: 3s
adapter-dir: /var/lib/ruvllm/adapters
max_adapters: 3
max-adapter-mb: 64
`)
	jsonConfig := writeFile(t, "ruvllm.json", `{"model": "/models/b.gguf", "ctx": 1024}`)
	badKey := writeFile(t, "bad.yaml", "modle: x\n")
	nested := writeFile(t, "nested.yaml", "model: {path: x}\n")
	modelsConfig := writeFile(t, "models.yaml", `
port: 9001
models:
  - {name: qwen, hf: Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf, adapter_dir: /a/qwen}
  - name: story
    path: /models/stories.gguf
    chat-template: chatml
  - path: /models/x=y.gguf
`)
	modelList := writeFile(t, "model-list.yaml", "model: [/m/a.gguf, b=/m/b.gguf]\n")
	badModels := func(name, models string) string { return writeFile(t, name+".yaml", "models:"+models+"\n") }
	relConfig := writeFile(t, "rel.yaml", "store: kv\nmodels: [{name: a, path: m.gguf, adapter_dir: ad}]\n")
	tests := []struct {
		name  string
		args  []string
		check func(*serveConfig) bool
		// models, when set, is modelsOf the config.
		models string
		err    string
	}{
		{"defaults", nil, func(c *serveConfig) bool {
			return c.host == "127.0.0.1" && c.port == 8080 && c.parallel == 4 && *c.backend.threads == 0 && !c.ctxSet && c.shutdownTimeout == 10*time.Second &&
				c.adapterDir == "" && c.maxAdapters == 8 && c.maxAdapterMB == 512 && c.maxLoaded == 0 && c.keepAlive == session.KeepForever &&
				c.route.name == "auto" && c.route.costWeight == 0 && c.route.store == ""
		}, "=", ""},
		{"on demand and the router", []string{"--max-loaded", "1", "--keep-alive", "90", "--router", "pick", "--route-cost-weight", "0.5",
			"--route-store", "/r.log", "--route-seed", "3", "--route-adapters"}, func(c *serveConfig) bool {
			return c.maxLoaded == 1 && c.keepAlive == 90*time.Second && c.route == routeFlags{name: "pick", costWeight: 0.5, store: "/r.log", seed: 3, adapters: true}
		}, "=", ""},
		{"keep-alive 0 unloads at once", []string{"--keep-alive", "0"}, func(c *serveConfig) bool { return c.keepAlive == time.Nanosecond }, "=", ""},
		{"negative keep-alive keeps", []string{"--keep-alive", "-1m"}, func(c *serveConfig) bool { return c.keepAlive == session.KeepForever }, "=", ""},
		{"bad keep-alive", []string{"--keep-alive", "soon"}, nil, "", "-keep-alive"},
		{"negative max loaded", []string{"--max-loaded", "-1"}, nil, "", "--max-loaded"},
		{"negative cost weight", []string{"--route-cost-weight", "-0.1"}, nil, "", "--route-cost-weight"},
		{"yaml", []string{"--config", yamlConfig}, func(c *serveConfig) bool {
			return c.alias == "tiny" && c.port == 9000 && c.parallel == 2 && c.apiKey == "from-file" && *c.backend.threads == 3 &&
				c.corsOrigins == "https://a.example,https://b.example" && c.shutdownTimeout == 3*time.Second &&
				c.adapterDir == "/var/lib/ruvllm/adapters" && c.maxAdapters == 3 && c.maxAdapterMB == 64
		}, "tiny=/models/a.gguf@/var/lib/ruvllm/adapters", ""},
		{"flags win over the file", []string{"serve", "--port", "7000", "--config", yamlConfig, "--alias", "cli"}, func(c *serveConfig) bool {
			return c.port == 7000 && c.alias == "cli" && c.parallel == 2
		}, "cli=/models/a.gguf@/var/lib/ruvllm/adapters", ""},
		{"json", []string{"--config", jsonConfig}, func(c *serveConfig) bool {
			return c.ctx == 1024 && c.ctxSet
		}, "=/models/b.gguf", ""},
		{"hf", []string{"--hf", "o/r/f.gguf", "--alias", "f"}, nil, "f=hf:o/r/f.gguf", ""},
		{"two models", []string{"--model", "/m/a.gguf", "--model", "b=/m/x=y.gguf"}, nil, "=/m/a.gguf b=/m/x=y.gguf", ""},
		{"adapter dir of the first model", []string{"--model", "a=/m/a.gguf", "--model", "b=/m/b.gguf", "--adapter-dir", "/d"}, nil, "a=/m/a.gguf@/d b=/m/b.gguf", ""},
		{"models in the file", []string{"--config", modelsConfig}, func(c *serveConfig) bool { return c.port == 9001 },
			"qwen=hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf@/a/qwen story=/models/stories.gguf+chatml =/models/x=y.gguf", ""},
		{"a list under model", []string{"--config", modelList}, nil, "=/m/a.gguf b=/m/b.gguf", ""},
		{"--model wins over the file's models", []string{"--config", modelsConfig, "--model", "/m/c.gguf"}, nil, "=/m/c.gguf", ""},
		{"--hf wins over the file's model", []string{"--config", jsonConfig, "--hf", "o/r/f.gguf"}, nil, "=hf:o/r/f.gguf", ""},
		{"unknown option in the file", []string{"--config", badKey}, nil, "", `unknown option "modle"`},
		{"nested value", []string{"--config", nested}, nil, "", "not an option value"},
		{"missing file", []string{"--config", filepath.Join(t.TempDir(), "none.yaml")}, nil, "", "no such file"},
		{"model and hf", []string{"--model", "a", "--hf", "o/r/f.gguf"}, nil, "", "not both"},
		{"no name before =", []string{"--model", "=/m/a.gguf"}, nil, "", "the name before = is empty"},
		{"no path after =", []string{"--model", "a="}, nil, "", "the path after = is empty"},
		{"empty --model", []string{"--model", ""}, nil, "=", ""},
		{"empty model in the file", []string{"--config", writeFile(t, "empty.yaml", "model:\nport: 9002\n")}, func(c *serveConfig) bool { return c.port == 9002 }, "=", ""},
		{"name with a space", []string{"--model", "my model=/m/a.gguf"}, nil, "", "a space"},
		{"two models of one name", []string{"--model", "x=/m/a.gguf", "--model", "x=/m/b.gguf"}, nil, "", `two models are named "x"`},
		{"two files of one name", []string{"--model", "/m/a.gguf", "--model", "/n/a.gguf"}, nil, "", `two models are named "a"`},
		{"alias with two models", []string{"--model", "/m/a.gguf", "--model", "/m/b.gguf", "--alias", "x"}, nil, "", "--alias names the one model"},
		{"alias with a named model", []string{"--model", "n=/m/a.gguf", "--alias", "x"}, nil, "", "--alias names the one model"},
		{"model and models in the file", []string{"--config", badModels("both", " [{path: /a.gguf}]\nmodel: /b.gguf")}, nil, "", "model or models, not both"},
		{"models not a list", []string{"--config", badModels("notlist", " /a.gguf")}, nil, "", "models must be a list"},
		{"models entry not a map", []string{"--config", badModels("notmap", " [/a.gguf]")}, nil, "", "models[0] must be"},
		{"models entry without a file", []string{"--config", badModels("nofile", " [{name: a}]")}, nil, "", "models[0] needs path or hf"},
		{"models entry with two files", []string{"--config", badModels("twofiles", " [{name: a, path: /a.gguf, hf: o/r/f.gguf}]")}, nil, "", "models[0] needs path or hf"},
		{"models entry pulled without a name", []string{"--config", badModels("noname", " [{hf: o/r/f.gguf}]")}, nil, "", "models[0] needs a name"},
		{"models entry with a bad hf", []string{"--config", badModels("badhf", " [{name: a, hf: nothing}]")}, nil, "", "models[0].hf"},
		{"a backend per models entry", []string{"--config", badModels("backends", " [{name: a, path: /a.gguf, backend: gorgonia}, {name: b, path: /a.gguf}]")}, nil, "a=/a.gguf/gorgonia b=/a.gguf", ""},
		{"models entry with an unknown backend", []string{"--config", badModels("nobackend", " [{name: a, path: /a.gguf, backend: cuda}]")}, nil, "", `no backend "cuda"`},
		{"KV memory shared by the models loaded at once", []string{"--model", "a=/a.gguf", "--model", "b=/b.gguf", "--model", "c=/c.gguf", "--kv-memory", "600MB", "--max-loaded", "2"},
			func(c *serveConfig) bool { return c.kvShare() == 300e6 }, "a=/a.gguf b=/b.gguf c=/c.gguf", ""},
		{"KV memory shared by every model", []string{"--model", "a=/a.gguf", "--model", "b=/b.gguf", "--kv-memory", "600MB"},
			func(c *serveConfig) bool { return c.kvShare() == 300e6 }, "a=/a.gguf b=/b.gguf", ""},
		{"models entry with an unknown key", []string{"--config", badModels("badkey", " [{name: a, path: /a.gguf, ctx: 5}]")}, nil, "", `unknown key "ctx"`},
		{"models entry with a list value", []string{"--config", badModels("listval", " [{name: [a], path: /a.gguf}]")}, nil, "", "models[0].name must be a string"},
		{"models of one name", []string{"--config", badModels("dup", " [{name: a, path: /a.gguf}, {name: a, path: /b.gguf}]")}, nil, "", `two models are named "a"`},
		{"models sharing an adapter dir", []string{"--config", badModels("shared", " [{path: /a.gguf, adapter_dir: /d}, {path: /b.gguf, adapter_dir: /d/}]")}, nil, "", "two models have the adapter directory"},
		{"--adapter-dir and the first model's adapter_dir", []string{"--config", badModels("twodirs", " [{path: /a.gguf, adapter_dir: /d}]"), "--adapter-dir", "/e"}, nil, "", "already sets"},
		{"key and key file", []string{"--api-key", "a", "--api-key-file", "f"}, nil, "", "not both"},
		{"bad port", []string{"--port", "70000"}, nil, "", "--port"},
		{"zero parallel", []string{"--parallel", "0"}, nil, "", "--parallel"},
		{"zero max adapters", []string{"--max-adapters", "0"}, nil, "", "--max-adapters"},
		{"huge adapter limit", []string{"--max-adapter-mb", "9223372036854775807"}, nil, "", "--max-adapter-mb"},
		{"vLLM's positional model", []string{"model.gguf"}, nil, "=model.gguf", ""},
		{"stray argument", []string{"a.gguf", "b.gguf"}, nil, "", "unexpected argument"},
		{"a config file's paths are its own", []string{"--config", relConfig}, func(c *serveConfig) bool {
			return c.models[0].adapterDir == filepath.Join(filepath.Dir(relConfig), "ad") && c.store == filepath.Join(filepath.Dir(relConfig), "kv")
		}, "a=" + filepath.Join(filepath.Dir(relConfig), "m.gguf") + "@" + filepath.Join(filepath.Dir(relConfig), "ad"), ""},
		{"llama-server defaults", nil, func(c *serveConfig) bool {
			return c.llama.nPredict == -1 && c.llama.slots && c.llama.slotSavePath == "" && !c.llama.anyModel && !c.llama.publicModels &&
				c.llama.sampling() == nil
		}, "", ""},
		{"llama-server flags", []string{"-n", "64", "--seed", "42", "--temp", "0.5", "--no-slots", "--slot-save-path", t.TempDir(),
			"--accept-any-model", "--public-models"}, func(c *serveConfig) bool {
			p := c.llama.sampling()
			return c.llama.nPredict == 64 && !c.llama.slots && c.llama.slotSavePath != "" && c.llama.anyModel && c.llama.publicModels &&
				p != nil && *p.Seed == 42 && p.Temperature == 0.5 && p.TopK == 40
		}, "", ""},
		{"--slots after --no-slots", []string{"--no-slots", "--slots"}, func(c *serveConfig) bool { return c.llama.slots }, "", ""},
		{"seed -1 is random", []string{"--seed", "-1"}, func(c *serveConfig) bool { return c.llama.sampling() == nil }, "", ""},
		{"bad n-predict", []string{"--n-predict", "-2"}, nil, "", "--n-predict"},
		{"bad temperature", []string{"--temp", "3"}, nil, "", "temperature"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if len(args) > 0 && args[0] == "serve" {
				args = args[1:]
			}
			c, err := parseServeArgs(quietEnv(), args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				// Wrong flags and models are usage errors (exit 2); a
				// file that cannot be read or has unknown options is not.
				if !errors.Is(err, errUsage) && !strings.Contains(tc.err, "no such file") && !strings.Contains(tc.err, "option") {
					t.Errorf("%v is not a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil && !tc.check(c) {
				t.Errorf("config %+v", c)
			}
			if got := modelsOf(c); tc.models != "" && got != tc.models {
				t.Errorf("models %q, want %q", got, tc.models)
			}
		})
	}
}

func TestAPIKeyFile(t *testing.T) {
	c := &serveConfig{keyFile: writeFile(t, "keys", "# keys\nk1\n\n  k2  \n")}
	keys, err := c.apiKeys()
	if err != nil || len(keys) != 2 || keys[0] != "k1" || keys[1] != "k2" {
		t.Fatalf("keys %q, %v", keys, err)
	}
	c.keyFile = writeFile(t, "empty", "# none\n")
	if _, err := c.apiKeys(); err == nil {
		t.Error("a key file without keys was accepted")
	}
}

// startServe runs serve with c on a free port and returns its address and
// its result.
func startServe(t *testing.T, ctx context.Context, c *serveConfig) (string, <-chan error) {
	t.Helper()
	c.host, c.port = "127.0.0.1", 0
	addrs := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, c, serveHooks{onListen: func(a string) { addrs <- a }}) }()
	select {
	case a := <-addrs:
		return "http://" + a, done
	case err := <-done:
		t.Fatalf("serve ended before listening: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not listen")
	}
	return "", nil
}

// serveSDK starts serve with c until ctx ends, waits until it is healthy,
// and returns its address, an SDK client that sends key, and serve's
// result.
func serveSDK(t *testing.T, ctx context.Context, c *serveConfig, key string) (string, openai.Client, <-chan error) {
	t.Helper()
	base, done := startServe(t, ctx, c)
	waitHealthy(t, base)
	return base, openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0)), done
}

func waitHealthy(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			if resp.StatusCode != 503 {
				t.Fatalf("/health: %d", resp.StatusCode)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the server did not become healthy")
}

// testServeConfig serves the synthesized tiny model ("tiny-F32"): these
// tests are about the command, not about what a model writes, so they run
// without ../shared. extra are more flags.
func testServeConfig(t *testing.T, extra ...string) *serveConfig {
	args := []string{"--model", testmodel.Synth(t, "tiny", "F32"), "--chat-template", "chatml", "--parallel", "2", "--threads", "1"}
	c, err := parseServeArgs(quietEnv(), append(args, extra...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServe runs the serve command on a synthesized model and talks to it with the
// official SDK, with an API key from a file and an alias; then it shuts the
// server down while a stream is running: the stream finishes, serve
// returns nil, and the port is closed.
func TestServe(t *testing.T) {
	c := testServeConfig(t, "--alias", "storyteller")
	c.keyFile = writeFile(t, "keys", "secret\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, client, done := serveSDK(t, ctx, c, "secret")
	r, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:       "storyteller",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story.")},
		MaxTokens:   openai.Int(16),
		Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 OpenAI deprecates system_fingerprint but still sends it, and so do we
	if r.Model != "storyteller" || r.Choices[0].Message.Content == "" || r.SystemFingerprint != version {
		t.Errorf("%+v", r)
	}
	wrong := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("guess"), option.WithMaxRetries(0))
	_, err = wrong.Models.List(ctx)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Errorf("wrong key: %v", err)
	}

	// A stream in flight when the signal comes is allowed to finish.
	req, _ := http.NewRequest("POST", base+"/v1/completions", strings.NewReader(`{"prompt":"Once upon a time","max_tokens":300,"stream":true}`))
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatal("no first event")
	}
	cancel()
	last := ""
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			last = l
		}
	}
	if last != "data: [DONE]" {
		t.Errorf("the in-flight stream ended with %q", last)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after the signal")
	}
	if _, err := http.Get(base + "/health"); err == nil {
		t.Error("the server still answers after shutting down")
	}
}

// TestServeShutdownCancels gives in-flight requests no grace: a stream that
// would run for long is cut off and serve returns at once.
func TestServeShutdownCancels(t *testing.T) {
	c := testServeConfig(t)
	c.shutdownTimeout = 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done := startServe(t, ctx, c)
	waitHealthy(t, base)
	resp, err := http.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"Once upon a time","stream":true,"max_tokens":400,"min_p":0,"top_k":0,"temperature":2,"logit_bias":{"2":-100}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Scan()
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	for sc.Scan() {
		if sc.Text() == "data: [DONE]" {
			t.Error("the cancelled stream completed")
		}
	}
}

// TestServeLoadFailure reports a model that cannot be loaded.
func TestServeLoadFailure(t *testing.T) {
	c, err := parseServeArgs(quietEnv(), []string{"--model", writeFile(t, "bad.gguf", "not a gguf file")})
	if err != nil {
		t.Fatal(err)
	}
	_, done := startServe(t, context.Background(), c)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a broken model file was served")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not fail")
	}
}

// TestServeAdapters starts the server with an adapter directory holding
// one PEFT adapter: it is listed and used by name; an upload with curl's
// form fields is stored; an adapter that does not fit the model is left
// out at start without stopping the server.
func TestServeAdapters(t *testing.T) {
	dir := t.TempDir()
	c := testServeConfig(t, "--adapter-dir", dir)
	cfg := testmodel.Load(t, c.models[0].path).Config
	a, err := lora.Random(cfg, lora.RandomSpec{Rank: 4, Seed: 1, Amplitude: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WritePEFT(filepath.Join(dir, "tales"), cfg); err != nil {
		t.Fatal(err)
	}
	other := *cfg
	other.FFN *= 2
	misfit, err := lora.Random(&other, lora.RandomSpec{Rank: 2, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := misfit.WriteGGUF(filepath.Join(dir, "misfit.gguf"), kernels.F32); err != nil {
		t.Fatal(err)
	}
	ggufPath := filepath.Join(t.TempDir(), "upload.gguf")
	if err := a.WriteGGUF(ggufPath, kernels.F32); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, client, done := serveSDK(t, ctx, c, "unused")
	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 2 || page.Data[1].ID != "tales" || page.Data[1].JSON.ExtraFields["parent"].Raw() != `"tiny-F32"` {
		t.Errorf("models %+v", page.Data)
	}
	complete := func(model string) string {
		t.Helper()
		r, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model:       openai.CompletionNewParamsModel(model),
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			MaxTokens:   openai.Int(16),
			Temperature: openai.Float(0),
		})
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		return r.Choices[0].Text
	}
	plain, tales := complete("tiny-F32"), complete("tales")
	if plain == tales {
		t.Errorf("the adapter changes nothing: %q", tales)
	}

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("name", "uploaded")
	w, _ := mw.CreateFormFile("file", "upload.gguf")
	g, err := os.ReadFile(ggufPath)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(g)
	mw.Close()
	resp, err := http.Post(base+"/v1/adapters", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	if got := complete("tiny-F32:uploaded"); got != tales {
		t.Errorf("the uploaded GGUF of the same adapter writes %q, the PEFT one %q", got, tales)
	}
	if _, err := os.Stat(filepath.Join(dir, "uploaded.gguf")); err != nil {
		t.Errorf("the upload is not in the adapter directory: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// TestServeModels serves two models from the models: list of a --config
// file, the second with an adapter directory: both are listed, each
// answers to its own name with its own engine, "" goes to the first, and
// the adapter is the second's alone.
func TestServeModels(t *testing.T) {
	pathA, pathB := testmodel.Synth(t, "tiny", "F32"), testmodel.Synth(t, "tiny", "Q8_0")
	dir := t.TempDir()
	a, err := lora.Random(testmodel.Load(t, pathB).Config, lora.RandomSpec{Rank: 2, Seed: 1, Amplitude: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WriteGGUF(filepath.Join(dir, "tales.gguf"), kernels.F32); err != nil {
		t.Fatal(err)
	}
	config := writeFile(t, "models.yaml", fmt.Sprintf(`
models:
  - {name: a, path: %q}
  - {name: b, path: %q, chat_template: chatml, adapter_dir: %q}
parallel: 1
threads: 1
`, pathA, pathB, dir))
	c, err := parseServeArgs(quietEnv(), []string{"--config", config})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, client, done := serveSDK(t, ctx, c, "unused")
	// The server is healthy once the first model is served; the second
	// follows.
	var page *pagination.Page[openai.Model]
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if page, err = client.Models.List(ctx); err != nil {
			t.Fatal(err)
		}
		if len(page.Data) == 4 || time.Now().After(deadline) {
			break
		}
	}
	var listed []string
	for _, m := range page.Data {
		listed = append(listed, m.ID+"<"+strings.Trim(m.JSON.ExtraFields["parent"].Raw(), `"`))
	}
	if want := []string{"a<null", "b<null", "tales<b", "auto<null"}; !slices.Equal(listed, want) {
		t.Errorf("models %v, want %v", listed, want)
	}
	for _, tc := range []struct{ model, answer string }{{"", "a"}, {"a", "a"}, {"b", "b"}, {"tales", "tales"}, {"b:tales", "b:tales"}} {
		r, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:     tc.model,
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
			MaxTokens: openai.Int(4),
		})
		if err != nil || r.Model != tc.answer {
			t.Errorf("model %q: %+v, %v; want an answer from %q", tc.model, r, err, tc.answer)
		}
	}
	// The router chooses among a and b (adapters are not its arms unless
	// --route-adapters) and says so.
	var raw *http.Response
	r, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "auto", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}, MaxTokens: openai.Int(4),
	}, option.WithResponseInto(&raw))
	if err != nil || (r.Model != "a" && r.Model != "b") || !strings.HasPrefix(raw.Header.Get("X-Route"), r.Model+"; ") {
		t.Errorf("model auto: %+v, %v", r, err)
	}
	for _, model := range []string{"c", "a:tales"} {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}, MaxTokens: openai.Int(4),
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || !strings.Contains(apiErr.Message, `"a" and "b"`) {
			t.Errorf("model %q: %v", model, err)
		}
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`ruvllm_model_requests_running{model="a"} 0`, `ruvllm_model_requests_running{model="b"} 0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// TestExampleConfig checks that the example configuration parses.
func TestExampleConfig(t *testing.T) {
	c, err := parseServeArgs(quietEnv(), []string{"--config", filepath.Join("..", "..", "configs", "ruvllm.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	if c.maxAdapters != 8 || c.maxAdapterMB != 512 || c.adapterDir != "" || c.kv.kv != "tiered" {
		t.Errorf("config %+v", c)
	}
}

// TestKVDefaults checks which KV cache each command starts with when --kv
// is not given: serve the tiered one, the measuring tools F16 as
// llama.cpp's do.
func TestKVDefaults(t *testing.T) {
	c, err := parseServeArgs(quietEnv(), []string{"--model", "m.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	if c.kv.kv != "tiered" || c.kv.hot != 64 {
		t.Errorf("serve: --kv %q --kv-hot %d, want tiered 64", c.kv.kv, c.kv.hot)
	}
	for _, cmd := range []string{"bench", "perplexity"} {
		t.Run(cmd, func(t *testing.T) {
			out, errOut, _ := run(t, cmd, "--help")
			if help := out + errOut; !regexp.MustCompile(`-kv string\n.*\(default "f16"\)`).MatchString(help) {
				t.Errorf("%s --help does not give --kv's default as f16:\n%s", cmd, help)
			}
		})
	}
}

func TestParseByteSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true},
		{"512MiB", 512 << 20, true},
		{"512M", 512 << 20, true},
		{"2GB", 2e9, true},
		{"1.5 GiB", 3 << 29, true},
		{"64k", 64 << 10, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"-5MB", 0, false},
		{"12 parsecs", 0, false},
		{"99999999TB", 0, false},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := parseByteSize(c.in)
			if (err == nil) != c.ok || (c.ok && got != c.want) {
				t.Fatalf("parseByteSize(%q) = %d, %v; want %d (ok %v)", c.in, got, err, c.want, c.ok)
			}
		})
	}
}

// TestServeResponseStore: with --response-store, a stored response outlives
// the server: the next server over the directory returns it and continues
// its conversation.
func TestServeResponseStore(t *testing.T) {
	dir := t.TempDir()
	run := func() (context.CancelFunc, openai.Client, <-chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		_, client, done := serveSDK(t, ctx, testServeConfig(t, "--response-store", dir), "")
		return cancel, client, done
	}
	stop := func(cancel context.CancelFunc, done <-chan error) {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	cancel, client, done := run()
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi")},
		MaxOutputTokens: openai.Int(4)})
	if err != nil {
		t.Fatal(err)
	}
	stop(cancel, done)
	if _, err := os.Stat(filepath.Join(dir, r.ID+".json")); err != nil {
		t.Fatal(err)
	}

	cancel, client, done = run()
	defer stop(cancel, done)
	got, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != r.OutputText() {
		t.Fatalf("after a restart: %v %+v", err, got)
	}
	next, err := client.Responses.New(ctx, responses.ResponseNewParams{PreviousResponseID: openai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("More")}, MaxOutputTokens: openai.Int(4)})
	if err != nil || next.PreviousResponseID != r.ID || next.Usage.InputTokens <= r.Usage.InputTokens {
		t.Fatalf("continued after a restart: %v %+v", err, next)
	}
}

// TestServeLlamaServer serves with llama-server's flags: the server's
// token limit and seed, /slots and the slot actions' directory, any model
// name, and /props naming the model file.
func TestServeLlamaServer(t *testing.T) {
	dir := t.TempDir()
	c := testServeConfig(t, "--n-predict", "3", "--seed", "42", "--slots", "--slot-save-path", dir, "--accept-any-model", "--ctx", "128")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, client, done := serveSDK(t, ctx, c, "")
	get := func(method, path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || json.Unmarshal(b, &v) != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return v
	}
	r := get("POST", "/completion", `{"prompt":"Once upon a time","ignore_eos":true,"id_slot":1}`)
	gs, _ := r["generation_settings"].(map[string]any)
	if r["tokens_predicted"] != 3.0 || gs["n_predict"] != 3.0 || gs["seed"] != 42.0 || r["id_slot"] != 1.0 {
		t.Errorf("/completion: %v", r)
	}
	p := get("GET", "/props", "")
	def, _ := p["default_generation_settings"].(map[string]any)
	if p["total_slots"] != 2.0 || !strings.HasSuffix(p["model_path"].(string), ".gguf") || def["n_ctx"] != 128.0 {
		t.Errorf("/props: %v", p)
	}
	if s := get("POST", "/slots/1?action=save", `{"filename":"s.bin"}`); s["n_saved"] != r["tokens_cached"] {
		t.Errorf("save: %v, the completion cached %v", s, r["tokens_cached"])
	}
	if _, err := os.Stat(filepath.Join(dir, "s.bin")); err != nil {
		t.Error(err)
	}
	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "gpt-3.5-turbo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story.")},
	})
	if err != nil || chat.Model != "gpt-3.5-turbo" || chat.Usage.CompletionTokens > 3 {
		t.Errorf("chat under any name: %v %+v", err, chat)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestServeOneModelOfSeveralFails: a model of several that cannot be
// opened is listed as failed with its reason, a request for it gets a 503
// that says why, and the others are served (issue 34).
func TestServeOneModelOfSeveralFails(t *testing.T) {
	good := testmodel.Synth(t, "tiny", "F32")
	missing := filepath.Join(t.TempDir(), "missing.gguf")
	c, err := parseServeArgs(quietEnv(), []string{"--model", "good=" + good, "--model", "gone=" + missing, "--chat-template", "chatml", "--threads", "1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, client, done := serveSDK(t, ctx, c, "")
	if _, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "good", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Hi")},
		MaxTokens: openai.Int(2)}); err != nil {
		t.Errorf("the good model: %v", err)
	}
	var apiErr *openai.Error
	if _, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "gone", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Hi")},
		MaxTokens: openai.Int(2)}); !errors.As(err, &apiErr) || apiErr.StatusCode != 503 || !strings.Contains(apiErr.Message, "missing.gguf") {
		t.Errorf("the failed model: %v", err)
	}
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"id":"gone"`) || !strings.Contains(string(b), `"value":"failed"`) {
		t.Errorf("/v1/models: %s", b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
