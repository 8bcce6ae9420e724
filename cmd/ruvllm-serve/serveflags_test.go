package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLlamaServerCommandLines parses llama-server's and vLLM's command
// lines: their flags are serve's, and their environment variables too,
// the command line winning over the environment and the environment over
// --config.
func TestLlamaServerCommandLines(t *testing.T) {
	model := filepath.Join(t.TempDir(), "m.gguf")
	config := writeFile(t, "c.yaml", "port: 7003\nparallel: 3\n")
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c *serveConfig)
	}{
		{"llama-server's flags", []string{"-m", model, "-c", "4096", "-np", "4", "--port", "7001", "-ngl", "99", "-fa", "on", "--jinja", "--metrics", "-a", "mine", "-t", "2"}, nil,
			func(t *testing.T, c *serveConfig) {
				if len(c.models) != 1 || c.models[0].path != model || c.ctx != 1024 || c.parallel != 4 || c.port != 7001 || c.alias != "mine" || *c.backend.threads != 2 {
					t.Errorf("config %+v ctx %d parallel %d port %d alias %q", c.models, c.ctx, c.parallel, c.port, c.alias)
				}
			}},
		{"vLLM's positional model", []string{model, "--port", "7002"}, nil,
			func(t *testing.T, c *serveConfig) {
				if len(c.models) != 1 || c.models[0].path != model {
					t.Errorf("models %+v", c.models)
				}
			}},
		{"hf-repo and hf-file", []string{"--hf-repo", "owner/repo", "--hf-file", "x-q4_k_m.gguf"}, nil,
			func(t *testing.T, c *serveConfig) {
				if c.hf != "owner/repo/x-q4_k_m.gguf" {
					t.Errorf("hf %q", c.hf)
				}
			}},
		{"the environment", []string{"-m", model}, map[string]string{"LLAMA_ARG_CTX_SIZE": "600", "LLAMA_ARG_N_PARALLEL": "3", "RUVLLM_HOST": "0.0.0.0"},
			func(t *testing.T, c *serveConfig) {
				if c.ctx != 200 || c.parallel != 3 || c.host != "0.0.0.0" {
					t.Errorf("ctx %d parallel %d host %q", c.ctx, c.parallel, c.host)
				}
			}},
		// The command line llama.cpp's server test suite (tools/server/tests/
		// utils.py) builds, with every flag it may give but the drafts'.
		{"llama.cpp's test suite", []string{"--host", "127.0.0.1", "--port", "8080", "--temp", "0.8", "--seed", "42", "--offline",
			"--model", model, "--batch-size", "1024", "--ubatch-size", "1024", "--threads", "1", "--n-gpu-layers", "0", "--cont-batching",
			"--embedding", "--metrics", "--slots", "--alias", "tinyllama-2", "--ctx-size", "512", "--parallel", "2", "-ctk", "q8_0", "-ctv", "q8_0",
			"-fa", "on", "--n-predict", "64", "--slot-save-path", t.TempDir(), "--verbose", "--grp-attn-n", "1", "--grp-attn-w", "1",
			"--no-webui", "--jinja", "--reasoning-format", "deepseek", "--reasoning-budget", "0", "--chat-template-file", model, "--pooling", "mean"}, nil,
			func(t *testing.T, c *serveConfig) {
				if c.batch != 1024 || c.kv.kv != "q8" || !c.llama.verbose || !c.llamaCompat.offline || c.chatTemplate != model || c.ctx != 256 || c.llama.nPredict != 64 {
					t.Errorf("batch %d kv %q verbose %v offline %v template %q ctx %d n-predict %d", c.batch, c.kv.kv, c.llama.verbose, c.llamaCompat.offline, c.chatTemplate, c.ctx, c.llama.nPredict)
				}
			}},
		{"short spellings", []string{"-mu", model, "-b", "64", "-ub", "32", "-ctk", "f32", "-ctv", "F32", "-v"}, nil,
			func(t *testing.T, c *serveConfig) {
				if len(c.models) != 1 || c.models[0].path != model || c.batch != 64 || c.kv.kv != "f32" || !c.llama.verbose {
					t.Errorf("models %+v batch %d kv %q verbose %v", c.models, c.batch, c.kv.kv, c.llama.verbose)
				}
			}},
		{"hfr and hff", []string{"-hfr", "owner/repo", "-hff", "x-q8_0.gguf"}, nil,
			func(t *testing.T, c *serveConfig) {
				if c.hf != "owner/repo/x-q8_0.gguf" {
					t.Errorf("hf %q", c.hf)
				}
			}},
		{"command line over environment over config", []string{"-m", model, "--config", config, "--port", "7004"}, map[string]string{"RUVLLM_PORT": "7005", "RUVLLM_PARALLEL": "5"},
			func(t *testing.T, c *serveConfig) {
				if c.port != 7004 || c.parallel != 5 {
					t.Errorf("port %d parallel %d", c.port, c.parallel)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := parseServeArgs(quietEnv(), tc.args)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"ctx and ctx-size", []string{"-m", model, "--ctx", "100", "-c", "400"}, "not both"},
		{"hf-file alone", []string{"--hf-file", "x.gguf"}, "needs --hf-repo"},
		{"a bad environment value", []string{"-m", model}, "LLAMA_ARG_PORT"},
		{"two arguments", []string{model, model}, "unexpected argument"},
		{"K and V cache types differ", []string{"-m", model, "-ctk", "q8_0"}, "differ"},
		{"a cache type this server lacks", []string{"-m", model, "-ctk", "q5_1", "-ctv", "q5_1"}, "-ctk q5_1 is not supported"},
		{"--kv and -ctk", []string{"-m", model, "--kv", "f16", "-ctk", "f16"}, "not both"},
		{"context shift", []string{"-m", model, "--context-shift"}, "--context-shift is not supported"},
		{"reranking", []string{"-m", model, "--reranking"}, "no /rerank"},
		{"pooling last", []string{"-m", model, "--pooling", "last"}, "--pooling last is not supported"},
		{"self-extend", []string{"-m", model, "--grp-attn-n", "4"}, "self-extend"},
		{"a projector", []string{"-m", model, "--mmproj-url", "http://x/p.gguf"}, "--mmproj-url is not supported"},
		{"a bad micro-batch", []string{"-m", model, "-ub", "0"}, "positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "a bad environment value" {
				t.Setenv("LLAMA_ARG_PORT", "eighty")
			}
			if _, err := parseServeArgs(quietEnv(), tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}
