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
