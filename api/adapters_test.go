package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// testAdapterBytes is the upload limit of the adapter tests; the adapters
// of the tiny model and stories260K take a few hundred KiB at most.
const testAdapterBytes = 1 << 20

// adapterFiles is a random adapter as the files a client uploads.
type adapterFiles struct {
	a               *lora.Adapter
	config, weights []byte // PEFT
	gguf            []byte
}

// makeAdapter makes a random adapter strong enough to change what
// a model writes, and its PEFT and GGUF files.
func makeAdapter(t *testing.T, cfg *models.Config, rank int, seed uint64) adapterFiles {
	t.Helper()
	a, err := lora.Random(cfg, lora.RandomSpec{Rank: rank, Seed: seed, Amplitude: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := a.WritePEFT(filepath.Join(dir, "peft"), cfg); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteGGUF(filepath.Join(dir, "a.gguf"), kernels.F32); err != nil {
		t.Fatal(err)
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return adapterFiles{a: a, config: read("peft/" + lora.PEFTConfigFile), weights: read("peft/" + lora.PEFTWeightsFile), gguf: read("a.gguf")}
}

// formFile is a file part of an upload.
type formFile struct {
	filename string
	body     []byte
}

func (f adapterFiles) peftParts() []formFile {
	return []formFile{{lora.PEFTConfigFile, f.config}, {lora.PEFTWeightsFile, f.weights}}
}

// postForm uploads as `curl -F name=... -F file=@...` does: text fields,
// then each file as a part named "file" with its file name.
func postForm(t *testing.T, base string, fields [][2]string, files ...formFile) (*http.Response, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		w, err := mw.CreateFormFile("file", f.filename)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(f.body)
	}
	mw.Close()
	resp, err := http.Post(base+"/v1/adapters", mw.FormDataContentType(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func named(name string) [][2]string { return [][2]string{{"name", name}} }

// dirEntries lists the adapter directory.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, de := range des {
		names = append(names, de.Name())
	}
	slices.Sort(names)
	return names
}

// wantError checks an OpenAI-shaped error response.
func wantError(t *testing.T, what string, resp *http.Response, b []byte, status int, code, msgPart string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s: status %d, want %d: %s", what, resp.StatusCode, status, b)
		return
	}
	e := decode[wireError](t, b)
	if deref(e.Error.Code) != code || !strings.Contains(e.Error.Message, msgPart) {
		t.Errorf("%s: code %q message %q; want code %q and a message with %q", what, deref(e.Error.Code), e.Error.Message, code, msgPart)
	}
}

// completeText is a greedy completion of "Once upon a time" through the
// SDK, with extra request options.
func completeText(t *testing.T, c openai.Client, model string, opts ...option.RequestOption) (*openai.Completion, error) {
	t.Helper()
	return c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:       openai.CompletionNewParamsModel(model),
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens:   openai.Int(24),
		Temperature: openai.Float(0),
	}, opts...)
}

// engineText runs the same completion on the engine directly with
// adapter a at scale (0: 1), the reference for what the API must give.
func engineText(t *testing.T, rs *realServer, a *lora.Adapter, scale float32) string {
	t.Helper()
	tok := rs.model.Tokenizer
	p := backends.DefaultParams()
	p.Temperature = 0
	st, err := rs.engine.Submit(context.Background(), backends.Request{
		Prompt: session.EncodePrompt(tok, "Once upon a time"), MaxTokens: 24, Sampling: p, TopLogprobs: -1, Adapter: a, AdapterScale: scale,
	})
	if err != nil {
		t.Fatal(err)
	}
	dec := tok.NewDecoderWith(tokenizer.DecodeOptions{Continuation: true})
	var text strings.Builder
	for ev := range st.Events {
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
		if ev.Token != nil {
			text.WriteString(dec.Add(ev.Token.ID))
		}
	}
	text.WriteString(dec.Flush())
	return text.String()
}

// TestAdapterLifecycle uploads a PEFT adapter as curl -F does, finds it
// listed, uses it by name from the OpenAI SDK (bare and as BASE:ADAPTER),
// and deletes it.
func TestAdapterLifecycle(t *testing.T) {
	dir := t.TempDir()
	rs := startRealServer(t, realOptions{parallel: 2, adapterDir: dir, maxAdapterBytes: testAdapterBytes})
	alpha := makeAdapter(t, rs.model.Config, 4, 1)
	ctx := context.Background()

	resp, b := postForm(t, rs.URL, [][2]string{{"name", "alpha"}, {"base_model", rs.id}}, alpha.peftParts()...)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	obj := decode[adapterObject](t, b)
	if obj.ID != "alpha" || obj.Object != "lora_adapter" || obj.Format != lora.FormatPEFT || obj.Rank != 4 || obj.BaseModel != rs.id ||
		obj.Targets != len(alpha.a.Targets()) || !obj.Resident || obj.FileBytes != int64(len(alpha.config)+len(alpha.weights)) || obj.Created == 0 {
		t.Errorf("upload answered %s", b)
	}
	if loc := resp.Header.Get("Location"); loc != "/v1/adapters/alpha" {
		t.Errorf("Location %q", loc)
	}
	if got := dirEntries(t, dir); !slices.Equal(got, []string{"alpha"}) {
		t.Errorf("adapter directory holds %v", got)
	}
	if got := dirEntries(t, filepath.Join(dir, "alpha")); !slices.Equal(got, []string{lora.PEFTConfigFile, lora.PEFTWeightsFile}) {
		t.Errorf("alpha/ holds %v", got)
	}

	_, b = do(t, "GET", rs.URL+"/v1/adapters", "")
	if l := decode[adapterList](t, b); l.Object != "list" || len(l.Data) != 1 || l.Data[0].ID != "alpha" {
		t.Errorf("list: %s", b)
	}
	if resp, b := do(t, "GET", rs.URL+"/v1/adapters/alpha", ""); resp.StatusCode != 200 || decode[adapterObject](t, b).ID != "alpha" {
		t.Errorf("get: %d %s", resp.StatusCode, b)
	}

	t.Run("models list the adapter with its parent", func(t *testing.T) {
		page, err := rs.client.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 2 || page.Data[0].ID != rs.id || page.Data[1].ID != "alpha" {
			t.Fatalf("models %+v", page.Data)
		}
		if p := page.Data[1].JSON.ExtraFields["parent"].Raw(); p != strconv.Quote(rs.id) {
			t.Errorf("adapter parent %s", p)
		}
		if p := page.Data[0].JSON.ExtraFields["parent"].Raw(); p != "null" {
			t.Errorf("base parent %s", p)
		}
		for _, id := range []string{"alpha", rs.id + ":alpha"} {
			m, err := rs.client.Models.Get(ctx, id)
			if err != nil || m.ID != "alpha" || m.JSON.ExtraFields["parent"].Raw() != strconv.Quote(rs.id) {
				t.Errorf("GET /v1/models/%s: %+v, %v", id, m, err)
			}
		}
	})

	t.Run("use by name", func(t *testing.T) {
		base, err := completeText(t, rs.client, rs.id)
		if err != nil {
			t.Fatal(err)
		}
		want := engineText(t, rs, alpha.a, 1)
		if want == base.Choices[0].Text {
			t.Fatalf("the adapter does not change the text %q: the test proves nothing", want)
		}
		for _, model := range []string{"alpha", rs.id + ":alpha"} {
			r, err := completeText(t, rs.client, model)
			if err != nil {
				t.Fatal(err)
			}
			if r.Choices[0].Text != want || r.Model != model {
				t.Errorf("model %s: text %q (model %q), want %q", model, r.Choices[0].Text, r.Model, want)
			}
		}
		// lora_scale 0 is the base model exactly.
		r, err := completeText(t, rs.client, "alpha", option.WithJSONSet("lora_scale", 0))
		if err != nil {
			t.Fatal(err)
		}
		if r.Choices[0].Text != base.Choices[0].Text {
			t.Errorf("lora_scale 0: %q, want the base model's %q", r.Choices[0].Text, base.Choices[0].Text)
		}
		half, err := completeText(t, rs.client, "alpha", option.WithJSONSet("lora_scale", 0.5))
		if err != nil {
			t.Fatal(err)
		}
		if w := engineText(t, rs, alpha.a, 0.5); half.Choices[0].Text != w {
			t.Errorf("lora_scale 0.5: %q, want %q", half.Choices[0].Text, w)
		}
		chat, err := rs.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "alpha", Messages: userMessage("Tell me a story."), MaxTokens: openai.Int(8), Temperature: openai.Float(0),
		})
		if err != nil || chat.Choices[0].Message.Content == "" || chat.Model != "alpha" {
			t.Errorf("chat with the adapter: %+v, %v", chat, err)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		for _, c := range []struct {
			name, path, body string
			status           int
			code             string
		}{
			{"lora_scale too large", "/v1/completions", `{"model":"alpha","prompt":"x","lora_scale":5}`, 400, session.CodeInvalidValue},
			{"lora_scale negative", "/v1/completions", `{"model":"alpha","prompt":"x","lora_scale":-1}`, 400, session.CodeInvalidValue},
			{"lora_scale a string", "/v1/completions", `{"model":"alpha","prompt":"x","lora_scale":"1"}`, 400, session.CodeInvalidType},
			{"lora_scale without an adapter", "/v1/completions", `{"model":"` + rs.id + `","prompt":"x","lora_scale":1}`, 400, session.CodeInvalidValue},
			{"unknown adapter", "/v1/completions", `{"model":"` + rs.id + `:beta","prompt":"x"}`, 404, session.CodeModelNotFound},
			{"other base", "/v1/completions", `{"model":"other-base:alpha","prompt":"x"}`, 404, session.CodeModelNotFound},
			{"embeddings with an adapter", "/v1/embeddings", `{"model":"alpha","input":"x"}`, 400, session.CodeUnsupported},
		} {
			resp, b := do(t, "POST", rs.URL+c.path, c.body)
			wantError(t, c.name, resp, b, c.status, c.code, "")
		}
	})

	resp, b = do(t, "DELETE", rs.URL+"/v1/adapters/alpha", "")
	if d := decode[adapterDeleted](t, b); resp.StatusCode != 200 || d.ID != "alpha" || !d.Deleted {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	if got := dirEntries(t, dir); len(got) != 0 {
		t.Errorf("after the delete the directory holds %v", got)
	}
	_, err := completeText(t, rs.client, "alpha")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != session.CodeModelNotFound {
		t.Errorf("deleted adapter by name: %v", err)
	}
	resp, b = do(t, "DELETE", rs.URL+"/v1/adapters/alpha", "")
	wantError(t, "second delete", resp, b, 404, codeAdapterMissing, "alpha")
}

// TestAdapterUploadRefused sends uploads that must fail with a 4xx and a
// clear message, and checks that none leaves anything in the directory.
func TestAdapterUploadRefused(t *testing.T) {
	dir := t.TempDir()
	rs := startRealServer(t, realOptions{parallel: 1, adapterDir: dir, maxAdapterBytes: testAdapterBytes})
	f := makeAdapter(t, rs.model.Config, 4, 1)
	rankMismatch := bytes.Replace(f.config, []byte(`"r": 4`), []byte(`"r": 8`), 1)
	if bytes.Equal(rankMismatch, f.config) {
		t.Fatal("the config has no \"r\": 4 to change")
	}
	if resp, b := postForm(t, rs.URL, named("taken"), formFile{"x.gguf", f.gguf}); resp.StatusCode != 201 {
		t.Fatalf("GGUF upload: %d %s", resp.StatusCode, b)
	}
	kept := []string{"taken.gguf"}
	for _, c := range []struct {
		name          string
		fields        [][2]string
		files         []formFile
		status        int
		code, message string
	}{
		{"name with a path", named("../x"), f.peftParts(), 400, codeAdapterName, "invalid adapter name"},
		{"name with a slash", named("a/b"), f.peftParts(), 400, codeAdapterName, "invalid adapter name"},
		{"hidden name", named(".x"), f.peftParts(), 400, codeAdapterName, "invalid adapter name"},
		{"name too long", named(strings.Repeat("n", 65)), f.peftParts(), 400, codeAdapterName, "invalid adapter name"},
		{"no name", nil, f.peftParts(), 400, codeAdapterName, `"name" is required`},
		{"rank mismatch", named("r"), []formFile{{lora.PEFTConfigFile, rankMismatch}, {lora.PEFTWeightsFile, f.weights}}, 400, codeInvalidAdapter, "rank mismatch"},
		{"truncated safetensors", named("t"), []formFile{{lora.PEFTConfigFile, f.config}, {lora.PEFTWeightsFile, f.weights[:len(f.weights)/2]}}, 400, codeInvalidAdapter, "safetensors"},
		{"config only", named("c"), []formFile{{lora.PEFTConfigFile, f.config}}, 400, codeInvalidAdapter, lora.PEFTWeightsFile},
		{"not an adapter", named("n"), []formFile{{"notes.txt", []byte("hello")}}, 400, codeInvalidAdapter, "neither"},
		{"GGUF and PEFT", named("m"), append(f.peftParts(), formFile{"a.gguf", f.gguf}), 400, codeInvalidAdapter, "either one GGUF"},
		{"another base model", [][2]string{{"name", "o"}, {"base_model", "llama-7b"}}, f.peftParts(), 400, codeBaseMismatch, "another base model"},
		{"name taken", named("taken"), f.peftParts(), 409, codeAdapterExists, "already exists"},
		{"unknown field", [][2]string{{"name", "u"}, {"rank", "4"}}, f.peftParts(), 400, codeInvalidAdapter, "unexpected form field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b := postForm(t, rs.URL, c.fields, c.files...)
			wantError(t, c.name, resp, b, c.status, c.code, c.message)
			if got := dirEntries(t, dir); !slices.Equal(got, kept) {
				t.Errorf("the directory holds %v, want %v", got, kept)
			}
		})
	}

	t.Run("not multipart", func(t *testing.T) {
		resp, b := do(t, "POST", rs.URL+"/v1/adapters", `{"name":"j"}`)
		wantError(t, "JSON body", resp, b, 400, codeMultipart, "multipart/form-data")
	})

	// A 2 GB upload, declared: refused from its headers, before any of
	// the body is read.
	t.Run("declared 2 GB", func(t *testing.T) {
		status, b := rawUpload(t, rs.URL, "Content-Length: 2147483648\r\n", nil)
		if status != 413 || !strings.Contains(string(b), jsonhttp.CodeTooLarge) {
			t.Errorf("status %d: %s", status, b)
		}
		if got := dirEntries(t, dir); !slices.Equal(got, kept) {
			t.Errorf("the directory holds %v", got)
		}
	})
	// A 2 GB upload, streamed without a length: refused once past the
	// limit, its temporary file removed.
	t.Run("streamed 2 GB", func(t *testing.T) {
		const boundary = "b0undary"
		head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nhuge\r\n" +
			"--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + lora.PEFTWeightsFile + "\"\r\n" +
			"Content-Type: application/octet-stream\r\n\r\n"
		var sent int64
		status, b := rawUpload(t, rs.URL, "Transfer-Encoding: chunked\r\n", func(w io.Writer) {
			cw := httputil.NewChunkedWriter(w)
			if _, err := io.WriteString(cw, head); err != nil {
				return
			}
			block := make([]byte, 64<<10)
			for sent < 2<<30 {
				n, err := cw.Write(block)
				sent += int64(n)
				if err != nil {
					return
				}
			}
		})
		if status != 413 || !strings.Contains(string(b), jsonhttp.CodeTooLarge) || !strings.Contains(string(b), "1048576") {
			t.Errorf("status %d: %s", status, b)
		}
		if sent >= 2<<30 {
			t.Error("the server read all 2 GB")
		}
		if got := dirEntries(t, dir); !slices.Equal(got, kept) {
			t.Errorf("the directory holds %v", got)
		}
	})
}

// rawUpload posts to /v1/adapters over a bare connection with the extra
// header lines given, writing the body with body (nil: none) while it
// reads the response, so that a server answering before the body is over
// is seen as a client sees it. The body writer stops at the first error.
func rawUpload(t *testing.T, base, header string, body func(io.Writer)) (int, []byte) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	req := "POST /v1/adapters HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: multipart/form-data; boundary=b0undary\r\n" + header + "\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	if body != nil {
		wg.Go(func() { body(conn) })
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// holdEngine holds every Submit until hold is closed (or the request is
// cancelled), so that a request is certainly in flight.
type holdEngine struct {
	session.Engine
	hold    chan struct{}
	entered chan struct{}
}

func (h *holdEngine) Submit(ctx context.Context, r backends.Request) (*backends.Stream, error) {
	select {
	case h.entered <- struct{}{}:
	default:
	}
	select {
	case <-h.hold:
	case <-ctx.Done():
	}
	return h.Engine.Submit(ctx, r)
}

// TestAdapterInUse checks that delete and unload are refused with 409
// while a request uses the adapter, and succeed once it has ended, also
// when it ended by the client leaving.
func TestAdapterInUse(t *testing.T) {
	dir := t.TempDir()
	h := &holdEngine{hold: make(chan struct{}), entered: make(chan struct{}, 1)}
	rs := startRealServer(t, realOptions{parallel: 1, adapterDir: dir, maxAdapterBytes: testAdapterBytes,
		wrap: func(e session.Engine) session.Engine { h.Engine = e; return h }})
	f := makeAdapter(t, rs.model.Config, 2, 3)
	for _, name := range []string{"busy", "left"} {
		if resp, b := postForm(t, rs.URL, named(name), f.peftParts()...); resp.StatusCode != 201 {
			t.Fatalf("upload %s: %d %s", name, resp.StatusCode, b)
		}
	}
	inUse := func(name string) int {
		_, b := do(t, "GET", rs.URL+"/v1/adapters/"+name, "")
		return decode[adapterObject](t, b).InUse
	}

	done := make(chan error, 1)
	go func() {
		_, err := completeText(t, rs.client, "busy")
		done <- err
	}()
	<-h.entered
	if n := inUse("busy"); n != 1 {
		t.Errorf("in_use %d while a request runs", n)
	}
	resp, b := do(t, "DELETE", rs.URL+"/v1/adapters/busy", "")
	wantError(t, "delete while in use", resp, b, 409, codeAdapterInUse, "in use by a running request")
	resp, b = do(t, "POST", rs.URL+"/v1/unload_lora_adapter", `{"lora_name":"busy"}`)
	wantError(t, "unload while in use", resp, b, 409, codeAdapterInUse, "in use by a running request")
	close(h.hold)
	if err := <-done; err != nil {
		t.Fatalf("the request: %v", err)
	}
	if n := inUse("busy"); n != 0 {
		t.Errorf("in_use %d after the request", n)
	}
	if resp, b := do(t, "DELETE", rs.URL+"/v1/adapters/busy", ""); resp.StatusCode != 200 {
		t.Errorf("delete after the request: %d %s", resp.StatusCode, b)
	}

	// A request whose client leaves releases its adapter too.
	h.hold = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := rs.client.Completions.New(ctx, openai.CompletionNewParams{
			Model: "left", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")}, MaxTokens: openai.Int(4),
		})
		done <- err
	}()
	<-h.entered
	if n := inUse("left"); n != 1 {
		t.Errorf("in_use %d while a request runs", n)
	}
	cancel()
	<-done
	deadline := time.Now().Add(2 * time.Second)
	for inUse("left") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled request still holds the adapter")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if resp, b := do(t, "DELETE", rs.URL+"/v1/adapters/left", ""); resp.StatusCode != 200 {
		t.Errorf("delete after the cancelled request: %d %s", resp.StatusCode, b)
	}
	if got := dirEntries(t, dir); len(got) != 0 {
		t.Errorf("the directory holds %v", got)
	}
}

// TestAdapterBatch runs adapter A, adapter B and the base model at once
// and checks each against its run alone; with room for one resident
// adapter, both stay in memory while used and one after.
func TestAdapterBatch(t *testing.T) {
	dir := t.TempDir()
	rs := startRealServer(t, realOptions{stories: true, parallel: 3, adapterDir: dir, maxResident: 1, maxAdapterBytes: testAdapterBytes})
	fa, fb := makeAdapter(t, rs.model.Config, 4, 1), makeAdapter(t, rs.model.Config, 8, 2)
	if resp, b := postForm(t, rs.URL, named("a"), fa.peftParts()...); resp.StatusCode != 201 {
		t.Fatalf("upload a: %d %s", resp.StatusCode, b)
	}
	if resp, b := postForm(t, rs.URL, named("b"), formFile{"b.gguf", fb.gguf}); resp.StatusCode != 201 {
		t.Fatalf("upload b: %d %s", resp.StatusCode, b)
	}
	models := []string{"a", "b", rs.id}
	alone := make([]string, len(models))
	for i, m := range models {
		r, err := completeText(t, rs.client, m)
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = r.Choices[0].Text
	}
	if alone[0] == alone[2] || alone[1] == alone[2] || alone[0] == alone[1] {
		t.Fatalf("the adapters change nothing: %q", alone)
	}
	for round := range 3 {
		var wg sync.WaitGroup
		got := make([]string, len(models))
		for i, m := range models {
			wg.Go(func() {
				r, err := completeText(t, rs.client, m)
				if err != nil {
					got[i] = err.Error()
					return
				}
				got[i] = r.Choices[0].Text
			})
		}
		wg.Wait()
		for i := range models {
			if got[i] != alone[i] {
				t.Errorf("round %d, model %s together: %q, alone %q", round, models[i], got[i], alone[i])
			}
		}
	}
	resident := 0
	for _, in := range rs.adapters.List() {
		if in.Resident {
			resident++
		}
	}
	if resident != 1 {
		t.Errorf("%d adapters resident, at most 1 allowed", resident)
	}
}

// TestVLLMAdapterRoutes drives vLLM's /v1/load_lora_adapter and
// /v1/unload_lora_adapter.
func TestVLLMAdapterRoutes(t *testing.T) {
	dir := t.TempDir()
	rs := startRealServer(t, realOptions{parallel: 1, adapterDir: dir, maxAdapterBytes: testAdapterBytes})
	f := makeAdapter(t, rs.model.Config, 4, 1)
	// Written after the start-up scan, so the registry does not know it.
	if err := f.a.WritePEFT(filepath.Join(dir, "src"), rs.model.Config); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := f.a.WritePEFT(filepath.Join(outside, "peft"), rs.model.Config); err != nil {
		t.Fatal(err)
	}
	wantText := func(what string, resp *http.Response, b []byte, text string) {
		t.Helper()
		if resp.StatusCode != 200 || string(b) != text || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Errorf("%s: %d %q (%s), want 200 %q", what, resp.StatusCode, b, resp.Header.Get("Content-Type"), text)
		}
	}
	load, unload := rs.URL+"/v1/load_lora_adapter", rs.URL+"/v1/unload_lora_adapter"

	resp, b := do(t, "POST", load, `{"lora_name":"va","lora_path":"src"}`)
	wantText("load", resp, b, "Success: LoRA adapter 'va' added successfully.")
	abs := filepath.Join(dir, "src")
	resp, b = do(t, "POST", load, fmt.Sprintf(`{"lora_name":"vb","lora_path":%q}`, abs))
	wantText("load by absolute path", resp, b, "Success: LoRA adapter 'vb' added successfully.")
	page, err := rs.client.Models.List(context.Background())
	if err != nil || len(page.Data) != 3 || page.Data[1].ID != "va" || page.Data[1].JSON.ExtraFields["parent"].Raw() != strconv.Quote(rs.id) {
		t.Errorf("models after the loads: %+v, %v", page, err)
	}
	want := engineText(t, rs, f.a, 1)
	for _, m := range []string{"va", rs.id + ":vb"} {
		if r, err := completeText(t, rs.client, m); err != nil || r.Choices[0].Text != want {
			t.Errorf("completion with %s: %v, %v; want %q", m, r, err, want)
		}
	}

	for _, c := range []struct {
		name, body    string
		status        int
		code, message string
	}{
		{"loaded twice", `{"lora_name":"va","lora_path":"src"}`, 400, codeAdapterExists, "has already been loaded"},
		{"no path", `{"lora_name":"vc"}`, 400, session.CodeMissing, "lora_path"},
		{"no name", `{"lora_path":"src"}`, 400, session.CodeMissing, "lora_name"},
		{"path escaping", `{"lora_name":"vc","lora_path":"../x"}`, 400, codeAdapterPath, "outside the adapter directory"},
		{"path escaping to a directory", `{"lora_name":"vc","lora_path":"../"}`, 400, codeAdapterPath, "outside the adapter directory"},
		{"the directory itself", `{"lora_name":"vc","lora_path":"."}`, 400, codeAdapterPath, "outside the adapter directory"},
		{"path outside", fmt.Sprintf(`{"lora_name":"vc","lora_path":%q}`, filepath.Join(outside, "peft")), 400, codeAdapterPath, "outside the adapter directory"},
		{"missing path", `{"lora_name":"vc","lora_path":"nothing-here"}`, 404, codeAdapterMissing, "nothing-here"},
		{"bad name", `{"lora_name":"../vc","lora_path":"src"}`, 400, codeAdapterName, "invalid adapter name"},
		{"3D weights", `{"lora_name":"vc","lora_path":"src","is_3d_lora_weight":true}`, 400, session.CodeUnsupported, "3D"},
	} {
		resp, b := do(t, "POST", load, c.body)
		wantError(t, "load: "+c.name, resp, b, c.status, c.code, c.message)
	}
	resp, b = do(t, "POST", load, `{"lora_name":"va","lora_path":"src","load_inplace":true}`)
	wantText("load in place", resp, b, "Success: LoRA adapter 'va' added successfully.")

	resp, b = do(t, "POST", unload, `{"lora_name":"va","lora_int_id":1}`)
	wantText("unload", resp, b, "Success: LoRA adapter 'va' removed successfully.")
	resp, b = do(t, "POST", unload, `{"lora_name":"va"}`)
	wantError(t, "unload twice", resp, b, 404, codeAdapterMissing, "va")
	resp, b = do(t, "POST", unload, `{}`)
	wantError(t, "unload without a name", resp, b, 400, session.CodeMissing, "lora_name")
	if _, err := completeText(t, rs.client, "va"); err == nil {
		t.Error("an unloaded adapter still answers")
	}
	// Unloading keeps the files; the adapter loaded from them stays.
	if got := dirEntries(t, dir); !slices.Equal(got, []string{"src"}) {
		t.Errorf("the directory holds %v", got)
	}
	if r, err := completeText(t, rs.client, "vb"); err != nil || r.Choices[0].Text != want {
		t.Errorf("vb after unloading va: %v", err)
	}
}

// TestAdapterStartup checks that the adapters in the directory are loaded
// when the server starts, and that one that does not fit is left out.
func TestAdapterStartup(t *testing.T) {
	dir := t.TempDir()
	cfg := testmodel.Tiny(t).Config
	f := makeAdapter(t, cfg, 4, 1)
	if err := f.a.WritePEFT(filepath.Join(dir, "peft-one"), cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gguf-one.gguf"), f.gguf, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.gguf"), []byte("GGUF and then nothing"), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := startRealServer(t, realOptions{parallel: 1, adapterDir: dir})
	_, b := do(t, "GET", rs.URL+"/v1/models", "")
	l := decode[modelList](t, b)
	var ids []string
	for _, m := range l.Data {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, []string{rs.id, "gguf-one", "peft-one"}) {
		t.Errorf("models %v", ids)
	}
	if _, ok := rs.adapters.Skipped()["broken.gguf"]; !ok {
		t.Errorf("skipped %v", rs.adapters.Skipped())
	}
	want := engineText(t, rs, f.a, 1)
	for _, m := range []string{"gguf-one", "peft-one"} {
		if r, err := completeText(t, rs.client, m); err != nil || r.Choices[0].Text != want {
			t.Errorf("%s: %v; want %q", m, err, want)
		}
	}
}

// TestAdaptersDisabled checks the answers of a server without adapters.
func TestAdaptersDisabled(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/adapters", ""},
		{"GET", "/v1/adapters/x", ""},
		{"DELETE", "/v1/adapters/x", ""},
		{"POST", "/v1/adapters", "x"},
		{"POST", "/v1/load_lora_adapter", `{"lora_name":"x","lora_path":"y"}`},
		{"POST", "/v1/unload_lora_adapter", `{"lora_name":"x"}`},
	} {
		resp, b := do(t, c.method, fs.URL+c.path, c.body)
		wantError(t, c.method+" "+c.path, resp, b, 404, codeAdaptersOff, "--adapter-dir")
	}
	resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{"model":"fake-model:x","messages":[{"role":"user","content":"hi"}]}`)
	wantError(t, "adapter model", resp, b, 404, session.CodeModelNotFound, "does not exist")
	resp, b = do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"lora_scale":1}`)
	wantError(t, "lora_scale", resp, b, 400, session.CodeInvalidValue, "lora_scale")
	resp, _ = do(t, "PUT", fs.URL+"/v1/adapters/x", "")
	if resp.StatusCode != 405 || !strings.Contains(strings.Join(resp.Header.Values("Allow"), ","), "DELETE") {
		t.Errorf("PUT: %d, Allow %v", resp.StatusCode, resp.Header.Values("Allow"))
	}
}
