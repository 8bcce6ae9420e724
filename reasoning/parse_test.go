package reasoning

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/shared"
)

// Generation prompts as the families' templates render them (see
// ../shared/templates).
const (
	qwenPrompt        = "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"
	qwenNoThinkPrompt = qwenPrompt + "<think>\n\n</think>\n\n"
	r1Prompt          = "<｜begin▁of▁sentence｜><｜User｜>Hello!<｜Assistant｜><think>\n"
	v31ThinkPrompt    = "<｜begin▁of▁sentence｜><｜User｜>Hello!<｜Assistant｜><think>"
	v31NoThinkPrompt  = "<｜begin▁of▁sentence｜><｜User｜>Hello!<｜Assistant｜></think>"
	granitePrompt     = "<|start_of_role|>user<|end_of_role|>Hello!<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"
	harmonyPrompt     = "<|start|>user<|message|>Hello!<|end|><|start|>assistant"
	// Command R7B's generation prompt, and with thinking turned off.
	commandRPrompt        = "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello!<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
	commandRNoThinkPrompt = commandRPrompt + "<|START_THINKING|><|END_THINKING|>"
)

type parseCase struct {
	name      string
	f         Format
	prompt    string
	out       string
	content   string
	reasoning string
	calls     []Call
}

var parseCases = []parseCase{
	// Think tags.
	{"qwen3 thinks", Think, qwenPrompt, "<think>\nThe user greets me. I greet back.\n</think>\n\nHello! How can I help?",
		"Hello! How can I help?", "The user greets me. I greet back.", nil},
	{"qwen3 empty think block", Think, qwenPrompt, "<think>\n\n</think>\n\nHi.", "Hi.", "", nil},
	{"qwen3 enable_thinking false", Think, qwenNoThinkPrompt, "Hi there.", "Hi there.", "", nil},
	{"no think block", Think, qwenPrompt, "Hello!\n", "Hello!\n", "", nil},
	{"unclosed reasoning", Think, qwenPrompt, "<think>\nLet me count: 1, 2, 3\n", "", "Let me count: 1, 2, 3", nil},
	{"text before think is all content", Think, qwenPrompt, "Sure. <think>hmm</think> ok", "Sure. <think>hmm</think> ok", "", nil},
	{"whitespace before think", Think, qwenPrompt, "\n\n<think>a</think>b", "b", "a", nil},
	{"whitespace before the answer", Think, qwenPrompt, "\n  Hello", "\n  Hello", "", nil},
	{"r1 forced open", Think, r1Prompt, "Okay, the user says hello.\n</think>\n\nHello!", "Hello!", "Okay, the user says hello.", nil},
	{"r1 forced open, think written again", Think, r1Prompt, "<think>\nOkay.\n</think>\n\nHi", "Hi", "Okay.", nil},
	{"r1 forced open, unclosed", Think, r1Prompt, "Okay, so", "", "Okay, so", nil},
	{"r1 forced open, empty", Think, r1Prompt, "\n</think>\n\nHi", "Hi", "", nil},
	{"v3.1 thinking", Think, v31ThinkPrompt, "The user says hi.</think>Hello!", "Hello!", "The user says hi.", nil},
	{"v3.1 not thinking", Think, v31NoThinkPrompt, "Hello!", "Hello!", "", nil},
	{"v3.1 not thinking, a stray close tag", Think, v31NoThinkPrompt, "a</think>b", "a</think>b", "", nil},
	{"two think blocks", Think, qwenPrompt, "<think>a</think>\n<think>b</think>c", "c", "a\nb", nil},
	{"think tags in the answer", Think, qwenPrompt, "<think>x</think>Use <think> tags.", "Use <think> tags.", "x", nil},
	{"inner whitespace kept", Think, qwenPrompt, "<think>\nline one\n\nline two\n</think>\n\nA\n\nB\n", "A\n\nB\n", "line one\n\nline two", nil},
	{"unicode", Think, qwenPrompt, "<think>日本語 🙂</think>café", "café", "日本語 🙂", nil},
	{"cut in the close tag", Think, qwenPrompt, "<think>abc</thi", "", "abc</thi", nil},
	{"cut in the open tag", Think, qwenPrompt, "\n<thi", "\n<thi", "", nil},
	{"lookalike tags", Think, qwenPrompt, "<think><thinking>a</thinkx></think><th", "<th", "<thinking>a</thinkx>", nil},
	{"empty output", Think, qwenPrompt, "", "", "", nil},

	// Command R7B.
	{"command r7b thinks", CommandR, commandRPrompt, "<|START_THINKING|>The user greets me.<|END_THINKING|><|START_RESPONSE|>Hello! How can I help?<|END_RESPONSE|>",
		"Hello! How can I help?", "The user greets me.", nil},
	{"command r7b response only", CommandR, commandRPrompt, "<|START_RESPONSE|>Hi<|END_RESPONSE|>", "Hi", "", nil},
	{"command r7b thinking off", CommandR, commandRNoThinkPrompt, "<|START_RESPONSE|>Hi<|END_RESPONSE|>", "Hi", "", nil},
	{"command r7b forced open", CommandR, commandRPrompt + "<|START_THINKING|>", "Plan.<|END_THINKING|><|START_RESPONSE|>Hi", "Hi", "Plan.", nil},
	{"command r7b plain text", CommandR, commandRPrompt, "Hello!", "Hello!", "", nil},
	{"command r7b think tags are text", CommandR, commandRPrompt, "<think>a</think>b", "<think>a</think>b", "", nil},

	// Granite 3.3.
	{"granite thinks", Granite, granitePrompt, "<think>The user greets me.</think><response>Hello! How can I help?</response>",
		"Hello! How can I help?", "The user greets me.", nil},
	{"granite with newlines", Granite, granitePrompt, "<think>\nThe user greets me.\n</think>\n<response>\nHello!\n</response>", "Hello!", "The user greets me.", nil},
	{"granite not thinking", Granite, granitePrompt, "Hello! How can I help you today?", "Hello! How can I help you today?", "", nil},
	{"granite response only", Granite, granitePrompt, "<response>Hi</response>", "Hi", "", nil},
	{"granite cut in the response", Granite, granitePrompt, "<think>a</think><response>Hel", "Hel", "a", nil},
	{"granite without response tags", Granite, granitePrompt, "<think>a</think>\nHello", "Hello", "a", nil},
	{"granite text after the response", Granite, granitePrompt, "<think>a</think><response>Hi</response>\nBye", "Hi\nBye", "a", nil},
	{"granite unclosed reasoning", Granite, granitePrompt, "<think>thinking about <response>", "", "thinking about <response>", nil},

	// Harmony.
	{"harmony analysis and final", Harmony, harmonyPrompt,
		"<|channel|>analysis<|message|>User says hello. Respond.<|end|><|start|>assistant<|channel|>final<|message|>Hello! How can I help?",
		"Hello! How can I help?", "User says hello. Respond.", nil},
	{"harmony final only", Harmony, harmonyPrompt, "<|channel|>final<|message|>Hi", "Hi", "", nil},
	{"harmony call, recipient after the channel", Harmony, harmonyPrompt,
		"<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
		"", "Need the weather.", []Call{{"get_weather", `{"city":"Paris"}`}}},
	{"harmony call, recipient before the channel", Harmony, harmonyPrompt,
		"<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}",
		"", "Need the weather.", []Call{{"get_weather", `{"city": "Paris"}`}}},
	{"harmony call right after the prompt", Harmony, harmonyPrompt,
		" to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}", "", "", []Call{{"get_weather", `{"city": "Paris"}`}}},
	{"harmony preamble", Harmony, harmonyPrompt,
		"<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary<|message|>Let me check the weather.<|end|>" +
			"<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
		"Let me check the weather.", "Need weather.", []Call{{"get_weather", `{"city":"Paris"}`}}},
	{"harmony two calls", Harmony, harmonyPrompt,
		"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>" +
			"<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Rome\"}<|call|>",
		"", "", []Call{{"get_weather", `{"city":"Paris"}`}, {"get_weather", `{"city":"Rome"}`}}},
	{"harmony unclosed analysis", Harmony, harmonyPrompt, "<|channel|>analysis<|message|>Thinking about ", "", "Thinking about", nil},
	{"harmony cut in a header", Harmony, harmonyPrompt, "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>fin", "", "x", nil},
	{"harmony call cut short", Harmony, harmonyPrompt, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1", "", "", []Call{{"f", `{"a": 1`}}},
	{"harmony call without arguments", Harmony, harmonyPrompt, "<|channel|>commentary to=functions.now<|message|>", "", "", []Call{{"now", "{}"}}},
	{"harmony plain text", Harmony, harmonyPrompt, "Hello there", "Hello there", "", nil},
	{"harmony two analysis messages", Harmony, harmonyPrompt,
		"<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b<|end|><|start|>assistant<|channel|>final<|message|>c",
		"c", "a\nb", nil},
	{"harmony return in the text", Harmony, harmonyPrompt, "<|channel|>final<|message|>Hi<|return|>", "Hi", "", nil},
	{"harmony start repeated", Harmony, harmonyPrompt, "<|start|>assistant<|channel|>final<|message|>Hi", "Hi", "", nil},
	{"harmony end left out", Harmony, harmonyPrompt, "<|channel|>analysis<|message|>a<|channel|>final<|message|>b", "b", "a", nil},
	{"harmony built-in tool on analysis", Harmony, harmonyPrompt, "<|channel|>analysis to=browser.search code<|message|>{\"query\":\"x\"}", "", "",
		[]Call{{"browser.search", `{"query":"x"}`}}},
	{"harmony lookalike markers", Harmony, harmonyPrompt, "<|channel|>final<|message|>a <| b <|en |> <|star", "a <| b <|en |> <|star", "", nil},
	{"harmony text between messages", Harmony, harmonyPrompt, "<|channel|>final<|message|>a<|end|>junk\n<|start|>assistant<|channel|>final<|message|>b", "a\nb", "", nil},
	{"harmony empty prompt", Harmony, "", "<|channel|>final<|message|>Hi", "Hi", "", nil},
	{"harmony prompt ends closed", Harmony, harmonyPrompt + "<|channel|>final<|message|>Hi<|end|>", "<|start|>assistant<|channel|>final<|message|>Again", "Again", "", nil},
	{"harmony prefilled final", Harmony, harmonyPrompt + "<|channel|>final<|message|>The answer", " is 4.", " is 4.", "", nil},

	// What the parser holds back is bounded: a block opens only after
	// little whitespace, a harmony header is short.
	{"long whitespace at the start", Think, qwenPrompt, strings.Repeat("\n", 70) + "<think>x</think>y", strings.Repeat("\n", 70) + "<think>x</think>y", "", nil},
	{"long whitespace after a block", Think, qwenPrompt, "<think>a</think>" + strings.Repeat(" ", 70) + "<think>b</think>c", "<think>b</think>c", "a", nil},
	{"long whitespace, forced open", Think, r1Prompt, strings.Repeat(" ", 70) + "<think>x</think>y", "y", "<think>x", nil},
	{"harmony long plain text", Harmony, harmonyPrompt, strings.Repeat("word ", 150), strings.Repeat("word ", 150), "", nil},
	{"harmony long plain text, then messages", Harmony, harmonyPrompt,
		strings.Repeat("ß", 300) + "<|end|><|start|>assistant<|channel|>final<|message|>y", strings.Repeat("ß", 300) + "\ny", "", nil},
	{"harmony long header", Harmony, harmonyPrompt, "<|channel|>analysis" + strings.Repeat(" ", 600) + "<|message|>r<|end|>",
		"<|channel|>analysis" + strings.Repeat(" ", 600) + "<|message|>r", "", nil},
	// The first header is not one: 512 bytes of content, less the prompt's
	// "assistant", and a message's text up to the next <|channel|>, which
	// starts a header that is not one either.
	{"harmony long headers", Harmony, harmonyPrompt, strings.Repeat("<|channel|>"+strings.Repeat("x", 300), 4),
		strings.Repeat("<|channel|>"+strings.Repeat("x", 300), 2) + "\n" + strings.Repeat("<|channel|>"+strings.Repeat("x", 300), 2), "", nil},

	// No reasoning.
	{"none", None, qwenPrompt, "Hello <think>x</think>", "Hello <think>x</think>", "", nil},
}

// collect feeds out to a parser of f in the pieces and checks that the
// events are well formed: no empty texts, each call started (in order, with
// its index) before its arguments and ended once.
func collect(t testing.TB, f Format, prompt string, pieces []string) []Event {
	t.Helper()
	p := f.NewParser(prompt)
	var evs []Event
	for _, s := range pieces {
		evs = append(evs, p.Add(s)...)
	}
	evs = append(evs, p.Finish()...)
	calls, open := 0, false
	for i, e := range evs {
		switch e.Kind {
		case Content, Reasoning:
			if e.Text == "" {
				t.Fatalf("event %d: empty %s", i, e.Kind)
			}
		case CallStart:
			if open || e.Call != calls {
				t.Fatalf("event %d: %+v starts a call while call %d open=%v", i, e, calls, open)
			}
			open = true
		case CallArguments, CallEnd:
			if !open || e.Call != calls {
				t.Fatalf("event %d: %+v outside call %d (open=%v)", i, e, calls, open)
			}
			if e.Kind == CallArguments && e.Text == "" {
				t.Fatalf("event %d: empty arguments", i)
			}
			if e.Kind == CallEnd {
				open = false
				calls++
			}
		default:
			t.Fatalf("event %d: kind %d", i, e.Kind)
		}
	}
	if open {
		t.Fatalf("call %d never ended", calls)
	}
	return evs
}

// chunkings are ways to cut out into pieces: at every byte position in two,
// byte by byte, and at random.
func chunkings(out string, r *rand.Rand, random int) [][]string {
	var all [][]string
	for i := 0; i <= len(out); i++ {
		all = append(all, []string{out[:i], out[i:]})
	}
	bytes := make([]string, len(out))
	for i := range len(out) {
		bytes[i] = out[i : i+1]
	}
	all = append(all, bytes)
	for range random {
		var pieces []string
		for rest := out; rest != ""; {
			n := 1 + r.IntN(min(len(rest), 16))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		all = append(all, pieces)
	}
	return all
}

func TestParse(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			content, reasoning, calls := Parse(tc.f, tc.prompt, tc.out)
			if content != tc.content || reasoning != tc.reasoning || !reflect.DeepEqual(calls, tc.calls) {
				t.Fatalf("Parse = content %q reasoning %q calls %+v\nwant content %q reasoning %q calls %+v",
					content, reasoning, calls, tc.content, tc.reasoning, tc.calls)
			}
			for _, pieces := range chunkings(tc.out, r, 30) {
				c, rs, cl := assemble(collect(t, tc.f, tc.prompt, pieces))
				if c != content || rs != reasoning || !reflect.DeepEqual(cl, calls) {
					t.Fatalf("streamed in %q: content %q reasoning %q calls %+v\nwant content %q reasoning %q calls %+v",
						pieces, c, rs, cl, content, reasoning, calls)
				}
			}
		})
	}
}

// TestTemplatePrompts parses outputs after the generation prompts the
// thinking templates really render: DeepSeek-R1's distills always open the
// think block, DeepSeek-V3.1 only with thinking=true, Qwen3 and Granite
// never (Qwen3 closes an empty one with enable_thinking=false); gpt-oss
// ends every prompt with <|start|>assistant.
func TestTemplatePrompts(t *testing.T) {
	for name, f := range thinkers {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(shared.Path(t, "templates", name+".jinja"))
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(shared.Path(t, "templates", name+".cases.json"))
			if err != nil {
				t.Fatal(err)
			}
			var cases []struct {
				AddGenerationPrompt bool           `json:"add_generation_prompt"`
				Kwargs              map[string]any `json:"kwargs"`
				Expected            *string        `json:"expected"`
			}
			if err := json.Unmarshal(b, &cases); err != nil {
				t.Fatal(err)
			}
			if Detect(string(src)) != f {
				t.Fatalf("Detect gives %s, want %s", Detect(string(src)), f)
			}
			n := 0
			for i, c := range cases {
				if !c.AddGenerationPrompt || c.Expected == nil {
					continue
				}
				n++
				prompt := *c.Expected
				if f == Harmony {
					out := "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer."
					if content, reasoning, calls := Parse(f, prompt, out); content != "Answer." || reasoning != "Think." || calls != nil {
						t.Errorf("case %d: %q %q %+v", i, content, reasoning, calls)
					}
					continue
				}
				forced := strings.Contains(name, "R1") || strings.Contains(name, "V3.1") && c.Kwargs["thinking"] == true
				content, reasoning, _ := Parse(f, prompt, "Think.</think>Answer.")
				want := [2]string{"Think.</think>Answer.", ""}
				if forced {
					want = [2]string{"Answer.", "Think."}
				}
				if [2]string{content, reasoning} != want {
					t.Errorf("case %d (kwargs %v, prompt ends %q): content %q reasoning %q, want %q", i, c.Kwargs,
						prompt[max(0, len(prompt)-20):], content, reasoning, want)
				}
			}
			if n == 0 {
				t.Fatal("no generation prompts among the cases")
			}
		})
	}
}

// TestStreamsEarly checks that the parser does not hold back what is
// certain: reasoning and content come out as they are written, all but an
// end that might be a marker's start.
func TestStreamsEarly(t *testing.T) {
	tests := []struct {
		f      Format
		prompt string
		pieces []string
		want   []Event // after the pieces, before Finish
	}{
		{Think, qwenPrompt, []string{"<think>\nI ", "think</", "think>\n\nThe answer"}, []Event{
			{Kind: Reasoning, Text: "I"}, {Kind: Reasoning, Text: " think"}, {Kind: Content, Text: "The answer"}}},
		{Think, r1Prompt, []string{"Hmm", " well", "</think>OK"}, []Event{
			{Kind: Reasoning, Text: "Hmm"}, {Kind: Reasoning, Text: " well"}, {Kind: Content, Text: "OK"}}},
		{Harmony, harmonyPrompt, []string{"<|channel|>commentary to=functions.f json<|message|>{\"a\"", ": 1}"}, []Event{
			{Kind: CallStart, Name: "f"}, {Kind: CallArguments, Text: `{"a"`}, {Kind: CallArguments, Text: ": 1}"}}},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p := tc.f.NewParser(tc.prompt)
			var got []Event
			for _, s := range tc.pieces {
				got = append(got, p.Add(s)...)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzParser checks on any text, for every format, that the parser does
// not panic, that its events are well formed, and that streaming in random
// pieces gives what parsing the whole text gives.
func FuzzParser(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.out, uint64(len(tc.name)))
	}
	prompts := map[Format][]string{
		None:     {""},
		Think:    {qwenPrompt, r1Prompt},
		Granite:  {granitePrompt, granitePrompt + "<think>\n"},
		Harmony:  {harmonyPrompt, "", harmonyPrompt + "<|channel|>analysis<|message|>a"},
		CommandR: {commandRPrompt, commandRPrompt + "<|START_THINKING|>"},
	}
	f.Fuzz(func(t *testing.T, out string, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 7))
		for fm, ps := range prompts {
			for _, prompt := range ps {
				content, reasoning, calls := assemble(collect(t, fm, prompt, []string{out}))
				var pieces []string
				for rest := out; rest != ""; {
					n := 1 + r.IntN(min(len(rest), 12))
					pieces = append(pieces, rest[:n])
					rest = rest[n:]
				}
				c, rs, cl := assemble(collect(t, fm, prompt, pieces))
				if c != content || rs != reasoning || !reflect.DeepEqual(cl, calls) {
					t.Fatalf("%s after %q: streamed in %q: content %q reasoning %q calls %+v\nwhole: content %q reasoning %q calls %+v",
						fm, prompt, pieces, c, rs, cl, content, reasoning, calls)
				}
			}
		}
	})
}

// TestThinkingOff checks what turning thinking off appends to a generation
// prompt, against the prompts llama-server renders with --reasoning-budget 0
// (tools/server/tests/unit/test_template.py: DeepSeek-R1's ends
// "<think>\n</think>", Command R7B's "<|CHATBOT_TOKEN|><|START_THINKING|><|END_THINKING|>").
func TestThinkingOff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		f      Format
		prompt string
		want   string
	}{
		{"r1 opens the block", Think, r1Prompt, "</think>"},
		{"qwen3 opens none", Think, qwenPrompt, ""},
		{"granite opened", Granite, granitePrompt + "<think>\n", "</think>"},
		{"command r7b", CommandR, commandRPrompt, "<|START_THINKING|><|END_THINKING|>"},
		{"command r7b opened", CommandR, commandRPrompt + "<|START_THINKING|>", "<|END_THINKING|>"},
		{"command r7b continuing a message", CommandR, commandRPrompt + "<|START_RESPONSE|>Hel", ""},
		{"harmony", Harmony, harmonyPrompt, ""},
		{"none", None, "<|CHATBOT_TOKEN|>", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.ThinkingOff(tc.prompt); got != tc.want {
				t.Errorf("ThinkingOff = %q, want %q", got, tc.want)
			}
		})
	}
}
