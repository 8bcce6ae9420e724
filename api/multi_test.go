package api

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	wire "github.com/ruvllm/ruvllm/api/openai"

	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/session"
)

// multiServer serves two fake models, "alpha" (the default) and "beta",
// each with its own engine, which says its own word, and its own adapter
// directory: alpha has the adapters only-a, shared and beta (named as the
// other model), beta has only-b and shared.
type multiServer struct {
	*httptest.Server
	api         *Server
	alpha, beta *fakeEngine
	dirs        map[string]string // model → adapter directory
	adapter     adapterFiles      // fits the registries' base model
}

func newMultiServer(t *testing.T) *multiServer {
	t.Helper()
	tk := testTokenizer(t)
	tmpl, err := chat.Parse(chatMLRaising)
	if err != nil {
		t.Fatal(err)
	}
	// The registries check adapters against a real model's shapes; the
	// fake engines ignore the adapters they are handed.
	base := testmodel.Tiny(t)
	ms := &multiServer{api: New(Options{Version: "test-version"}), dirs: map[string]string{}}
	ms.adapter = makeAdapter(t, base.Config, 2, 1)
	for _, md := range []struct {
		id       string
		word     string
		eng      **fakeEngine
		adapters []string
	}{
		{"alpha", "▁Hello", &ms.alpha, []string{"only-a", "shared", "beta"}},
		{"beta", "▁world", &ms.beta, []string{"only-b", "shared"}},
	} {
		eng := newFakeEngine(tk)
		eng.script = scriptOf(t, tk, md.word)
		*md.eng = eng
		dir := t.TempDir()
		for _, a := range md.adapters {
			if err := os.WriteFile(filepath.Join(dir, a+".gguf"), ms.adapter.gguf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		reg, err := lora.NewRegistry(lora.RegistryOptions{Dir: dir, Config: base.Config, Base: base.File, BaseModel: md.id})
		if err != nil {
			t.Fatal(err)
		}
		ms.dirs[md.id] = dir
		if err := ms.api.AddModel(&session.Model{ID: md.id, Tokenizer: tk, Chat: templateChat{tmpl}, Engine: eng, Adapters: reg}); err != nil {
			t.Fatal(err)
		}
	}
	ms.Server = httptest.NewServer(ms.api)
	t.Cleanup(func() {
		ms.CloseClientConnections()
		ms.Close()
	})
	return ms
}

// TestTwoModels serves two models at once: both are listed, each answers
// the requests that name it (or its adapters) with its own engine and
// its own name, "" goes to the default, and names that fit no model or
// more than one are refused with what exists.
func TestTwoModels(t *testing.T) {
	ms := newMultiServer(t)

	t.Run("listed", func(t *testing.T) {
		_, b := do(t, "GET", ms.URL+"/v1/models", "")
		var got []string
		for _, m := range decode[modelList](t, b).Data {
			parent := ""
			if m.Parent != nil {
				parent = *m.Parent
			}
			got = append(got, m.ID+"<"+parent)
		}
		want := []string{"alpha<", "beta<", "beta<alpha", "only-a<alpha", "shared<alpha", "only-b<beta", "shared<beta"}
		if !slices.Equal(got, want) {
			t.Errorf("models %v, want %v", got, want)
		}
	})

	for _, tc := range []struct {
		name, model string
		// engine is the engine that must run the request, adapter whether
		// it must be handed an adapter, answer the model the response names.
		engine  string
		adapter bool
		answer  string
	}{
		{"default", "", "alpha", false, "alpha"},
		{"alpha", "alpha", "alpha", false, "alpha"},
		{"a model id wins over an adapter", "beta", "beta", false, "beta"},
		{"adapter of alpha alone", "only-a", "alpha", true, "only-a"},
		{"adapter of beta alone", "only-b", "beta", true, "only-b"},
		{"adapter of beta by its model", "beta:shared", "beta", true, "beta:shared"},
		{"adapter of alpha by its model", "alpha:shared", "alpha", true, "alpha:shared"},
		{"adapter named as the other model, by its model", "alpha:beta", "alpha", true, "alpha:beta"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			engines := map[string]*fakeEngine{"alpha": ms.alpha, "beta": ms.beta}
			before := map[string]int{"alpha": len(ms.alpha.requests()), "beta": len(ms.beta.requests())}
			body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2`
			if tc.model != "" {
				body += `,"model":"` + tc.model + `"`
			}
			resp, b := do(t, "POST", ms.URL+"/v1/chat/completions", body+"}")
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			c := decode[wire.ChatCompletion](t, b)
			word := map[string]string{"alpha": " Hello", "beta": " world"}[tc.engine]
			if c.Model != tc.answer || deref(c.Choices[0].Message.Content) != word {
				t.Errorf("model %q content %q; want %q from %s", c.Model, deref(c.Choices[0].Message.Content), tc.answer, tc.engine)
			}
			for id, e := range engines {
				reqs := e.requests()
				ran := len(reqs) - before[id]
				if want := map[bool]int{true: 1, false: 0}[id == tc.engine]; ran != want {
					t.Fatalf("engine %s ran %d requests, want %d", id, ran, want)
				}
				if id == tc.engine && (reqs[len(reqs)-1].Adapter != nil) != tc.adapter {
					t.Errorf("engine %s ran with adapter %v, want one: %v", id, reqs[len(reqs)-1].Adapter, tc.adapter)
				}
			}
		})
	}

	t.Run("text completion on beta", func(t *testing.T) {
		_, b := do(t, "POST", ms.URL+"/v1/completions", `{"model":"beta","prompt":"x","max_tokens":1}`)
		if c := decode[wire.TextCompletion](t, b); c.Model != "beta" || c.Choices[0].Text != " world" {
			t.Errorf("%s", b)
		}
	})
	t.Run("embeddings", func(t *testing.T) {
		for _, model := range []string{"", "beta"} {
			_, b := do(t, "POST", ms.URL+"/v1/embeddings", `{"model":"`+model+`","input":"x"}`)
			want := model
			if want == "" {
				want = "alpha"
			}
			if got := decode[embeddingList](t, b).Model; got != want {
				t.Errorf("model %q: embeddings of %q: %s", model, got, b)
			}
		}
	})
	t.Run("tokenize", func(t *testing.T) {
		for _, body := range []string{`{"content":"hi"}`, `{"content":"hi","model":"beta"}`, `{"content":"hi","model":"only-b"}`} {
			if resp, b := do(t, "POST", ms.URL+"/tokenize", body); resp.StatusCode != 200 {
				t.Errorf("%s: %d %s", body, resp.StatusCode, b)
			}
		}
		if resp, b := do(t, "POST", ms.URL+"/detokenize", `{"tokens":[5],"model":"beta"}`); resp.StatusCode != 200 {
			t.Errorf("detokenize: %d %s", resp.StatusCode, b)
		}
	})
	t.Run("model cards", func(t *testing.T) {
		for id, parent := range map[string]string{"beta": "", "only-b": "beta", "alpha:shared": "alpha"} {
			resp, b := do(t, "GET", ms.URL+"/v1/models/"+id, "")
			m := decode[modelObject](t, b)
			if resp.StatusCode != 200 || (m.Parent == nil) != (parent == "") || (m.Parent != nil && *m.Parent != parent) {
				t.Errorf("%s: %d %s", id, resp.StatusCode, b)
			}
		}
	})

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name, method, path, body string
			status                   int
			code                     string
			says                     []string
		}{
			{"unknown model", "POST", "/v1/chat/completions", `{"model":"gamma","messages":[{"role":"user","content":"hi"}]}`,
				404, session.CodeModelNotFound, []string{`"gamma"`, `"alpha" and "beta"`}},
			{"unknown model before the template", "POST", "/v1/chat/completions", `{"model":"gamma","messages":[{"role":"user","content":"boom"}]}`,
				404, session.CodeModelNotFound, nil},
			{"unknown model in embeddings", "POST", "/v1/embeddings", `{"model":"gamma","input":"x"}`, 404, session.CodeModelNotFound, []string{`"alpha" and "beta"`}},
			{"unknown model in tokenize", "POST", "/tokenize", `{"model":"gamma","content":"x"}`, 404, session.CodeModelNotFound, []string{`"alpha"`}},
			{"unknown model card", "GET", "/v1/models/gamma", "", 404, session.CodeModelNotFound, []string{`"beta"`}},
			{"adapter of the other model", "POST", "/v1/completions", `{"model":"alpha:only-b","prompt":"x"}`, 404, session.CodeModelNotFound, nil},
			{"adapter on two models", "POST", "/v1/completions", `{"model":"shared","prompt":"x"}`, 400, session.CodeAmbiguousModel,
				[]string{`"shared"`, `"alpha" and "beta"`, `"alpha:shared"`}},
			{"adapter on two models, card", "GET", "/v1/models/shared", "", 400, session.CodeAmbiguousModel, []string{`"alpha" and "beta"`}},
			{"adapter on two models, adapter route", "GET", "/v1/adapters/shared", "", 400, session.CodeAmbiguousModel, []string{`"alpha" and "beta"`}},
			{"base_model that is no model", "POST", "/v1/load_lora_adapter", `{"lora_name":"x","lora_path":"y","base_model":"gamma"}`,
				404, session.CodeModelNotFound, []string{`"gamma"`}},
		} {
			resp, b := do(t, tc.method, ms.URL+tc.path, tc.body)
			wantError(t, tc.name, resp, b, tc.status, tc.code, "")
			for _, s := range tc.says {
				if msg := decode[wireError](t, b).Error.Message; !strings.Contains(msg, s) {
					t.Errorf("%s: message %q does not say %s", tc.name, msg, s)
				}
			}
		}
	})

	t.Run("adapter routes", func(t *testing.T) {
		_, b := do(t, "GET", ms.URL+"/v1/adapters", "")
		var got []string
		for _, a := range decode[adapterList](t, b).Data {
			got = append(got, a.BaseModel+":"+a.ID)
		}
		if want := []string{"alpha:beta", "alpha:only-a", "alpha:shared", "beta:only-b", "beta:shared"}; !slices.Equal(got, want) {
			t.Errorf("adapters %v, want %v", got, want)
		}
		if resp, b := do(t, "GET", ms.URL+"/v1/adapters/beta:shared", ""); resp.StatusCode != 200 || decode[adapterObject](t, b).BaseModel != "beta" {
			t.Errorf("beta:shared: %d %s", resp.StatusCode, b)
		}
		if resp, b := do(t, "DELETE", ms.URL+"/v1/adapters/alpha:shared", ""); resp.StatusCode != 200 {
			t.Fatalf("delete alpha:shared: %d %s", resp.StatusCode, b)
		}
		if _, err := os.Stat(filepath.Join(ms.dirs["beta"], "shared.gguf")); err != nil {
			t.Errorf("deleting alpha's adapter touched beta's: %v", err)
		}
		// Now only beta has it, so the bare name is beta's.
		_, b = do(t, "POST", ms.URL+"/v1/completions", `{"model":"shared","prompt":"x","max_tokens":1}`)
		if c := decode[wire.TextCompletion](t, b); c.Model != "shared" || c.Choices[0].Text != " world" {
			t.Errorf("shared after the delete: %s", b)
		}
		resp, b := do(t, "POST", ms.URL+"/v1/unload_lora_adapter", `{"lora_name":"beta:shared"}`)
		if resp.StatusCode != 200 {
			t.Errorf("unload beta:shared: %d %s", resp.StatusCode, b)
		}
		resp, b = do(t, "POST", ms.URL+"/v1/load_lora_adapter", `{"lora_name":"again","lora_path":"shared.gguf","base_model":"beta"}`)
		if resp.StatusCode != 200 {
			t.Fatalf("load into beta: %d %s", resp.StatusCode, b)
		}
		if resp, b := do(t, "GET", ms.URL+"/v1/adapters/beta:again", ""); resp.StatusCode != 200 {
			t.Errorf("beta:again: %d %s", resp.StatusCode, b)
		}
		// Without base_model, the default model's directory, which has no
		// shared.gguf any more.
		resp, b = do(t, "POST", ms.URL+"/v1/load_lora_adapter", `{"lora_name":"again","lora_path":"shared.gguf"}`)
		wantError(t, "load into alpha", resp, b, 404, codeAdapterMissing, "shared.gguf")
	})

	t.Run("uploads", func(t *testing.T) {
		post := func(fields [][2]string, fileFirst bool) (*http.Response, []byte) {
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			file := func() {
				w, _ := mw.CreateFormFile("file", "a.gguf")
				w.Write(ms.adapter.gguf)
			}
			if fileFirst {
				file()
			}
			for _, f := range fields {
				mw.WriteField(f[0], f[1])
			}
			if !fileFirst {
				file()
			}
			mw.Close()
			resp, err := http.Post(ms.URL+"/v1/adapters", mw.FormDataContentType(), &buf)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b := new(bytes.Buffer)
			b.ReadFrom(resp.Body)
			return resp, b.Bytes()
		}
		resp, b := post([][2]string{{"name", "up-b"}, {"base_model", "beta"}}, false)
		if resp.StatusCode != 201 || decode[adapterObject](t, b).BaseModel != "beta" {
			t.Errorf("upload to beta: %d %s", resp.StatusCode, b)
		}
		if _, err := os.Stat(filepath.Join(ms.dirs["beta"], "up-b.gguf")); err != nil {
			t.Errorf("not in beta's directory: %v", err)
		}
		resp, b = post([][2]string{{"name", "up-a"}}, false)
		if resp.StatusCode != 201 || decode[adapterObject](t, b).BaseModel != "alpha" {
			t.Errorf("upload to the default: %d %s", resp.StatusCode, b)
		}
		resp, b = post([][2]string{{"name", "late"}, {"base_model", "beta"}}, true)
		wantError(t, "base_model after the file", resp, b, 400, codeMultipart, "before the files")
		for id, dir := range ms.dirs {
			for _, e := range dirEntries(t, dir) {
				if strings.HasPrefix(e, ".") || strings.HasPrefix(e, "late") {
					t.Errorf("%s's directory holds %s", id, e)
				}
			}
		}
	})

	t.Run("metrics per model", func(t *testing.T) {
		_, b := do(t, "GET", ms.URL+"/metrics", "")
		for _, want := range []string{`ruvllm_model_requests_running{model="alpha"} 0`, `ruvllm_model_queue_depth{model="beta"} 0`, "ruvllm_requests_running 0", "ruvllm_model_loaded 1"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("metrics lack %q", want)
			}
		}
	})
}

// TestAddModel checks what AddModel refuses, and that the first model
// added stays the default.
func TestAddModel(t *testing.T) {
	tk := testTokenizer(t)
	s := New(Options{})
	eng := newFakeEngine(tk)
	for _, tc := range []struct {
		name string
		m    *session.Model
		ok   bool
	}{
		{"first", &session.Model{ID: "one", Tokenizer: tk, Engine: eng}, true},
		{"second", &session.Model{ID: "two", Tokenizer: tk, Engine: eng}, true},
		{"same id", &session.Model{ID: "one", Tokenizer: tk, Engine: eng}, false},
		{"no id", &session.Model{Tokenizer: tk, Engine: eng}, false},
		{"no engine", &session.Model{ID: "three", Tokenizer: tk}, false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.AddModel(tc.m); (err == nil) != tc.ok {
				t.Fatalf("AddModel: %v, want ok %v", err, tc.ok)
			}
		})
	}
	if got, err := s.Models().Resolve("", "model"); err != nil || got.Model.ID != "one" {
		t.Errorf("default %+v, %v", got, err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	resp, b := do(t, "POST", hs.URL+"/v1/chat/completions", `{"model":"two","messages":[{"role":"user","content":"hi"}]}`)
	wantError(t, "chat without a template", resp, b, 400, session.CodeUnsupported, "no chat template")
}
