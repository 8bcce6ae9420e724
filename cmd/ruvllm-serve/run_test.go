package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/session"
)

// concatTemplate renders a chat as its messages' contents one after the
// other, so that stories260K (a model without a chat) continues the text,
// and what reaches the model is known.
const concatTemplate = "{% for m in messages %}{{ m.content }}{% endfor %}"

// storiesGreedy is stories260K's greedy continuation of "Once upon a
// time", 20 tokens of it.
const storiesGreedy = ", there was a little girl named Lily. She loved to play outsid"

// chatRun runs `run` with args on the input in, Ctrl-C from intr (nil:
// none), and returns stdout, stderr and the error.
func chatRun(t *testing.T, in io.Reader, intr chan os.Signal, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut syncBuffer
	if intr == nil {
		intr = make(chan os.Signal)
	}
	err := runChat(&env{stdout: &out, stderr: &errOut, log: zerolog.Nop()}, args, in, intr)
	return out.String(), errOut.String(), err
}

// syncBuffer is a bytes.Buffer safe for the writes of the generation's
// goroutine and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	// onWrite, when set, is called after each write.
	onWrite func(string)
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.b.Write(p)
	f := s.onWrite
	s.mu.Unlock()
	if f != nil {
		f(string(p))
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunOnce answers a prompt given as an argument, piped in, or both,
// with the answer alone on stdout.
func TestRunOnce(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	base := []string{"--temp", "0", "-n", "20", "--chat-template", concatTemplate}
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"piped", []string{stories}, "Once upon a time\n", storiesGreedy + "\n"},
		{"argument", []string{stories, "Once", "upon", "a", "time"}, "", storiesGreedy + "\n"},
		{"--model and argument", []string{"-m", stories, "Once upon a time"}, "", storiesGreedy + "\n"},
		{"-i with an argument: it opens the chat", []string{stories, "-i", "Once upon a time"}, "/show history\n",
			storiesGreedy + "\nuser: Once upon a time\nassistant: " + storiesGreedy + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, err := chatRun(t, strings.NewReader(tt.stdin), nil, append(tt.args, base...)...)
			if err != nil || out != tt.want {
				t.Fatalf("err %v, stdout %q (stderr %q); want %q", err, out, stderr, tt.want)
			}
			if strings.Contains(out, "\x1b[") || strings.Contains(out, ">>>") {
				t.Errorf("terminal sequences or prompts in a script's output: %q", out)
			}
		})
	}
	t.Run("argument and piped input", func(t *testing.T) {
		// The prompt is the argument, a blank line, then the input: its
		// tokens are what tokenize counts for that text.
		_, stderr, err := chatRun(t, strings.NewReader("a time\n"), nil, append([]string{stories, "Once upon", "--verbose"}, base...)...)
		if err != nil {
			t.Fatal(err)
		}
		ids, _, _ := run(t, "tokenize", "--model", stories, "Once upon\n\na time")
		var want []int
		if err := json.Unmarshal([]byte(ids), &want); err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile(`prompt: (\d+) tokens`).FindStringSubmatch(stderr); m == nil || m[1] != strconv.Itoa(len(want)) {
			t.Errorf("stderr %q: want a prompt of %d tokens", stderr, len(want))
		}
	})
}

func TestRunUsageErrors(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	tests := []struct {
		name  string
		args  []string
		stdin string
		say   string
	}{
		{"no model", nil, "", "name the model"},
		{"not a file nor a name", []string{"nosuch.gguf", "hi"}, "", "not a GGUF file, nor a Hugging Face name"},
		{"nothing to answer", []string{stories}, "\n", "nothing to answer"},
		{"bad flag value", []string{stories, "--top-p", "2", "hi"}, "", "top_p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := chatRun(t, strings.NewReader(tt.stdin), nil, tt.args...)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.say) {
				t.Fatalf("err %v; want a usage error saying %q", err, tt.say)
			}
		})
	}
}

// TestRunChatScript holds a chat read from standard input (-i): the
// history is kept across turns (the second prompt holds the first turn,
// whose tokens the engine reuses), shown, and cleared; settings change
// and go back; /bye ends the chat before the lines after it.
func TestRunChatScript(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	script := strings.Join([]string{
		"/set temperature 0",
		"/set parameter num_predict 20",
		"/set top_k 1.5",
		"/set nosuch 1",
		"Once upon a time",
		"/show history",
		"She",
		"/show history",
		"/system Be brief.",
		"/show system",
		"/clear",
		"/show history",
		"/unset temperature",
		"/set",
		"/bye",
		"Once upon a time",
	}, "\n")
	out, stderr, err := chatRun(t, strings.NewReader(script), nil, stories, "-i", "--verbose", "--temp", "0.5", "--chat-template", concatTemplate)
	if err != nil {
		t.Fatal(err)
	}
	firstTurn := "user: Once upon a time\nassistant: " + storiesGreedy + "\n"
	for _, want := range []string{
		"Set temperature to 0.\nSet num_predict to 20.\n",
		storiesGreedy + "\n" + firstTurn,
		firstTurn + "user: She\nassistant: ",
		"Set the system message.\nBe brief.\n",
		"Cleared the conversation.\nThe conversation is empty.\n",
		"Set temperature back to 0.5.\n",
		"num_predict      20 ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, storiesGreedy) != 3 { // the answer and the history shown twice; none after /bye
		t.Errorf("the first answer appears %d times, want 3:\n%s", strings.Count(out, storiesGreedy), out)
	}
	for _, want := range []string{"/set top_k: \"1.5\" is not a whole number", "Unknown setting nosuch"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// The second turn's prompt is the first turn and "She": most of it
	// comes from the prefix cache.
	m := regexp.MustCompile(`prompt: (\d+) tokens \((\d+) cached\)`).FindAllStringSubmatch(stderr, -1)
	if len(m) != 2 || m[0][1] != "5" || m[1][2] == "0" || len(m[1][1]) < 2 {
		t.Errorf("prompt sizes %v, want 5 then a longer prompt mostly cached:\n%s", m, stderr)
	}
}

// TestRunInterrupt stops an answer with Ctrl-C and goes on with the chat,
// which keeps the answer as far as it went; two Ctrl-C in a row at the
// prompt end the chat.
func TestRunInterrupt(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	intr := make(chan os.Signal, 1)
	lines, write := io.Pipe()
	var out, errOut syncBuffer
	var once sync.Once
	out.onWrite = func(s string) {
		if strings.Contains(s, "Lily") {
			once.Do(func() { intr <- os.Interrupt })
		}
	}
	done := make(chan error, 1)
	go func() {
		done <- runChat(&env{stdout: &out, stderr: &errOut, log: zerolog.Nop()}, []string{stories, "-i", "--temp", "0", "--ctx", "2048", "--chat-template", concatTemplate}, lines, intr)
	}()
	io.WriteString(write, "Once upon a time\n/show history\n")
	waitFor(t, &out, "assistant: ")
	if n := len(out.String()); n > 2000 {
		t.Fatalf("the answer went on after Ctrl-C (%d bytes):\n%s", n, out.String())
	}
	hist := out.String()[strings.Index(out.String(), "user: "):]
	if !strings.HasPrefix(hist, "user: Once upon a time\nassistant: , there was a little girl named Lily") {
		t.Errorf("history after Ctrl-C: %q", hist)
	}
	// At the prompt: the first Ctrl-C explains, the second ends the chat.
	intr <- os.Interrupt
	waitFor(t, &out, "Use Ctrl + d or /bye to exit.")
	select {
	case err := <-done:
		t.Fatalf("one Ctrl-C at the prompt ended the chat: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	intr <- os.Interrupt
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("two Ctrl-C at the prompt did not end the chat")
	}
	write.Close()
}

// waitFor waits until out holds s.
func waitFor(t *testing.T, out *syncBuffer, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", s, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReplyPrinter shows a thinking model's reasoning apart from its
// answer on a terminal, and only the answer elsewhere or when hidden.
func TestReplyPrinter(t *testing.T) {
	evs := []session.Event{
		{Kind: session.EventReasoning, Text: "Let me see."},
		{Kind: session.EventReasoning, Text: " Two."},
		{Kind: session.EventText, Text: "\n\n"},
		{Kind: session.EventText, Text: "It is 2."},
		{Kind: session.EventFinish, Finish: session.FinishStop},
	}
	tests := []struct {
		name                string
		color, showThinking bool
		want                string
	}{
		{"terminal", true, true, "\x1b[2mThinking...\nLet me see. Two.\n...done thinking.\x1b[0m\n\nIt is 2.\n"},
		{"terminal, hidden", true, false, "It is 2.\n"},
		{"pipe", false, false, "It is 2.\n"},
		{"pipe, shown", false, true, "Thinking...\nLet me see. Two.\n...done thinking.\n\nIt is 2.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			p := &replyPrinter{w: &b, color: tt.color, showThinking: tt.showThinking}
			for _, e := range evs {
				if err := p.Send([]session.Event{e}); err != nil {
					t.Fatal(err)
				}
			}
			p.end()
			if b.String() != tt.want {
				t.Errorf("got %q, want %q", b.String(), tt.want)
			}
			if p.content.String() != "\n\nIt is 2." {
				t.Errorf("kept answer %q", p.content.String())
			}
		})
	}
}

func TestSplitQuoted(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{"", nil, false},
		{"a b", []string{"a", "b"}, false},
		{`"\n\n" User:`, []string{"\n\n", "User:"}, false},
		{`"a b"  c`, []string{"a b", "c"}, false},
		{`"open`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := splitQuoted(tt.in)
			if (err != nil) != tt.err || strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Errorf("splitQuoted(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

// TestModelByHubName runs a model named by its Hugging Face name: pulled
// from the Hub the first time (the repository's one file, with no
// Q4_K_M), from the cache after.
func TestModelByHubName(t *testing.T) {
	b, err := os.ReadFile(shared.Path(t, "models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	testHub(t, map[string][]byte{"stories260K-F32.gguf": b})
	tests := []struct {
		name string
		exec func() (string, string, error)
	}{
		{"run", func() (string, string, error) {
			return chatRun(t, strings.NewReader("Once upon a time"), nil, "owner/repo", "--temp", "0", "-n", "20", "--chat-template", concatTemplate)
		}},
		{"generate --model", func() (string, string, error) {
			out, stderr, code := run(t, "generate", "--model", "hf.co/owner/repo:F32", "--prompt", "Once upon a time", "--temp", "0", "-n", "20")
			if code != 0 {
				return out, stderr, errUsage
			}
			return out, stderr, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, err := tt.exec()
			if err != nil || !strings.HasPrefix(out, storiesGreedy+"\n") {
				t.Fatalf("err %v, stdout %q, stderr %q; want %q", err, out, stderr, storiesGreedy)
			}
		})
	}
}
