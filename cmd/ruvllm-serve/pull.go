package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ruvllm/ruvllm/models/hub"
)

func init() {
	register("pull", "download a model into the cache ($RUVLLM_CACHE) and print its path", runPull)
	register("health", "exit 0 when a server's /health answers 200: a container's health check without curl", runHealth)
}

// runPull fetches a model before servers need it: several replicas that
// share one cache would otherwise download the same file at once, into the
// same partial file.
func runPull(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("pull", "[--hf OWNER/REPO/FILE.gguf | OWNER/REPO:QUANT]")
	hf := fs.String("hf", "", hfHelp+" (default: "+hub.DefaultModel.String()+")")
	if _, err := fs.parse(args, stdout); err != nil {
		return err
	}
	path, err := resolveModelFile(context.Background(), "", *hf)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, path)
	return nil
}

// runHealth is the image's HEALTHCHECK: the runtime image has no shell and
// no HTTP client but this binary.
func runHealth(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("health", "[--url http://127.0.0.1:8080/health] [--timeout 3s]")
	url := fs.String("url", "http://127.0.0.1:8080/health", "URL that must answer 200")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if _, err := fs.parse(args, stdout); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return fmt.Errorf("%w: --url: %v", errUsage, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", *url, resp.Status, body)
	}
	return nil
}
