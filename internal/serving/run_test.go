package serving

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	_ "github.com/ruvllm/ruvllm/backends/native" // opened by name
	"github.com/ruvllm/ruvllm/internal/httpcheck"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/kvcache"
)

// start runs c until the test ends and returns the server's URL once it
// listens; the error Run returns goes to done.
func start(t *testing.T, c *Config) (url string, done chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan string, 1)
	done = make(chan error, 1)
	go func() { done <- Run(ctx, c, Hooks{OnListen: func(a string) { addrs <- a }}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	select {
	case a := <-addrs:
		return "http://" + a, done
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	return "", nil
}

// waitReady polls /health until it is 200.
func waitReady(t *testing.T, url string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if res, _ := httpcheck.Do(t, "GET", url+"/health", ""); res.StatusCode == 200 {
			return
		}
	}
	t.Fatal("/health never became ok")
}

func config(models ...ModelSpec) *Config {
	return &Config{Log: zerolog.Nop(), Models: models, Host: "127.0.0.1", Ctx: 256, Parallel: 2, Queue: 4, Batch: 32,
		KV: kvcache.F32, MaxAdapters: 4, MaxAdapterBytes: 1 << 20, ShutdownTimeout: time.Second}
}

// TestRunServesModels starts the server from a Config, as a program that
// imports this package would, and checks that it serves what the Config
// names: the models that open, with the ones that do not reported.
func TestRunServesModels(t *testing.T) {
	tiny := testmodel.Synth(t, "tiny", "F32")
	missing := filepath.Join(t.TempDir(), "missing.gguf")
	t.Run("one model", func(t *testing.T) {
		url, _ := start(t, config(ModelSpec{Name: "tiny", Path: tiny}))
		waitReady(t, url)
		res, body := httpcheck.Do(t, "POST", url+"/v1/completions", `{"model":"tiny","prompt":"a b","max_tokens":3,"temperature":0}`,
			"Content-Type", "application/json")
		var r struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if res.StatusCode != 200 || json.Unmarshal(body, &r) != nil || r.Usage.CompletionTokens == 0 {
			t.Fatalf("completion: %d %s", res.StatusCode, body)
		}
	})
	t.Run("one of two missing", func(t *testing.T) {
		url, _ := start(t, config(ModelSpec{Name: "tiny", Path: tiny}, ModelSpec{Name: "gone", Path: missing}))
		waitReady(t, url)
		_, body := httpcheck.Do(t, "GET", url+"/v1/models", "")
		if !strings.Contains(string(body), `"tiny"`) || !strings.Contains(string(body), `"gone"`) || !strings.Contains(string(body), "no model file") {
			t.Fatalf("models: %s", body)
		}
	})
	t.Run("the only model missing", func(t *testing.T) {
		c := config(ModelSpec{Name: "gone", Path: missing})
		err := Run(context.Background(), c, Hooks{})
		if err == nil || !strings.Contains(err.Error(), "no model file") {
			t.Fatalf("Run = %v, want the missing file named", err)
		}
	})
	t.Run("a sparsity the file does not have", func(t *testing.T) {
		half := 0.5
		c := config(ModelSpec{Name: "tiny", Path: tiny})
		c.Backend.Sparsity = &half
		err := Run(context.Background(), c, Hooks{})
		if err == nil || !strings.Contains(err.Error(), "is not sparsified") {
			t.Fatalf("Run = %v, want the sparsity refused", err)
		}
	})
}
