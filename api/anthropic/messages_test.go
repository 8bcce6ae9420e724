package anthropic

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// convert reads the system and messages of body as parseMessages does.
func convert(t *testing.T, body string) (conversion, error) {
	t.Helper()
	f, err := jsonhttp.Parse([]byte(body), "")
	if err != nil {
		t.Fatal(err)
	}
	system, err := parseSystem(f)
	if err != nil {
		return conversion{}, err
	}
	return parseMessages(f, system)
}

// roundTrip is the messages as JSON, for comparing with what a test
// expects written as JSON.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConvertMessages checks how a conversation becomes the template's
// chat messages: the system prompt first (with system messages that open
// the conversation), consecutive turns of a role merged, tool_use blocks
// as tool_calls with object arguments, thinking as reasoning_content, a
// user turn's tool results as tool messages (named after their call,
// errors marked) before its text, and a final assistant text continued.
func TestConvertMessages(t *testing.T) {
	conv, err := convert(t, `{"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.0.abc; cc_entrypoint=cli; cch=36ee5;"},
	 {"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Use tools."}],
	"messages":[
	 {"role":"system","content":"Answer in French."},
	 {"role":"user","content":"Weather in Paris?"},
	 {"role":"user","content":[{"type":"text","text":"And Oslo."}]},
	 {"role":"assistant","content":[{"type":"thinking","thinking":"Two cities.","signature":"x"},{"type":"text","text":"Checking."},
	   {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},
	   {"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"Oslo"}}]},
	 {"role":"user","content":[{"type":"text","text":"Quick!"},
	   {"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},
	   {"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"no"},{"type":"text","text":"data"}],"is_error":true}]},
	 {"role":"system","content":[{"type":"text","text":"Now be formal."}]},
	 {"role":"assistant","content":[{"type":"redacted_thinking","data":"abc"},{"type":"text","text":"Paris is"}]}
	]}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `[
	 {"role":"system","content":"Be brief.\n\nUse tools.\n\nAnswer in French."},
	 {"role":"user","content":"Weather in Paris?\n\nAnd Oslo."},
	 {"role":"assistant","content":"Checking.","reasoning_content":"Two cities.","tool_calls":[
	   {"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}},
	   {"id":"toolu_2","type":"function","function":{"name":"get_weather","arguments":{"city":"Oslo"}}}]},
	 {"role":"tool","tool_call_id":"toolu_1","name":"get_weather","content":"sunny"},
	 {"role":"tool","tool_call_id":"toolu_2","name":"get_weather","content":"Error: no\ndata"},
	 {"role":"user","content":"Quick!"},
	 {"role":"system","content":"Now be formal."},
	 {"role":"assistant","content":"Paris is"}]`
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if got := roundTrip(t, conv.messages); !reflect.DeepEqual(got, w) {
		g, _ := json.MarshalIndent(got, "", " ")
		t.Errorf("messages:\n%s", g)
	}
	if !conv.continueFinal {
		t.Error("the final assistant text is not continued")
	}

	// The billing line leads a system string too.
	conv, err = convert(t, `{"system":"x-anthropic-billing-header: cch=0aaa9;\n\nYou are Claude Code.","messages":[{"role":"user","content":"Hi"}]}`)
	if err != nil || conv.messages[0]["content"] != "You are Claude Code." {
		t.Errorf("billing line in a string: %v %v", conv.messages, err)
	}

	// A final assistant message without text is left out: the model
	// starts its turn.
	conv, err = convert(t, `{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":""}]}`)
	if err != nil || len(conv.messages) != 1 || conv.continueFinal {
		t.Errorf("empty final assistant: %+v, %v", conv, err)
	}
	// A tool call without arguments gets an empty object.
	conv, err = convert(t, `{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := roundTrip(t, conv.messages[1]["tool_calls"]); !reflect.DeepEqual(got, roundTrip(t, []any{map[string]any{"id": "a", "type": "function",
		"function": map[string]any{"name": "f", "arguments": map[string]any{}}}})) {
		t.Errorf("tool_calls %v", got)
	}
	if conv.messages[1]["content"] != "" || conv.messages[2]["content"] != "" {
		t.Errorf("messages %v", conv.messages)
	}
}

// TestConvertRefusals checks the conversations refused, each with the
// field at fault.
func TestConvertRefusals(t *testing.T) {
	user := `{"role":"user","content":"Hi"}`
	use := `{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]}`
	for _, c := range []struct{ name, messages, param, want string }{
		{"no messages", `[]`, "messages", "at least one message"},
		{"bad role", `[{"role":"tool","content":"x"}]`, "messages[0].role", "must be"},
		{"no content", `[{"role":"user"}]`, "messages[0].content", "Field required"},
		{"empty user", `[{"role":"user","content":""}]`, "messages[0].content", "non-empty content"},
		{"empty text block", `[{"role":"user","content":[{"type":"text","text":""}]}]`, "messages[0].content[0].text", "must be non-empty"},
		{"blank text block", `[{"role":"user","content":[{"type":"text","text":" \n"}]}]`, "messages[0].content[0].text", "non-whitespace"},
		{"image", `[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]`,
			"messages[0].content[0].type", "read text only"},
		{"document", `[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}]}]`,
			"messages[0].content[0].type", "read text only"},
		{"image in a tool result", `[` + user + `,` + use + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{}}]}]}]`,
			"messages[2].content[0].content[0].type", "read text only"},
		{"server tool block", `[` + user + `,{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]}]`,
			"messages[1].content[0].type", "server tools"},
		{"tool_use from the user", `[{"role":"user","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]}]`,
			"messages[0].content[0].type", "assistant messages"},
		{"unknown block", `[{"role":"user","content":[{"type":"video"}]}]`, "messages[0].content[0].type", "not a content block type"},
		{"unknown field", `[{"role":"user","content":"Hi","name":"bob"}]`, "messages[0].name", "unrecognized"},
		{"input not an object", `[` + user + `,{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":"x"}]}]`,
			"messages[1].content[0].input", "an object"},
		{"unanswered tool_use", `[` + user + `,` + use + `,{"role":"user","content":"and?"}]`, "messages[1]", "without `tool_result`"},
		{"final tool_use", `[` + user + `,` + use + `]`, "messages[1]", "without `tool_result`"},
		{"stray tool_result", `[` + user + `,{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","content":"x"}]}]`,
			"messages[2].content[0].tool_use_id", "unexpected `tool_use_id`"},
		{"duplicate ids", `[` + user + `,{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}},{"type":"tool_use","id":"t1","name":"f","input":{}}]}]`,
			"messages[1].content[1].id", "unique"},
		{"trailing whitespace in a prefill", `[` + user + `,{"role":"assistant","content":"Sure "}]`, "messages[1].content", "trailing whitespace"},
		{"tool block in a system message", `[{"role":"system","content":[{"type":"thinking","thinking":"x"}]},` + user + `]`,
			"messages[0].content[0].type", "text blocks only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := convert(t, `{"messages":`+c.messages+`}`)
			e, ok := err.(*session.Error)
			if !ok || e.Status != 400 || e.Param != c.param || !strings.Contains(e.Message, c.want) {
				t.Errorf("got %#v, want a 400 about %s saying %q", err, c.param, c.want)
			}
		})
	}
}

// TestBlocks checks how events become content blocks: a block per run of
// one kind, none starting with (or holding only) whitespace, thinking
// signed, tool inputs parsed (the empty object when the arguments are not
// one), and the same blocks streamed.
func TestBlocks(t *testing.T) {
	evs := []session.Event{
		{Kind: session.EventReasoning, Text: "\n"},
		{Kind: session.EventReasoning, Text: "Let me "},
		{Kind: session.EventReasoning, Text: "see.\n"},
		{Kind: session.EventText, Text: "\n\n"},
		{Kind: session.EventText, Text: " Hello"},
		{Kind: session.EventText, Text: " there."},
		{Kind: session.EventCallStart, Call: 0, ID: "toolu_a", Name: "f"},
		{Kind: session.EventCallArguments, Call: 0, Text: `{"x": `},
		{Kind: session.EventCallArguments, Call: 0, Text: `1}`},
		{Kind: session.EventCallStart, Call: 1, ID: "toolu_b", Name: "g"},
		{Kind: session.EventCallArguments, Call: 1, Text: `{"cut`},
		{Kind: session.EventFinish, Finish: session.FinishLength},
	}
	var streamed []string
	b := &blocks{emit: func(name string, v any) error {
		j, _ := json.Marshal(v)
		streamed = append(streamed, name+" "+string(j))
		return nil
	}}
	whole := &blocks{}
	for _, ev := range evs {
		if err := b.Send([]session.Event{ev}); err != nil {
			t.Fatal(err)
		}
		if err := whole.Send([]session.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	sig := signature("Let me see.\n")
	want := `[{"type":"thinking","thinking":"Let me see.\n","signature":"` + sig + `"},{"type":"text","text":"Hello there."},` +
		`{"type":"tool_use","id":"toolu_a","name":"f","input":{"x":1}},{"type":"tool_use","id":"toolu_b","name":"g","input":{}}]`
	for name, bl := range map[string]*blocks{"streamed": b, "whole": whole} {
		if got, _ := json.Marshal(bl.content()); string(got) != want {
			t.Errorf("%s: %s\nwant %s", name, got, want)
		}
	}
	wantEvents := []string{
		`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me "}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"see.\n"}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"` + sig + `"}}`,
		`content_block_stop {"type":"content_block_stop","index":0}`,
		`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello"}}`,
		`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":" there."}}`,
		`content_block_stop {"type":"content_block_stop","index":1}`,
		`content_block_start {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_a","name":"f","input":{}}}`,
		`content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"x\": "}}`,
		`content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"1}"}}`,
		`content_block_stop {"type":"content_block_stop","index":2}`,
		`content_block_start {"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_b","name":"g","input":{}}}`,
		`content_block_delta {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"cut"}}`,
		`content_block_stop {"type":"content_block_stop","index":3}`,
	}
	if !reflect.DeepEqual(streamed, wantEvents) {
		t.Errorf("events:\n%s", strings.Join(streamed, "\n"))
	}

	// Omitted thinking keeps the block and its signature, not the text.
	var deltas int
	omit := &blocks{omitThinking: true, emit: func(name string, v any) error {
		if d, ok := v.(blockDelta); ok {
			if _, ok := d.Delta.(thinkingDelta); ok {
				deltas++
			}
		}
		return nil
	}}
	omit.Send(evs[:4])
	if got, _ := json.Marshal(omit.content()); deltas != 0 || string(got) != `[{"type":"thinking","thinking":"","signature":"`+sig+`"}]` {
		t.Errorf("omitted thinking: %s, %d thinking deltas", got, deltas)
	}
	if got, _ := json.Marshal((&blocks{}).content()); string(got) != "[]" {
		t.Errorf("no blocks: %s", got)
	}
}

func TestErrorShape(t *testing.T) {
	for _, c := range []struct {
		in         *session.Error
		status     int
		typ, words string
	}{
		{session.Invalid("tools[0].foo", session.CodeUnknownParam, "x"), 400, errInvalidRequest, "tools[0].foo: Extra inputs are not permitted"},
		{&session.Error{Status: 400, Code: session.CodeContextLength, Message: "x", Context: &session.ContextLimit{Prompt: 600, Context: 512}},
			400, errInvalidRequest, "prompt is too long: 600 tokens > 511 maximum"},
		{&session.Error{Status: 400, Code: session.CodeContextLength, Message: "x", Context: &session.ContextLimit{Prompt: 100, MaxTokens: 500, Context: 512}},
			400, errInvalidRequest, "input length and `max_tokens` exceed context limit: 100 + 500 > 512"},
		{&session.Error{Status: 401, Message: "no key"}, 401, errAuthentication, "no key"},
		{&session.Error{Status: 403, Message: "m"}, 403, errPermission, "m"},
		{session.NotFound("model", session.CodeModelNotFound, "gone"), 404, errNotFound, "gone"},
		{&session.Error{Status: 405, Message: "m"}, 405, errInvalidRequest, "m"},
		{&session.Error{Status: 413, Message: "m"}, 413, errTooLarge, "m"},
		{session.QueueFull(), 429, errRateLimit, "busy"},
		{session.Internal("boom"), 500, errAPI, "boom"},
		{session.Loading(), 529, errOverloaded, "loading"},
		{session.ShuttingDown(), 529, errOverloaded, "shutting down"},
		{&session.Error{Status: 504, Message: "m"}, 504, errTimeout, "m"},
	} {
		status, typ := errorStatus(c.in.Status)
		if msg := errorMessage(c.in); status != c.status || typ != c.typ || !strings.Contains(msg, c.words) {
			t.Errorf("%+v: %d %s %q", c.in, status, typ, msg)
		}
	}
}

// TestKeepAlive: a stream silent for the ping interval gets pings.
func TestKeepAlive(t *testing.T) {
	w := httptest.NewRecorder()
	ev := newEvents(w)
	if err := ev.start(message{Type: "message", Content: []contentBlock{}}); err != nil {
		t.Fatal(err)
	}
	stop := ev.keepAlive(10 * time.Millisecond)
	time.Sleep(60 * time.Millisecond)
	stop()
	if n := strings.Count(w.Body.String(), "event: ping\ndata: {\"type\":\"ping\"}\n\n"); n < 3 {
		t.Errorf("%d pings in %q", n, w.Body.String())
	}
}
