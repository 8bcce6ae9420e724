package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/api/ollama"
	"github.com/ruvllm/ruvllm/models/hub"
	"github.com/ruvllm/ruvllm/session"
)

func init() {
	register("pull", "download a model into the cache ($RUVLLM_CACHE) and print its path: OWNER/REPO[:QUANT], OWNER/REPO/FILE.gguf, hf.co/OWNER/REPO:QUANT", runPull)
	register("health", "exit 0 when a server's /health answers 200: a container's health check without curl", runHealth)
}

// runPull fetches a model before servers need it: several replicas that
// share one cache would otherwise download the same file at once, into the
// same partial file.
func runPull(e *env, args []string) error {
	fs := newFlags("pull", "[OWNER/REPO[:QUANT] | OWNER/REPO/FILE.gguf | hf.co/OWNER/REPO:QUANT ...] [--hf NAME]")
	hf := fs.String("hf", "", hfHelp+" (default: "+hub.DefaultModel.String()+")")
	names, err := fs.parse(args, e.stdout)
	if err != nil {
		return err
	}
	if *hf != "" {
		names = append([]string{*hf}, names...)
	}
	if len(names) == 0 {
		names = []string{""} // the default model
	}
	for _, name := range names {
		ref := hub.DefaultModel
		if name != "" {
			r, err := pullRef(name)
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			ref = r
		}
		path, err := (&hub.Client{}).Pull(context.Background(), ref)
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, path)
	}
	return nil
}

// runHealth is the image's HEALTHCHECK: the runtime image has no shell and
// no HTTP client but this binary.
func runHealth(e *env, args []string) error {
	fs := newFlags("health", "[--url http://127.0.0.1:8080/health] [--timeout 3s]")
	url := fs.String("url", "http://127.0.0.1:8080/health", "URL that must answer 200")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if _, err := fs.parse(args, e.stdout); err != nil {
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

// pullFunc is what ollama's POST /api/pull runs: it downloads a GGUF file
// of the Hugging Face Hub into the cache, as the pull command does, one
// pull at a time (two pulls of one file would write the same partial
// file). nil turns the route off (--pull=false).
func pullFunc(on bool, log zerolog.Logger) ollama.PullFunc {
	if !on {
		return nil
	}
	turn := make(chan struct{}, 1)
	return func(ctx context.Context, name string, progress func(ollama.PullProgress)) error {
		ref, err := pullRef(name)
		if err != nil {
			return session.Invalid("model", session.CodeInvalidValue, "%v", err)
		}
		progress(ollama.PullProgress{Status: "pulling manifest"})
		select {
		case turn <- struct{}{}:
			defer func() { <-turn }()
		case <-ctx.Done():
			return session.ErrClientGone
		}
		var digest string
		reported := false
		client := &hub.Client{Progress: io.Discard, OnProgress: func(p hub.Progress) {
			reported, digest = true, p.SHA256
			progress(pullProgress(p.File, p.SHA256, p.Total, p.Completed))
		}}
		start := time.Now()
		path, err := client.Pull(ctx, ref)
		if err != nil {
			if errors.Is(err, hub.ErrNotFound) {
				return session.NotFound("model", session.CodeModelNotFound, "%v", err)
			}
			return &session.Error{Status: http.StatusBadGateway, Type: session.TypeServer, Message: err.Error()}
		}
		switch {
		case !reported:
			// In the cache already: nothing to download.
			if st, err := os.Stat(path); err == nil {
				progress(pullProgress(filepath.Base(path), "", st.Size(), st.Size()))
			}
		case digest != "":
			// The download was checked against it as it ended.
			progress(ollama.PullProgress{Status: "verifying sha256 digest"})
		}
		log.Info().Str("model", ref.String()).Str("path", path).Dur("took_ms", time.Since(start)).Msg("model pulled")
		return nil
	}
}

// pullProgress is a download's progress as ollama's status line: "pulling"
// and the digest's first 12 hex digits (or the file's name when the
// digest is not known).
func pullProgress(file, sha string, total, completed int64) ollama.PullProgress {
	p := ollama.PullProgress{Status: "pulling " + path.Base(file), Total: total, Completed: completed}
	if sha != "" {
		p.Status, p.Digest = "pulling "+sha[:min(12, len(sha))], "sha256:"+sha
	}
	return p
}

// pullRef reads the model an /api/pull names: a Hugging Face reference as
// --hf takes it (OWNER/REPO/FILE.gguf, OWNER/REPO:QUANT, OWNER/REPO), also
// written as ollama writes them (hf.co/OWNER/REPO:QUANT, with ":latest"
// for the default quantization).
func pullRef(name string) (hub.Ref, error) {
	ref, err := hub.ParseRef(name)
	if err != nil {
		return hub.Ref{}, fmt.Errorf("%s is not a Hugging Face GGUF reference: models are pulled from the Hugging Face Hub "+
			"(OWNER/REPO[:QUANT], OWNER/REPO/FILE.gguf or hf.co/OWNER/REPO:QUANT), not from ollama's library", session.Quote(name))
	}
	return ref, nil
}
