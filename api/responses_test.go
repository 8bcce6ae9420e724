package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	apiresponses "github.com/ruvllm/ruvllm/api/responses"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/schematest"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// sseEvent is one server-sent event of a Responses stream.
type sseEvent struct {
	name string
	data json.RawMessage
}

// responseEvents splits a Responses stream into its events, checking the
// framing: "event: TYPE" and "data: {...}" lines, the type repeated in
// the data, and sequence numbers counting from 0.
func responseEvents(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	if !strings.HasSuffix(string(body), "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	var out []sseEvent
	for i, ev := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		lines := strings.Split(ev, "\n")
		name, ok1 := strings.CutPrefix(lines[0], "event: ")
		var data string
		ok2 := len(lines) == 2
		if ok2 {
			data, ok2 = strings.CutPrefix(lines[1], "data: ")
		}
		if !ok1 || !ok2 {
			t.Fatalf("malformed event %q", ev)
		}
		var head struct {
			Type           string `json:"type"`
			SequenceNumber *int   `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(data), &head); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		if head.Type != name || head.SequenceNumber == nil || *head.SequenceNumber != i {
			t.Fatalf("event %d is %q with type %q and sequence number %v", i, name, head.Type, head.SequenceNumber)
		}
		out = append(out, sseEvent{name: name, data: json.RawMessage(data)})
	}
	return out
}

// eventNames are the events' types.
func eventNames(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.name
	}
	return out
}

// checkEventOrder checks that a stream's events follow the API's grammar:
// created, in_progress, then each item added, its parts and deltas, done,
// and a terminal event.
func checkEventOrder(t *testing.T, evs []sseEvent) {
	t.Helper()
	names := eventNames(evs)
	re := regexp.MustCompile(`^response\.created response\.in_progress ` +
		`((response\.output_item\.added response\.content_part\.added (response\.output_text\.delta )*response\.output_text\.done response\.content_part\.done response\.output_item\.done ` +
		`|response\.output_item\.added response\.content_part\.added (response\.reasoning_text\.delta )*response\.reasoning_text\.done response\.content_part\.done response\.output_item\.done ` +
		`|response\.output_item\.added (response\.function_call_arguments\.delta )*response\.function_call_arguments\.done response\.output_item\.done ))+` +
		`(response\.completed|response\.incomplete)$`)
	if !re.MatchString(strings.Join(names, " ")) {
		t.Fatalf("events out of order:\n%s", strings.Join(names, "\n"))
	}
}

// streamedText is what the output_text deltas of a stream write.
func streamedText(t *testing.T, evs []sseEvent) string {
	var b strings.Builder
	for _, e := range evs {
		if e.name == "response.output_text.delta" {
			b.WriteString(decode[struct {
				Delta string `json:"delta"`
			}](t, e.data).Delta)
		}
	}
	return b.String()
}

// finalResponse is the response of a stream's terminal event.
func finalResponse(t *testing.T, evs []sseEvent) responses.Response {
	t.Helper()
	return decode[struct {
		Response responses.Response `json:"response"`
	}](t, evs[len(evs)-1].data).Response
}

// postStream posts a streaming request and returns its events.
func postStream(t *testing.T, url, body string) []sseEvent {
	t.Helper()
	resp, b := do(t, "POST", url+"/v1/responses", body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return responseEvents(t, b)
}

// postResponse posts a request and decodes the response object.
func postResponse(t *testing.T, url, body string) (responses.Response, []byte) {
	t.Helper()
	resp, b := do(t, "POST", url+"/v1/responses", body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return decode[responses.Response](t, b), b
}

// responsesServer is the fake server with a template that shows tools and
// writes calls in <tool_call> blocks; output is what its model writes.
type responsesServer struct {
	*fakeServer
	output *string
}

func newResponsesServer(t *testing.T, o Options) *responsesServer {
	t.Helper()
	tmpl, err := chat.Parse(chatMLTools)
	if err != nil {
		t.Fatal(err)
	}
	output := new(string)
	tok := testTokenizer(t)
	fs := newFakeServerWith(t, o, templateChat{tmpl}, func(e *fakeEngine) {
		e.maxLen = 8192 // the test vocabulary spells most text byte by byte
		e.script = func(r backends.Request) []tokenizer.ID { return tok.Encode(*output, tokenizer.EncodeOptions{}) }
	})
	return &responsesServer{fakeServer: fs, output: output}
}

// lastPrompt is the prompt of the last request the engine got.
func (rs *responsesServer) lastPrompt() string {
	reqs := rs.eng.requests()
	return rs.tok.Decode(reqs[len(reqs)-1].Prompt)
}

const weatherToolJSON = `{"type":"function","name":"get_weather","description":"The weather in a city","strict":true,
	"parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":20}},"required":["city"],"additionalProperties":false}}`

// TestResponsesObject checks the response object field by field, as the
// SDKs read it, and what the prompt is made of: instructions and
// developer messages first, as one system message.
func TestResponsesObject(t *testing.T) {
	rs := newResponsesServer(t, Options{})
	*rs.output = "Hello there!"
	r, raw := postResponse(t, rs.URL, `{"model":"fake-model","input":"Hi","instructions":"Be brief.","metadata":{"k":"v"},"user":"u1",
		"temperature":0.7,"top_p":0.9,"max_output_tokens":100,"store":true,"prompt_cache_key":"key","safety_identifier":"s",
		"truncation":"disabled","include":["reasoning.encrypted_content"],"service_tier":"auto","reasoning":{"effort":"low","summary":"auto"}}`)
	if !regexp.MustCompile(`^resp_[0-9a-f-]+$`).MatchString(r.ID) || r.Object != "response" || r.Status != "completed" || r.Model != "fake-model" {
		t.Errorf("id %q object %q status %q model %q", r.ID, r.Object, r.Status, r.Model)
	}
	// The test vocabulary's words start with a space.
	if r.OutputText() != " Hello there!" || len(r.Output) != 1 {
		t.Fatalf("output %s", raw)
	}
	msg := r.Output[0].AsMessage()
	if msg.Type != "message" || msg.Role != "assistant" || msg.Status != "completed" || !strings.HasPrefix(msg.ID, "msg_") ||
		len(msg.Content) != 1 || msg.Content[0].Type != "output_text" || !msg.Content[0].JSON.Annotations.Valid() {
		t.Errorf("message %s", msg.RawJSON())
	}
	if r.Usage.InputTokens == 0 || r.Usage.OutputTokens == 0 || r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens ||
		!r.Usage.JSON.InputTokensDetails.Valid() || !r.Usage.JSON.OutputTokensDetails.Valid() {
		t.Errorf("usage %s", r.Usage.RawJSON())
	}
	if r.Instructions.OfString != "Be brief." || r.Metadata["k"] != "v" || !strings.Contains(string(raw), `"user":"u1"`) || r.Temperature != 0.7 || r.TopP != 0.9 ||
		r.MaxOutputTokens != 100 || r.PromptCacheKey != "key" ||
		r.Reasoning.Effort != "low" || r.Reasoning.Summary != "auto" || r.Text.Format.Type != "text" || r.ToolChoice.OfToolChoiceMode != "auto" ||
		!r.ParallelToolCalls || r.CompletedAt == 0 || r.CreatedAt == 0 || r.Truncation != "disabled" {
		t.Errorf("echoed settings: %s", raw)
	}
	var m map[string]json.RawMessage
	json.Unmarshal(raw, &m)
	for _, k := range []string{"error", "incomplete_details", "previous_response_id", "max_tool_calls"} {
		if string(m[k]) != "null" {
			t.Errorf("%s is %s, not null", k, m[k])
		}
	}
	// The raw API has no output_text: the SDKs compute it.
	if _, ok := m["output_text"]; ok {
		t.Error("output_text is sent")
	}
	if got, want := rs.lastPrompt(), "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"; !strings.HasSuffix(got, want) {
		t.Errorf("prompt %q, want %q", got, want)
	}

	// Messages with and without "type", content as parts, the developer
	// message joined to the instructions.
	postResponse(t, rs.URL, `{"input":[{"role":"developer","content":"Use metric units."},{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
		{"role":"assistant","content":[{"type":"output_text","text":"c","annotations":[]}]},{"role":"user","content":"d"}],"instructions":"Be brief."}`)
	want := "<|im_start|>system\nBe brief.\n\nUse metric units.<|im_end|>\n<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\nc<|im_end|>\n" +
		"<|im_start|>user\nd<|im_end|>\n<|im_start|>assistant\n"
	if got := rs.lastPrompt(); !strings.HasSuffix(got, want) {
		t.Errorf("prompt %q, want %q", got, want)
	}

	// The fields that change nothing are accepted; allowed_tools narrows
	// the tools the template shows.
	search := `{"type":"function","name":"search","parameters":{"type":"object","properties":{}}}`
	r3, raw3 := postResponse(t, rs.URL, `{"input":"Hi","tools":[`+weatherToolJSON+`,`+search+`],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"search"}]},
		"max_tool_calls":3,"prompt_cache_retention":"24h","stream_options":null,"reasoning":{"context":"all_turns","mode":"standard"},"text":{"verbosity":"medium","format":{"type":"json_object"}},
		"include":["web_search_call.results"],"truncation":"auto","background":false,"top_logprobs":0}`)
	if r3.Status != "completed" || r3.MaxToolCalls != 3 || r3.ToolChoice.Type != "allowed_tools" || len(r3.Tools) != 2 || r3.Text.Format.Type != "json_object" {
		t.Errorf("%s", raw3)
	}
	if p := rs.lastPrompt(); strings.Contains(p, "get_weather") || !strings.Contains(p, `"name": "search"`) {
		t.Errorf("allowed_tools: the prompt shows\n%s", p)
	}

	// The SDK reads it.
	client := sdkClient(rs.URL)
	r2, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "fake-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if r2.OutputText() != " Hello there!" || r2.Status != "completed" || !strings.Contains(r2.RawJSON(), `"store":true`) {
		t.Errorf("%s", r2.RawJSON())
	}
}

// TestResponsesStream checks the events of a stream: their order and
// sequence numbers, the text the deltas write against the whole
// response's, and the SDK reading them.
func TestResponsesStream(t *testing.T) {
	rs := newResponsesServer(t, Options{})
	*rs.output = "Hello there, world!"
	whole, _ := postResponse(t, rs.URL, `{"input":"Hi"}`)
	evs := postStream(t, rs.URL, `{"input":"Hi","stream":true}`)
	checkEventOrder(t, evs)
	final := finalResponse(t, evs)
	if got := streamedText(t, evs); got != whole.OutputText() || final.OutputText() != got || final.Status != "completed" || evs[len(evs)-1].name != "response.completed" {
		t.Errorf("streamed %q, final %q, whole %q", got, final.OutputText(), whole.OutputText())
	}
	created := decode[struct {
		Response responses.Response `json:"response"`
	}](t, evs[0].data).Response
	if created.Status != "in_progress" || created.ID != final.ID || len(created.Output) != 0 || !created.JSON.Output.Valid() {
		t.Errorf("created %s", evs[0].data)
	}
	added := decode[struct {
		Item         map[string]any `json:"item"`
		OutputIndex  *int           `json:"output_index"`
		ItemID       string         `json:"item_id"`
		ContentIndex *int           `json:"content_index"`
	}](t, evs[2].data)
	if added.Item["status"] != "in_progress" || len(added.Item["content"].([]any)) != 0 || *added.OutputIndex != 0 {
		t.Errorf("added %s", evs[2].data)
	}
	for _, e := range evs[3 : len(evs)-2] {
		d := decode[struct {
			ItemID       string `json:"item_id"`
			OutputIndex  *int   `json:"output_index"`
			ContentIndex *int   `json:"content_index"`
		}](t, e.data)
		if d.ItemID != added.Item["id"] || d.OutputIndex == nil || d.ContentIndex == nil || *d.ContentIndex != 0 {
			t.Errorf("%s: %s", e.name, e.data)
		}
	}

	// The SDK streams it.
	client := sdkClient(rs.URL)
	stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi")}})
	var text strings.Builder
	var last responses.ResponseStreamEventUnion
	n := int64(0)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != n {
			t.Errorf("sequence number %d, want %d", ev.SequenceNumber, n)
		}
		n++
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
		last = ev
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != " Hello there, world!" || last.Type != "response.completed" || last.Response.OutputText() != text.String() {
		t.Errorf("SDK stream: %q, last %s", text.String(), last.RawJSON())
	}
}

// TestResponsesFunctionCalls: a model's calls become function_call items,
// streamed and not; the outputs sent back as function_call_output items
// reach the next prompt, through previous_response_id or through the
// whole history sent again, which make the same prompt.
func TestResponsesFunctionCalls(t *testing.T) {
	rs := newResponsesServer(t, Options{})
	*rs.output = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	body := `{"input":"Weather in Paris?","tools":[` + weatherToolJSON + `]}`
	r, raw := postResponse(t, rs.URL, body)
	if len(r.Output) != 2 || r.Status != "completed" {
		t.Fatalf("output %s", raw)
	}
	msg, call := r.Output[0].AsMessage(), r.Output[1].AsFunctionCall()
	if r.OutputText() != "Let me check." || msg.Status != "completed" {
		t.Errorf("message %s", msg.RawJSON())
	}
	if call.Type != "function_call" || call.Name != "get_weather" || call.Arguments != `{"city": "Paris"}` || !strings.HasPrefix(call.CallID, "call_") ||
		!strings.HasPrefix(call.ID, "fc_") || call.Status != "completed" {
		t.Errorf("call %s", call.RawJSON())
	}
	if tools := r.Tools; len(tools) != 1 || tools[0].Name != "get_weather" || tools[0].Type != "function" || !tools[0].Strict {
		t.Errorf("tools %s", raw)
	}

	evs := postStream(t, rs.URL, strings.Replace(body, `{`, `{"stream":true,`, 1))
	checkEventOrder(t, evs)
	var args strings.Builder
	for _, e := range evs {
		if e.name == "response.function_call_arguments.delta" {
			args.WriteString(decode[struct {
				Delta string `json:"delta"`
			}](t, e.data).Delta)
		}
	}
	final := finalResponse(t, evs)
	if args.String() != call.Arguments || len(final.Output) != 2 || final.Output[1].AsFunctionCall().Arguments != call.Arguments ||
		streamedText(t, evs) != "Let me check." {
		t.Errorf("streamed arguments %q, final %s", args.String(), evs[len(evs)-1].data)
	}

	// The result, after the stored response.
	*rs.output = "It is sunny."
	next, _ := postResponse(t, rs.URL, `{"previous_response_id":"`+r.ID+`","input":[{"type":"function_call_output","call_id":"`+call.CallID+`","output":"sunny, 21 C"}],
		"tools":[`+weatherToolJSON+`]}`)
	if next.OutputText() != "It is sunny." || next.PreviousResponseID != r.ID {
		t.Errorf("next %s", next.RawJSON())
	}
	chained := rs.lastPrompt()
	for _, want := range []string{"Weather in Paris?", "Let me check.", `"name": "get_weather"`, `"city": "Paris"`, "sunny, 21 C"} {
		if !strings.Contains(chained, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, chained)
		}
	}
	// The same conversation sent whole, the output items as the response
	// gave them.
	var out map[string]json.RawMessage
	json.Unmarshal(raw, &out)
	items, _ := splitArray(out["output"])
	input := append([]json.RawMessage{json.RawMessage(`{"role":"user","content":"Weather in Paris?"}`)}, items...)
	input = append(input, json.RawMessage(`{"type":"function_call_output","call_id":"`+call.CallID+`","output":"sunny, 21 C"}`))
	in, _ := json.Marshal(input)
	postResponse(t, rs.URL, `{"input":`+string(in)+`,"tools":[`+weatherToolJSON+`],"store":false}`)
	if whole := rs.lastPrompt(); whole != chained {
		t.Errorf("the history sent whole makes\n%s\nprevious_response_id makes\n%s", whole, chained)
	}

	// A forced call through the SDK, and the round trip.
	client := sdkClient(rs.URL)
	*rs.output = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"
	params := responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Oslo?")},
		Tools:      []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, true)},
		ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_weather"}}}
	fr, err := client.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	fc := fr.Output[len(fr.Output)-1].AsFunctionCall()
	var a map[string]any
	if err := json.Unmarshal([]byte(fc.Arguments), &a); err != nil || fc.Name != "get_weather" {
		t.Fatalf("forced call %s: %v", fr.RawJSON(), err)
	}
	*rs.output = "Cold."
	fr2, err := client.Responses.New(context.Background(), responses.ResponseNewParams{PreviousResponseID: openai.String(fr.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String(fc.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("cold, -3 C")}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if fr2.OutputText() != " Cold." || !strings.Contains(rs.lastPrompt(), "cold, -3 C") {
		t.Errorf("%s\n%s", fr2.RawJSON(), rs.lastPrompt())
	}
}

// splitArray splits a JSON array.
func splitArray(v json.RawMessage) ([]json.RawMessage, error) {
	var a []json.RawMessage
	return a, json.Unmarshal(v, &a)
}

// TestResponsesStorage: GET, DELETE and input_items of stored responses,
// store false, and unknown ids.
func TestResponsesStorage(t *testing.T) {
	rs := newResponsesServer(t, Options{})
	*rs.output = "Fine."
	r, raw := postResponse(t, rs.URL, `{"input":[{"role":"user","content":"one"},{"role":"user","content":"two"},{"role":"user","content":"three"}]}`)
	resp, got := do(t, "GET", rs.URL+"/v1/responses/"+r.ID, "")
	if resp.StatusCode != 200 || strings.TrimSpace(string(got)) != strings.TrimSpace(string(raw)) {
		t.Errorf("GET: %d %s\nwant %s", resp.StatusCode, got, raw)
	}
	resp, got = do(t, "GET", rs.URL+"/v1/responses/"+r.ID+"/input_items?order=asc&limit=2", "")
	list := decode[struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Content string `json:"content"`
		} `json:"data"`
		FirstID, LastID string
		HasMore         bool `json:"has_more"`
	}](t, got)
	if resp.StatusCode != 200 || list.Object != "list" || len(list.Data) != 2 || list.Data[0].Content != "one" || !list.HasMore ||
		list.Data[0].Type != "message" || !strings.HasPrefix(list.Data[0].ID, "msg_") {
		t.Errorf("input_items %d %s", resp.StatusCode, got)
	}
	_, got = do(t, "GET", rs.URL+"/v1/responses/"+r.ID+"/input_items?after="+list.Data[1].ID+"&order=asc", "")
	if !strings.Contains(string(got), `"three"`) || strings.Contains(string(got), `"one"`) {
		t.Errorf("after: %s", got)
	}
	// The SDK's retrieve and delete.
	client := sdkClient(rs.URL)
	ctx := context.Background()
	g, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil || g.OutputText() != " Fine." {
		t.Fatalf("%v %+v", err, g)
	}
	resp, got = do(t, "DELETE", rs.URL+"/v1/responses/"+r.ID, "")
	if resp.StatusCode != 200 || strings.TrimSpace(string(got)) != `{"id":"`+r.ID+`","object":"response","deleted":true}` {
		t.Errorf("DELETE: %d %s", resp.StatusCode, got)
	}
	for _, m := range []string{"GET", "DELETE"} {
		resp, got = do(t, m, rs.URL+"/v1/responses/"+r.ID, "")
		wantRespError(t, m+" deleted", resp, got, 404, "", "not found")
	}
	var apiErr *openai.Error
	if _, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("SDK get of a deleted response: %v", err)
	}
	// store false keeps nothing.
	r2, raw2 := postResponse(t, rs.URL, `{"input":"x","store":false}`)
	if !strings.Contains(string(raw2), `"store":false`) {
		t.Error("store false echoed as true")
	}
	resp, got = do(t, "GET", rs.URL+"/v1/responses/"+r2.ID, "")
	wantRespError(t, "store false", resp, got, 404, "", "not found")
	resp, got = do(t, "POST", rs.URL+"/v1/responses", `{"input":"x","previous_response_id":"`+r2.ID+`"}`)
	wantRespError(t, "continue a response not stored", resp, got, 400, "previous_response_not_found", "not found")
	// Ids that are not ids name nothing.
	for _, id := range []string{"resp_..%2F..%2Fetc%2Fpasswd", "..%2Fx", "resp_a.json", strings.Repeat("a", 300)} {
		resp, got = do(t, "GET", rs.URL+"/v1/responses/"+id, "")
		wantRespError(t, id, resp, got, 404, "", "")
	}
}

// TestResponsesErrors: refusals have OpenAI's error shape and name the
// field at fault.
func TestResponsesErrors(t *testing.T) {
	rs := newResponsesServer(t, Options{})
	*rs.output = "ok"
	tests := []struct {
		name, body string
		status     int
		param      string
		code       string
	}{
		{"unknown field", `{"input":"x","frobnicate":1}`, 400, "frobnicate", session.CodeUnknownParam},
		{"no input", `{"model":"fake-model"}`, 400, "input", session.CodeMissing},
		{"input of a number", `{"input":3}`, 400, "input", session.CodeInvalidType},
		{"web search", `{"input":"x","tools":[{"type":"web_search"}]}`, 400, "tools[0].type", session.CodeUnsupported},
		{"file search", `{"input":"x","tools":[{"type":"file_search","vector_store_ids":["v"]}]}`, 400, "tools[0].type", session.CodeUnsupported},
		{"chat-style tool", `{"input":"x","tools":[{"type":"function","function":{"name":"f"}}]}`, 400, "tools[0].name", session.CodeMissing},
		{"bad tool name", `{"input":"x","tools":[{"type":"function","name":"a b"}]}`, 400, "tools[0].name", session.CodeInvalidValue},
		{"tool_choice of a missing tool", `{"input":"x","tools":[` + weatherToolJSON + `],"tool_choice":{"type":"function","name":"nope"}}`, 400, "tool_choice.name", session.CodeInvalidValue},
		{"required without tools", `{"input":"x","tool_choice":"required"}`, 400, "tool_choice", session.CodeInvalidValue},
		{"hosted tool choice", `{"input":"x","tool_choice":{"type":"web_search_preview"}}`, 400, "tool_choice.type", session.CodeUnsupported},
		{"image", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"http://x"}]}]}`, 400, "input[0].content[0].type", session.CodeUnsupported},
		{"unknown item", `{"input":[{"type":"computer_call_output","call_id":"c"}]}`, 400, "input[0].type", session.CodeUnsupported},
		{"bad role", `{"input":[{"role":"tool","content":"x"}]}`, 400, "input[0].role", session.CodeInvalidValue},
		{"item without type", `{"input":[{"content":"x"}]}`, 400, "input[0].type", session.CodeMissing},
		{"unknown item field", `{"input":[{"role":"user","content":"x","colour":"red"}]}`, 400, "input[0].colour", session.CodeUnknownParam},
		{"call output without call_id", `{"input":[{"type":"function_call_output","output":"x"}]}`, 400, "input[0].call_id", session.CodeMissing},
		{"text format", `{"input":"x","text":{"format":{"type":"xml"}}}`, 400, "text.format.type", session.CodeInvalidValue},
		{"json_schema without schema", `{"input":"x","text":{"format":{"type":"json_schema","name":"n"}}}`, 400, "text.format.schema", session.CodeMissing},
		{"bad schema", `{"input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"frob"}}}}`, 400, "text.format.schema", session.CodeInvalidValue},
		{"verbosity", `{"input":"x","text":{"verbosity":"low"}}`, 400, "text.verbosity", session.CodeUnsupported},
		{"effort", `{"input":"x","reasoning":{"effort":"huge"}}`, 400, "reasoning.effort", session.CodeInvalidValue},
		{"max_output_tokens", `{"input":"x","max_output_tokens":0}`, 400, "max_output_tokens", session.CodeInvalidValue},
		{"temperature", `{"input":"x","temperature":3}`, 400, "temperature", session.CodeInvalidValue},
		{"background", `{"input":"x","background":true}`, 400, "background", session.CodeUnsupported},
		{"conversation", `{"input":"x","conversation":"conv_1"}`, 400, "conversation", session.CodeUnsupported},
		{"logprobs", `{"input":"x","include":["message.output_text.logprobs"]}`, 400, "include", session.CodeUnsupported},
		{"top_logprobs", `{"input":"x","top_logprobs":3}`, 400, "top_logprobs", session.CodeUnsupported},
		{"unknown include", `{"input":"x","include":["everything"]}`, 400, "include", session.CodeInvalidValue},
		{"stream_options without stream", `{"input":"x","stream_options":{}}`, 400, "stream_options", session.CodeInvalidValue},
		{"metadata", `{"input":"x","metadata":{"k":1}}`, 400, "metadata.k", session.CodeInvalidType},
		{"previous unknown", `{"input":"x","previous_response_id":"resp_nope"}`, 400, "previous_response_id", "previous_response_not_found"},
		{"previous not an id", `{"input":"x","previous_response_id":"../../etc/passwd"}`, 400, "previous_response_id", "previous_response_not_found"},
		{"unknown model", `{"input":"x","model":"nope"}`, 404, "model", session.CodeModelNotFound},
		{"too long", `{"input":"x","max_output_tokens":100000}`, 400, "max_output_tokens", session.CodeContextLength},
		{"malformed JSON", `{"input":`, 400, "", session.CodeInvalidJSON},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := do(t, "POST", rs.URL+"/v1/responses", tc.body)
			e := wantRespError(t, tc.name, resp, b, tc.status, tc.code, "")
			if got := deref(e.Error.Param); got != tc.param {
				t.Errorf("param %q, want %q: %s", got, tc.param, b)
			}
		})
	}
	// The SDK raises them as API errors.
	client := sdkClient(rs.URL)
	_, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfWebSearch(responses.WebSearchToolTypeWebSearch)}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "tools[0].type" {
		t.Errorf("SDK: %v", err)
	}
}

// wantRespError checks an OpenAI-shaped error's status, code (when given) and
// message (containing msg).
func wantRespError(t *testing.T, name string, resp *http.Response, b []byte, status int, code, msg string) wireError {
	t.Helper()
	e := decode[wireError](t, b)
	if resp.StatusCode != status || (code != "" && deref(e.Error.Code) != code) || e.Error.Type == "" || !strings.Contains(e.Error.Message, msg) {
		t.Errorf("%s: status %d, want %d (code %q): %s", name, resp.StatusCode, status, code, b)
	}
	return e
}

// TestResponsesFailedStream: a generation that fails mid-stream ends with
// an error event and response.failed.
func TestResponsesFailedStream(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	failing := &failingEngine{fakeEngine: fs.eng}
	fs.api.Models().List()[0].Engine = failing
	evs := postStream(t, fs.URL, `{"input":"x","stream":true,"max_output_tokens":50}`)
	names := eventNames(evs)
	if len(names) < 4 || names[len(names)-2] != "error" || names[len(names)-1] != "response.failed" {
		t.Fatalf("events %v", names)
	}
	final := finalResponse(t, evs)
	if final.Status != "failed" || final.Error.Code == "" || final.Error.Message == "" {
		t.Errorf("failed response %s", evs[len(evs)-1].data)
	}
	e := decode[struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}](t, evs[len(evs)-2].data)
	if e.Code != session.CodeGenerationFail || !strings.Contains(e.Message, "boom") {
		t.Errorf("error event %s", evs[len(evs)-2].data)
	}
	// Not stored: a failed response continues nothing.
	resp, _ := do(t, "GET", fs.URL+"/v1/responses/"+final.ID, "")
	if resp.StatusCode != 404 {
		t.Errorf("a failed response was stored")
	}
}

// TestResponsesClientDisconnect drops a stream mid-way: the engine request
// is cancelled, nothing is stored, and the server keeps answering.
func TestResponsesClientDisconnect(t *testing.T) {
	fs := newFakeServer(t, Options{}, func(e *fakeEngine) { e.delay = 2 * time.Millisecond })
	resp, err := http.Post(fs.URL+"/v1/responses", "application/json", strings.NewReader(`{"input":"hi","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	var id string
	for range 12 { // created, in_progress, the item, its part and two deltas, each two lines and a blank
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile(`"id":"(resp_[^"]+)"`).FindStringSubmatch(line); m != nil && id == "" {
			id = m[1]
		}
	}
	resp.Body.Close()
	fs.eng.waitIdle(t, 2*time.Second)
	if n := fs.eng.cancelledCount(); n != 1 {
		t.Errorf("%d requests cancelled", n)
	}
	if resp, _ := do(t, "GET", fs.URL+"/v1/responses/"+id, ""); id == "" || resp.StatusCode != 404 {
		t.Errorf("the response %q cut short: GET %d", id, resp.StatusCode)
	}
	if resp, b := do(t, "POST", fs.URL+"/v1/responses", `{"input":"hi","max_output_tokens":2}`); resp.StatusCode != 200 {
		t.Fatalf("after the disconnect: %d %s", resp.StatusCode, b)
	}
}

// failingEngine streams two tokens of the fake engine, then fails.
type failingEngine struct{ *fakeEngine }

func (e *failingEngine) Submit(ctx context.Context, r backends.Request) (*backends.Stream, error) {
	ch := make(chan backends.Event, 4)
	ch <- backends.Event{Token: &backends.Token{ID: e.hello}}
	ch <- backends.Event{Token: &backends.Token{ID: e.hello}}
	ch <- backends.Event{Err: errors.New("boom")}
	close(ch)
	return &backends.Stream{Events: ch, PromptTokens: len(r.Prompt)}, nil
}

// TestResponsesRealModel runs the Responses API on the synthesized tiny
// model through the real engine: greedy streams write what the response
// sent whole holds, max_output_tokens cuts a response short (incomplete),
// a json_schema format gives JSON the schema validates, and a forced call
// has arguments that parse.
func TestResponsesRealModel(t *testing.T) {
	rs := startRealServer(t, realOptions{parallel: 2})
	ctx := context.Background()
	c := rs.client
	params := responses.ResponseNewParams{Model: rs.id, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell me a story.")},
		Instructions: openai.String("You tell stories."), Temperature: openai.Float(0), MaxOutputTokens: openai.Int(16)}
	whole, err := c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if whole.Usage.OutputTokens == 0 || whole.Usage.OutputTokens > 16 || whole.Usage.InputTokens == 0 {
		t.Errorf("usage %s", whole.Usage.RawJSON())
	}
	if whole.Status == "incomplete" && (whole.IncompleteDetails.Reason != "max_output_tokens" || whole.Usage.OutputTokens != 16) {
		t.Errorf("incomplete: %s", whole.RawJSON())
	}
	stream := c.Responses.NewStreaming(ctx, params)
	var text strings.Builder
	var names []string
	var last responses.ResponseStreamEventUnion
	for stream.Next() {
		ev := stream.Current()
		names = append(names, ev.Type)
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
		last = ev
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != whole.OutputText() || last.Response.OutputText() != whole.OutputText() || last.Response.Status != whole.Status {
		t.Errorf("streamed %q (%s), whole %q (%s)", text.String(), last.Response.Status, whole.OutputText(), whole.Status)
	}
	if names[0] != "response.created" || names[1] != "response.in_progress" || last.Type != "response."+string(whole.Status) {
		t.Errorf("events %v", names)
	}

	t.Run("max_output_tokens", func(t *testing.T) {
		p := params
		p.MaxOutputTokens = openai.Int(3)
		p.Temperature = openai.Float(1)
		p.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("Go on")}
		// An output that cannot fit is refused up front (issue 30); one that
		// merely runs long is cut.
		_, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: rs.id, Input: p.Input, MaxOutputTokens: p.MaxOutputTokens,
			Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
				Name: "story", Schema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string", "minLength": 40}},
					"required": []string{"text"}}}}}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "max_output_tokens" {
			t.Errorf("a schema that cannot fit 3 tokens: %v", err)
		}
		r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: rs.id, Input: p.Input, MaxOutputTokens: p.MaxOutputTokens,
			Temperature: openai.Float(0)})
		if err != nil {
			t.Fatal(err)
		}
		msg := r.Output[len(r.Output)-1].AsMessage()
		if r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" || r.Usage.OutputTokens != 3 || msg.Status != "incomplete" ||
			r.CompletedAt != 0 {
			t.Errorf("%s", r.RawJSON())
		}
		evs := postStream(t, rs.URL, `{"model":"`+rs.id+`","input":"Go on","max_output_tokens":2,"stream":true}`)
		checkEventOrder(t, evs)
		if evs[len(evs)-1].name != "response.incomplete" || finalResponse(t, evs).IncompleteDetails.Reason != "max_output_tokens" {
			t.Errorf("streamed: %s", evs[len(evs)-1].data)
		}
	})

	t.Run("json_schema", func(t *testing.T) {
		sc := structuredSchemas[0]
		var schema map[string]any
		json.Unmarshal([]byte(sc.schema), &schema)
		val := schematest.Compile(t, sc.schema)
		for _, temp := range []float64{0, 1} {
			r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: rs.id, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("A person, in JSON.")},
				Temperature: openai.Float(temp), Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
					OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: sc.name, Schema: schema, Strict: openai.Bool(true)}}}})
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != "completed" || r.Text.Format.Type != "json_schema" || r.Text.Format.Name != sc.name {
				t.Errorf("%s", r.RawJSON())
			}
			schematest.Check(t, val, r.OutputText())
		}
	})

	t.Run("forced call", func(t *testing.T) {
		validators := toolValidators(t)
		for _, stream := range []bool{false, true} {
			body := `{"model":"` + rs.id + `","input":"Weather in Paris?","temperature":0,"parallel_tool_calls":false,"stream":` + map[bool]string{true: "true", false: "false"}[stream] +
				`,"tools":[` + weatherToolJSON + `],"tool_choice":{"type":"function","name":"get_weather"}}`
			var r responses.Response
			if stream {
				evs := postStream(t, rs.URL, body)
				checkEventOrder(t, evs)
				r = finalResponse(t, evs)
			} else {
				r, _ = postResponse(t, rs.URL, body)
			}
			var calls []responses.ResponseFunctionToolCall
			for _, it := range r.Output {
				if it.Type == "function_call" {
					calls = append(calls, it.AsFunctionCall())
				}
			}
			if len(calls) != 1 || calls[0].Name != "get_weather" || !strings.HasPrefix(calls[0].CallID, "call_") || r.OutputText() != "" {
				t.Fatalf("stream %v: %s", stream, r.RawJSON())
			}
			schematest.Check(t, validators["get_weather"], calls[0].Arguments)
		}
	})
}

// TestResponsesStoreDir: stored responses live on as files in the store
// directory: a new server over the same directory gets them and continues
// them; deleting removes the file; the store's bounds drop the oldest.
func TestResponsesStoreDir(t *testing.T) {
	dir := t.TempDir()
	start := func() *responsesServer {
		st, err := apiresponses.NewStore(apiresponses.StoreOptions{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return newResponsesServer(t, Options{ResponseStore: st})
	}
	rs := start()
	*rs.output = "Noted."
	r, raw := postResponse(t, rs.URL, `{"input":"Remember the word kiwi.","instructions":"Be brief."}`)
	if _, err := os.Stat(filepath.Join(dir, r.ID+".json")); err != nil {
		t.Fatal(err)
	}
	rs.Close()

	rs2 := start()
	*rs2.output = "Kiwi."
	resp, got := do(t, "GET", rs2.URL+"/v1/responses/"+r.ID, "")
	if resp.StatusCode != 200 || strings.TrimSpace(string(got)) != strings.TrimSpace(string(raw)) {
		t.Fatalf("after a restart: %d %s", resp.StatusCode, got)
	}
	next, _ := postResponse(t, rs2.URL, `{"previous_response_id":"`+r.ID+`","input":"Which word?"}`)
	prompt := rs2.lastPrompt()
	// The instructions are not carried over; the conversation is.
	if next.OutputText() != " Kiwi." || !strings.Contains(prompt, "Remember the word kiwi.") || !strings.Contains(prompt, "Noted.") || strings.Contains(prompt, "Be brief") {
		t.Errorf("continued after a restart:\n%s", prompt)
	}
	resp, _ = do(t, "DELETE", rs2.URL+"/v1/responses/"+r.ID, "")
	if _, err := os.Stat(filepath.Join(dir, r.ID+".json")); resp.StatusCode != 200 || !os.IsNotExist(err) {
		t.Errorf("DELETE %d left the file: %v", resp.StatusCode, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), next.ID) {
		t.Errorf("the directory holds %v", entries)
	}
}

// TestResponsesThinking: a thinking model's reasoning (Qwen3's template
// over a tiny Qwen3 vocabulary, the engine scripted) is a reasoning item
// before the message, counted in reasoning_tokens, streamed as
// reasoning_text events; it goes back into the conversation as the
// assistant turn's reasoning_content, which Qwen3's template shows for
// the turn of a tool call.
func TestResponsesThinking(t *testing.T) {
	src, err := os.ReadFile(shared.Path(t, "templates", "Qwen-Qwen3-0.6B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	m := testmodel.Load(t, testmodel.Synth(t, "tiny-qwen3", "F32"))
	tk := m.Tokenizer
	var output string
	eng := newFakeEngine(tk)
	eng.maxLen = 8192
	eng.script = func(backends.Request) []tokenizer.ID {
		return tk.Encode(output, tokenizer.EncodeOptions{ParseSpecial: true})
	}
	s := New(Options{Version: "test-version"})
	if err := s.AddModel(&session.Model{ID: "qwen3", Tokenizer: tk, Chat: templateChat{tmpl}, Engine: eng}); err != nil {
		t.Fatal(err)
	}
	hs := startHTTP(t, s)
	lastPrompt := func() string {
		reqs := eng.requests()
		return tk.DecodeWith(reqs[len(reqs)-1].Prompt, tokenizer.DecodeOptions{RenderSpecial: true})
	}

	output = "<think>\nThe user greets me.\n</think>\n\nHello!<|im_end|>"
	r, raw := postResponse(t, hs.URL, `{"input":"Hi","reasoning":{"effort":"medium","summary":"auto"}}`)
	if len(r.Output) != 2 || r.Output[0].Type != "reasoning" || r.OutputText() != "Hello!" {
		t.Fatalf("output %s", raw)
	}
	ri := r.Output[0].AsReasoning()
	if !strings.HasPrefix(ri.ID, "rs_") || len(ri.Content) != 1 || ri.Content[0].Type != "reasoning_text" || strings.TrimSpace(ri.Content[0].Text) != "The user greets me." ||
		!ri.JSON.Summary.Valid() || len(ri.Summary) != 0 {
		t.Errorf("reasoning item %s", ri.RawJSON())
	}
	if rt := r.Usage.OutputTokensDetails.ReasoningTokens; rt == 0 || rt >= r.Usage.OutputTokens {
		t.Errorf("reasoning tokens %d of %d", rt, r.Usage.OutputTokens)
	}
	evs := postStream(t, hs.URL, `{"input":"Hi","stream":true}`)
	checkEventOrder(t, evs)
	final := finalResponse(t, evs)
	if final.Output[0].AsReasoning().Content[0].Text != ri.Content[0].Text || final.OutputText() != "Hello!" {
		t.Errorf("streamed %s", evs[len(evs)-1].data)
	}
	if !slices.Contains(eventNames(evs), "response.reasoning_text.delta") {
		t.Errorf("events %v", eventNames(evs))
	}
	// reasoning effort none turns thinking off: Qwen3's template closes the
	// think block in the prompt.
	postResponse(t, hs.URL, `{"input":"Hi","reasoning":{"effort":"none"}}`)
	if !regexp.MustCompile(`<think>\s*</think>\s*$`).MatchString(lastPrompt()) {
		t.Errorf("effort none: %q", lastPrompt())
	}

	// Reasoning, then a call; the output of the call goes back.
	output = "<think>\nI need the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>"
	r, raw = postResponse(t, hs.URL, `{"input":"Weather in Paris?","tools":[`+weatherToolJSON+`]}`)
	if len(r.Output) != 2 || r.Output[0].Type != "reasoning" || r.Output[1].Type != "function_call" {
		t.Fatalf("output %s", raw)
	}
	output = "It is sunny.<|im_end|>"
	callID := r.Output[1].AsFunctionCall().CallID
	postResponse(t, hs.URL, `{"previous_response_id":"`+r.ID+`","input":[{"type":"function_call_output","call_id":"`+callID+`","output":"sunny"}],"tools":[`+weatherToolJSON+`]}`)
	chained := lastPrompt()
	// (The synthetic vocabulary decodes a space after each control token.)
	if !regexp.MustCompile(`<think>\s*I need the weather.\s*</think>\s*<tool_call>`).MatchString(chained) || !strings.Contains(chained, "<tool_response>\nsunny\n</tool_response>") {
		t.Errorf("the reasoning of the call's turn is not in the prompt:\n%s", chained)
	}
	// The same history sent whole, the reasoning item as input.
	var out map[string]json.RawMessage
	json.Unmarshal(raw, &out)
	items, _ := splitArray(out["output"])
	input := append([]json.RawMessage{json.RawMessage(`{"role":"user","content":"Weather in Paris?"}`)}, items...)
	input = append(input, json.RawMessage(`{"type":"function_call_output","call_id":"`+callID+`","output":"sunny"}`))
	in, _ := json.Marshal(input)
	postResponse(t, hs.URL, `{"input":`+string(in)+`,"tools":[`+weatherToolJSON+`]}`)
	if whole := lastPrompt(); whole != chained {
		t.Errorf("the history sent whole makes\n%s\nprevious_response_id makes\n%s", whole, chained)
	}
}
