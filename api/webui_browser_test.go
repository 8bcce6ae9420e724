package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	wire "github.com/ruvllm/ruvllm/api/openai"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/models/chat"
)

// chromiumPath is Debian's Chromium, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// browserTimeout bounds each case's time in the browser; the machines are
// small and shared.
const browserTimeout = 3 * time.Minute

// TestWebUIBrowser drives the chat page at / in a headless Chromium, as a
// user would: it types messages and watches the streamed replies (equal to
// what the API answers for the same request), stops a reply, reads a
// thinking model's reasoning apart from its answer, sees hostile model
// output shown as text, gives the API key the page asks for, and calls the
// API from a page of another origin (CORS). Screenshots go to
// $RUVLLM_SCREENSHOT_DIR (else a temporary directory), named in the log.
func TestWebUIBrowser(t *testing.T) {
	b := startBrowser(t)

	t.Run("reply", func(t *testing.T) {
		rs := startRealServer(t, pageModel())
		rec := &chatRecorder{h: rs.Config.Handler}
		hs := startHTTP(t, rec)
		tab := b.tab(t)
		tab.do(chromedp.Navigate(hs.URL + "/"))
		tab.waitFor(`document.getElementById('model').dataset.loaded === 'true'`)
		if models := evalJS[[]string](tab, `Array.from(document.querySelectorAll('#model option'), o => o.value)`); !slices.Equal(models, []string{rs.id}) {
			t.Fatalf("the model list is %q, want [%s]", models, rs.id)
		}
		tab.do(chromedp.SetValue(chromedp.ID("temperature"), "0"), chromedp.SetValue(chromedp.ID("max-tokens"), "24"),
			chromedp.SendKeys(chromedp.ID("input"), "Tell me a story."), chromedp.Click(chromedp.ID("send")))
		tab.waitFor(`document.querySelectorAll('.message.assistant[data-done]').length === 1`)
		reply := evalJS[string](tab, `ruvllm.state.messages[1].content`)
		shown := evalJS[string](tab, `document.querySelector('.message.assistant .answer').innerText`)

		sent := rec.last(t)
		var req map[string]any
		if err := json.Unmarshal(sent.body, &req); err != nil {
			t.Fatal(err)
		}
		if req["stream"] != true || req["temperature"] != 0.0 || req["max_tokens"] != 24.0 || req["model"] != rs.id ||
			!strings.Contains(string(sent.body), `"messages":[{"role":"user","content":"Tell me a story."}]`) {
			t.Errorf("the page sent %s", sent.body)
		}
		// The same request, answered whole.
		req["stream"] = false
		delete(req, "stream_options")
		body, _ := json.Marshal(req)
		resp, whole := do(t, "POST", hs.URL+"/v1/chat/completions", string(body))
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, whole)
		}
		want := deref(decode[wire.ChatCompletion](t, whole).Choices[0].Message.Content)
		if reply == "" || reply != want {
			t.Errorf("the page streamed %q, the API answers %q", reply, want)
		}
		// Text without Markdown shows as it is.
		if regexp.MustCompile(`^[\p{L}\p{N}\s.,;:'"!?-]*$`).MatchString(want) && strings.Join(strings.Fields(shown), " ") != strings.Join(strings.Fields(want), " ") {
			t.Errorf("the page shows %q for %q", shown, want)
		}
		t.Logf("%s answered %q", rs.id, reply)

		tab.do(chromedp.SendKeys(chromedp.ID("input"), "And then?"), chromedp.Click(chromedp.ID("send")))
		tab.waitFor(`document.querySelectorAll('.message.assistant[data-done]').length === 2`)
		var second struct {
			Messages []struct{ Role, Content string }
		}
		if err := json.Unmarshal(rec.last(t).body, &second); err != nil {
			t.Fatal(err)
		}
		if len(second.Messages) != 3 || second.Messages[1].Role != "assistant" || second.Messages[1].Content != reply || second.Messages[2].Content != "And then?" {
			t.Errorf("the second turn sent %+v", second.Messages)
		}
		tab.screenshot("webui-reply.png")

		tab.do(chromedp.Click(chromedp.ID("new-chat")))
		if n := evalJS[int](tab, `ruvllm.state.messages.length + document.getElementById('messages').children.length`); n != 0 {
			t.Errorf("after New chat %d messages are left", n)
		}
		tab.checkClean()
	})

	t.Run("markdown", func(t *testing.T) {
		fs := newFakeServer(t, Options{}, nil)
		tab := b.tab(t)
		tab.do(chromedp.Navigate(fs.URL + "/"))
		tab.waitFor(`window.ruvllm && window.ruvllm.markdown`)
		const link = `target="_blank" rel="noopener noreferrer nofollow"`
		for _, tc := range []struct{ name, in, want string }{
			{"img tag", `<img src=x onerror=alert(1)>`, `<p>&lt;img src=x onerror=alert(1)&gt;</p>`},
			{"script tag", "<script>alert(1)</script>", `<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>`},
			{"html in a code block", "```html\n<b onclick=\"x()\">b</b>\n```", `<pre data-lang="html"><code class="language-html">&lt;b onclick="x()"&gt;b&lt;/b&gt;</code></pre>`},
			{"html in inline code", "use `<script>` here", `<p>use <code>&lt;script&gt;</code> here</p>`},
			{"html in emphasis", "**<i>x</i>**", `<p><strong>&lt;i&gt;x&lt;/i&gt;</strong></p>`},
			{"javascript link", "[a](javascript:alert(1))", `<p>a</p>`},
			{"javascript link, mixed case", "[a](JaVaScRiPt:alert(1))", `<p>a</p>`},
			{"data link", "[a](data:text/html,<script>alert(1)</script>)", `<p>a</p>`},
			{"relative link", "[a](/v1/models)", `<p>a</p>`},
			{"quote in a link", `[a](https://e.example/"onmouseover="alert(1))`, `<p><a href="https://e.example/%22onmouseover=%22alert(1)" ` + link + `>a</a></p>`},
			{"link", "[docs](https://example.com/a?b=1&c=2)", `<p><a href="https://example.com/a?b=1&amp;c=2" ` + link + `>docs</a></p>`},
			{"bare url", "see https://example.com/x.", `<p>see <a href="https://example.com/x" ` + link + `>https://example.com/x</a>.</p>`},
			{"image is a link", "![cat](https://example.com/cat.png)", `<p><a href="https://example.com/cat.png" ` + link + ` title="image: https://example.com/cat.png">cat</a></p>`},
			{"headings", "# One\n### Three", `<h1>One</h1><h3>Three</h3>`},
			{"no heading without a space", "#tag", `<p>#tag</p>`},
			{"emphasis", "**b** *i* ***bi*** ~~s~~ _u_", `<p><strong>b</strong> <em>i</em> <strong><em>bi</em></strong> <del>s</del> <em>u</em></p>`},
			{"snake_case", "a_b_c and 2*3*4", `<p>a_b_c and 2<em>3</em>4</p>`},
			{"escapes", `\*not\* \<b>`, `<p>*not* &lt;b&gt;</p>`},
			{"line breaks", "one\ntwo\n\nthree", `<p>one<br>two</p><p>three</p>`},
			{"list", "- one\n- **two**", `<ul><li>one</li><li><strong>two</strong></li></ul>`},
			{"ordered list", "3. c\n4. d", `<ol start="3"><li>c</li><li>d</li></ol>`},
			{"nested list", "- a\n  - b\n- c", `<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul>`},
			{"list after text", "Steps:\n1. go", `<p>Steps:</p><ol><li>go</li></ol>`},
			{"quote", "> said <b>", `<blockquote><p>said &lt;b&gt;</p></blockquote>`},
			{"rule", "a\n\n---\n\nb", `<p>a</p><hr><p>b</p>`},
			{"table", "| a | b |\n|:--|--:|\n| <i> | `c` |", `<table><thead><tr><th class="align-left">a</th><th class="align-right">b</th></tr></thead>` +
				`<tbody><tr><td class="align-left">&lt;i&gt;</td><td class="align-right"><code>c</code></td></tr></tbody></table>`},
			{"unclosed code block streams", "```\nsome <b>", `<pre><code>some &lt;b&gt;</code></pre>`},
			{"deep quotes stop nesting", strings.Repeat(">", 40) + " x", strings.Repeat("<blockquote>", 16) + `<p class="plain">` + strings.Repeat("&gt;", 24) + " x</p>" + strings.Repeat("</blockquote>", 16)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				in, _ := json.Marshal(tc.in)
				got := evalJS[string](tab, fmt.Sprintf(`(s => { const d = document.createElement('div'); d.append(ruvllm.markdown.render(s)); return d.innerHTML; })(%s)`, in))
				if got != tc.want {
					t.Errorf("render(%q)\n got %s\nwant %s", tc.in, got, tc.want)
				}
			})
		}
		// A reply is rendered again for each piece that streams in: text
		// full of unmatched delimiters must not take quadratic time.
		t.Run("unmatched delimiters render in linear time", func(t *testing.T) {
			ms := evalJS[float64](tab, `(() => {
				const s = '*a _b \x60c [d ~~e **f '.repeat(5000); // \x60: a backtick
				const t0 = performance.now();
				const d = document.createElement('div');
				d.append(ruvllm.markdown.render(s + '\n' + s));
				if (!d.textContent.includes('[d ~~e')) throw new Error('text lost');
				return performance.now() - t0;
			})()`)
			t.Logf("%d characters rendered in %.0f ms", 2*18*5000, ms)
			if ms > 3000 {
				t.Errorf("rendering took %.0f ms", ms)
			}
		})
		tab.checkClean()
	})

	t.Run("hostile output and reasoning", func(t *testing.T) {
		// Room for the script's byte tokens.
		fs := newFakeServerWith(t, Options{}, thinkingChat(t), func(e *fakeEngine) { e.maxLen = 2048 })
		fs.eng.script = textScript(fs.tok, "<think>\nI could write <b>tags</b> & <script>window.pwned = 1</script>.\n</think>\n\n"+
			"# Answer\n<img src=x onerror=\"window.pwned = 2\"> <script>window.pwned = 3</script>\n"+
			"**bold** [bad](javascript:window.pwned=4) [good](https://example.com/)")
		tab := b.tab(t)
		tab.do(chromedp.Navigate(fs.URL + "/"))
		tab.waitFor(`document.getElementById('model').dataset.loaded === 'true'`)
		tab.do(chromedp.SendKeys(chromedp.ID("input"), "Show me HTML"), chromedp.Click(chromedp.ID("send")))
		tab.waitFor(`document.querySelector('.message.assistant[data-done]') !== null`)
		type result struct {
			Pwned              bool
			Injected           int
			Answer, Reasoning  string
			ReasoningShown     bool
			ReasoningOpen      bool
			Heading, Bold      string
			Links              []string
			StoredReasoningLen int
		}
		got := evalJS[result](tab, `(() => {
			const m = document.querySelector('.message.assistant');
			const r = m.querySelector('details.reasoning');
			return {
				pwned: window.pwned !== undefined,
				injected: document.querySelectorAll('#messages img, #messages script, #messages b, #messages [onerror]').length,
				answer: m.querySelector('.answer').textContent,
				reasoning: r.querySelector('.reasoning-content').textContent,
				reasoningShown: !r.hidden,
				reasoningOpen: r.open,
				heading: (m.querySelector('.answer h1') || {}).textContent || '',
				bold: (m.querySelector('.answer strong') || {}).textContent || '',
				links: Array.from(m.querySelectorAll('a'), a => a.href),
				storedReasoningLen: ruvllm.state.messages[1].reasoning.length,
			};
		})()`)
		if got.Pwned || got.Injected != 0 {
			t.Errorf("model output ran or became elements: pwned %v, %d elements", got.Pwned, got.Injected)
		}
		for _, want := range []string{`<img src=x onerror="window.pwned = 2">`, `<script>window.pwned = 3</script>`} {
			if !strings.Contains(got.Answer, want) {
				t.Errorf("the answer %q does not show %s as text", got.Answer, want)
			}
		}
		if got.Heading != "Answer" || got.Bold != "bold" || !slices.Equal(got.Links, []string{"https://example.com/"}) {
			t.Errorf("Markdown: heading %q, bold %q, links %q in %q", got.Heading, got.Bold, got.Links, got.Answer)
		}
		if !got.ReasoningShown || got.ReasoningOpen || !strings.Contains(got.Reasoning, "I could write <b>tags</b> & <script>") ||
			strings.Contains(got.Answer, "I could write") || got.StoredReasoningLen == 0 {
			t.Errorf("reasoning shown %v, open %v: %q; answer %q", got.ReasoningShown, got.ReasoningOpen, got.Reasoning, got.Answer)
		}
		tab.do(chromedp.Click(chromedp.CSS("details.reasoning summary")))
		tab.waitFor(`document.querySelector('details.reasoning').open`)
		tab.screenshot("webui-reasoning.png")
		tab.checkClean()
	})

	t.Run("stop", func(t *testing.T) {
		fs := newFakeServer(t, Options{}, func(e *fakeEngine) { e.delay = 40 * time.Millisecond })
		tab := b.tab(t)
		tab.do(chromedp.Navigate(fs.URL + "/"))
		tab.waitFor(`document.getElementById('model').dataset.loaded === 'true'`)
		tab.do(chromedp.SendKeys(chromedp.ID("input"), "Go on forever"), chromedp.Click(chromedp.ID("send")))
		tab.waitFor(`document.getElementById('stop').disabled === false && document.querySelector('.message.assistant .answer')?.textContent.includes('Hello')`)
		tab.do(chromedp.Click(chromedp.ID("stop")))
		tab.waitFor(`document.querySelector('.message.assistant[data-done]') !== null`)
		fs.eng.waitIdle(t, 10*time.Second)
		if n := fs.eng.cancelledCount(); n != 1 {
			t.Errorf("%d requests cancelled, want 1", n)
		}
		type result struct {
			Meta, Kept     string
			SendOK, StopOK bool
		}
		got := evalJS[result](tab, `({meta: document.querySelector('.message.assistant .meta').textContent,
			kept: ruvllm.state.messages[1].content,
			sendOK: !document.getElementById('send').disabled, stopOK: !document.getElementById('stop').disabled})`)
		if !strings.Contains(got.Meta, "stopped") || !strings.HasPrefix(strings.TrimSpace(got.Kept), "Hello") || !got.SendOK || got.StopOK {
			t.Errorf("after stop: %+v", got)
		}
		tab.checkClean()
	})

	t.Run("api key", func(t *testing.T) {
		const key = "sk-page-key"
		fs := newFakeServer(t, Options{APIKeys: []string{key}}, nil)
		fs.eng.script = textScript(fs.tok, "Hi there.")
		rec := &chatRecorder{h: fs.Config.Handler}
		hs := startHTTP(t, rec)
		tab := b.tab(t)
		tab.do(chromedp.Navigate(hs.URL + "/"))
		tab.waitFor(`!document.getElementById('key-dialog').hidden`)
		if msg := evalJS[string](tab, `document.getElementById('key-message').textContent`); !strings.Contains(msg, "needs an API key") {
			t.Errorf("the dialog says %q", msg)
		}
		tab.screenshot("webui-api-key.png")
		tab.do(chromedp.SendKeys(chromedp.ID("key-input"), "wrong-key"), chromedp.Click(chromedp.ID("key-submit")))
		tab.waitFor(`!document.getElementById('key-dialog').hidden && document.getElementById('key-message').textContent.includes('refused')`)
		tab.do(chromedp.SendKeys(chromedp.ID("key-input"), key), chromedp.Click(chromedp.ID("key-submit")))
		tab.waitFor(`document.getElementById('model').dataset.loaded === 'true' && document.getElementById('key-dialog').hidden`)
		tab.do(chromedp.SendKeys(chromedp.ID("input"), "hello"), chromedp.Click(chromedp.ID("send")))
		tab.waitFor(`document.querySelector('.message.assistant[data-done]') !== null`)
		type result struct{ Reply, Session, Local string }
		got := evalJS[result](tab, `({reply: ruvllm.state.messages[1].content,
			session: sessionStorage.getItem('ruvllm.apiKey'), local: localStorage.getItem('ruvllm.apiKey') || ''})`)
		if strings.TrimSpace(got.Reply) != "Hi there." || got.Session != key || got.Local != "" {
			t.Errorf("%+v", got)
		}
		if a := rec.last(t).header.Get("Authorization"); a != "Bearer "+key {
			t.Errorf("the page sent Authorization %q", a)
		}
		tab.checkClean()
	})

	t.Run("cors", func(t *testing.T) {
		const key = "sk-cors"
		api := newFakeServer(t, Options{CORSOrigins: []string{"*"}, APIKeys: []string{key}}, nil)
		closed := newFakeServer(t, Options{APIKeys: []string{key}}, nil)
		other := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "<!doctype html><title>another origin</title><p>a page of another origin</p>")
		}))
		tab := b.tab(t)
		tab.do(chromedp.Navigate(other.URL + "/"))
		type result struct {
			Status          int
			Text, RequestID string
			Error           string
		}
		for _, tc := range []struct {
			name, url, method string
			headers           map[string]string
			body              string
			status            int
			text              string // that the body (or the error) holds
		}{
			{"streamed chat with a bearer key", api.URL + "/v1/chat/completions", "POST",
				map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"},
				`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`, 200, "data: [DONE]"},
			{"x-api-key and anthropic-version", api.URL + "/v1/models", "GET",
				map[string]string{"x-api-key": key, "anthropic-version": "2023-06-01"}, "", 200, `"fake-model"`},
			{"no key: the 401 is readable", api.URL + "/v1/chat/completions", "POST",
				map[string]string{"Content-Type": "application/json"}, `{"messages":[{"role":"user","content":"hi"}]}`, 401, "API key"},
			{"CORS off: the browser refuses", closed.URL + "/v1/models", "GET",
				map[string]string{"Authorization": "Bearer " + key}, "", 0, "Failed to fetch"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				args, _ := json.Marshal(map[string]any{"url": tc.url, "init": map[string]any{"method": tc.method, "headers": tc.headers, "body": nilIfEmpty(tc.body)}})
				got := evalJS[result](tab, fmt.Sprintf(`(async a => {
					try {
						const r = await fetch(a.url, a.init);
						return {status: r.status, text: await r.text(), requestID: r.headers.get('X-Request-Id') || ''};
					} catch (e) {
						return {error: String(e)};
					}
				})(%s)`, args), chromedp.EvalAwaitPromise)
				if got.Status != tc.status || !strings.Contains(got.Text+got.Error, tc.text) {
					t.Fatalf("%+v", got)
				}
				if tc.status != 0 && got.RequestID == "" {
					t.Error("X-Request-Id is not exposed to the page")
				}
			})
		}
		tab.checkClean()
	})
}

// nilIfEmpty is nil for "", so that fetch sends no body.
func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// pageModel is the real model the page's reply test talks to: stories260K
// when ../shared has it, else the synthesized tiny model.
func pageModel() realOptions {
	if d := shared.Dir(); d != "" {
		if _, err := os.Stat(filepath.Join(d, "models", "stories260K.gguf")); err == nil {
			return realOptions{stories: true}
		}
	}
	return realOptions{}
}

// thinkingChat is ChatML that a reasoning parser recognises as a thinking
// model's template (it names the think tags).
func thinkingChat(t *testing.T) templateChat {
	t.Helper()
	tmpl, err := chat.Parse("{#- this model thinks in <think></think> tags -#}" + chatMLRaising)
	if err != nil {
		t.Fatal(err)
	}
	return templateChat{tmpl}
}

// chatRecorder passes requests on to h and keeps the chat requests' bodies
// and headers, to see what the page sent.
type chatRecorder struct {
	h     http.Handler
	mu    sync.Mutex
	chats []recordedRequest
}

type recordedRequest struct {
	body   []byte
	header http.Header
}

func (c *chatRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions" {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		c.mu.Lock()
		c.chats = append(c.chats, recordedRequest{body: b, header: r.Header.Clone()})
		c.mu.Unlock()
	}
	c.h.ServeHTTP(w, r)
}

// last is the last chat request; the test fails without one.
func (c *chatRecorder) last(t *testing.T) recordedRequest {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.chats) == 0 {
		t.Fatal("the page sent no chat request")
	}
	return c.chats[len(c.chats)-1]
}

// browser is one headless Chromium for a test, each case in a tab of its
// own.
type browser struct {
	ctx context.Context
	dir string // where screenshots go
}

// startBrowser starts Chromium, or skips the test when it is not
// installed. Its flags keep it off the network (no background requests to
// Google's services) and out of the user's profile.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("%s is absent (apt-get install chromium; .ci/run installs it): the chat page is not tested in a browser", chromiumPath)
	}
	if testing.Short() {
		t.Skip("-short: no browser")
	}
	dir := os.Getenv("RUVLLM_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 800),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first Run starts the browser; it lives as long as ctx.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	return &browser{ctx: ctx, dir: dir}
}

// browserTab is one tab, with what went wrong in it: uncaught exceptions,
// console errors and dialogs (which the page never opens).
type browserTab struct {
	t    *testing.T
	ctx  context.Context
	dir  string
	mu   sync.Mutex
	errs []string
}

func (b *browser) tab(t *testing.T) *browserTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, browserTimeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
	})
	tab := &browserTab{t: t, ctx: ctx, dir: b.dir}
	console := chromedp.Console(ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			// The browser logs the refused requests (401s, CORS) itself:
			// those are the cases, not faults of the page.
			if m.IsException() || m.Type == chromedp.ConsoleError && m.Source == "" {
				tab.problem(m.String())
			}
		}
	}()
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			tab.problem("a dialog opened: " + ev.Message)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return tab
}

func (tab *browserTab) problem(s string) {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	tab.errs = append(tab.errs, s)
}

// checkClean fails the test when the page threw, logged an error or
// opened a dialog.
func (tab *browserTab) checkClean() {
	tab.t.Helper()
	tab.mu.Lock()
	defer tab.mu.Unlock()
	for _, e := range tab.errs {
		tab.t.Errorf("in the page: %s", e)
	}
}

// do runs the steps; an error ends the test.
func (tab *browserTab) do(steps ...chromedp.Action[chromedp.Void]) {
	tab.t.Helper()
	if err := chromedp.Do(tab.ctx, steps...); err != nil {
		tab.t.Fatalf("in the browser: %v (%s)", err, tab.errs)
	}
}

// waitFor waits until the JavaScript expression is true.
func (tab *browserTab) waitFor(expr string) {
	tab.t.Helper()
	if _, err := chromedp.Run(tab.ctx, chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(browserTimeout))); err != nil {
		tab.t.Fatalf("waiting for %s: %v (%s)", expr, err, tab.errs)
	}
}

// evalJS is the value of a JavaScript expression.
func evalJS[T any](tab *browserTab, expr string, opts ...chromedp.EvaluateOption) T {
	tab.t.Helper()
	v, err := chromedp.Run(tab.ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		tab.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// screenshot saves the whole page as a PNG and logs where.
func (tab *browserTab) screenshot(name string) {
	tab.t.Helper()
	png, err := chromedp.Run(tab.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tab.t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(tab.dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		tab.t.Fatal(err)
	}
	tab.t.Logf("screenshot: %s", p)
}
