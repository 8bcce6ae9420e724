package responses

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/api/openai"
	"github.com/ruvllm/ruvllm/session"
)

// Limits of OpenAI's metadata.
const (
	maxMetadata      = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// request is a create request once read: the session request (without its
// messages, which need the stored conversation), the input items, and
// the settings the response echoes.
type request struct {
	sess     session.Request
	stream   bool
	previous string
	// input are the request's input items, each one JSON object.
	input []json.RawMessage
	// echo is the response as it starts: the settings it reports.
	echo response
}

// parse reads a create request.
func (a *API) parse(f *jsonhttp.Fields) (*request, error) {
	req := &request{sess: session.Request{Sampling: a.Models.Sampling(), IDPrefix: "resp_", Route: "/v1/responses",
		Names: session.FieldNames{Messages: "input", MaxTokens: "max_output_tokens", Output: "text.format"}}}
	e := &req.echo
	e.Object, e.Status, e.Output, e.Store = "response", statusInProgress, []any{}, true
	e.ParallelToolCalls, e.ServiceTier, e.Truncation, e.Metadata = true, "default", "disabled", map[string]string{}
	e.Text = textConfig{Format: json.RawMessage(`{"type":"text"}`), Verbosity: "medium"}
	e.Tools, e.ToolChoice = []any{}, "auto"
	var err error
	if req.sess.Model, _, err = f.Str("model"); err != nil {
		return nil, err
	}
	if req.stream, _, err = f.Bool("stream"); err != nil {
		return nil, err
	}
	if so, ok, err := f.Object("stream_options"); err != nil {
		return nil, err
	} else if ok {
		if !req.stream {
			return nil, session.Invalid("stream_options", session.CodeInvalidValue, "stream_options is only allowed when stream is true")
		}
		// Obfuscation pads events against side channels; leaving it out
		// changes no content.
		if _, _, err := so.Bool("include_obfuscation"); err != nil {
			return nil, err
		}
		if err := so.Unknown(); err != nil {
			return nil, err
		}
	}
	if v, ok, err := f.Bool("store"); err != nil {
		return nil, err
	} else if ok {
		e.Store = v
	}
	if v, ok, err := f.Bool("background"); err != nil {
		return nil, err
	} else if ok && v {
		return nil, session.Unsupported("background", "background responses are not supported by this server")
	}
	for _, name := range []string{"conversation", "prompt"} {
		if f.Has(name) {
			f.Raw(name)
			return nil, session.Unsupported(name, "%s is not supported by this server; use previous_response_id or send the input items", name)
		}
	}
	if id, ok, err := f.Str("previous_response_id"); err != nil {
		return nil, err
	} else if ok {
		req.previous = id
		e.PreviousResponseID = &id
	}
	if s, ok, err := f.Str("instructions"); err != nil {
		return nil, err
	} else if ok {
		e.Instructions = &s
	}
	if err := parseInput(f, req); err != nil {
		return nil, err
	}
	if err := parseTools(f, req); err != nil {
		return nil, err
	}
	if err := parseText(f, req); err != nil {
		return nil, err
	}
	if err := parseReasoning(f, req); err != nil {
		return nil, err
	}
	if v, ok, err := f.Integer("max_output_tokens"); err != nil {
		return nil, err
	} else if ok {
		if v < 1 {
			return nil, session.Invalid("max_output_tokens", session.CodeInvalidValue, "max_output_tokens must be at least 1, got %d", v)
		}
		req.sess.MaxTokens = int(min(v, math.MaxInt32))
		e.MaxOutputTokens = &v
	}
	// max_tool_calls bounds the calls of built-in tools, which this
	// server has none of.
	if v, ok, err := f.Integer("max_tool_calls"); err != nil {
		return nil, err
	} else if ok {
		if v < 1 {
			return nil, session.Invalid("max_tool_calls", session.CodeInvalidValue, "max_tool_calls must be at least 1, got %d", v)
		}
		e.MaxToolCalls = &v
	}
	// temperature and top_p, and the llama-server and vLLM sampling
	// extensions the chat completions take (top_k, min_p, seed, ...).
	if err := openai.ParseSampling(f, &req.sess.Sampling); err != nil {
		return nil, err
	}
	e.Temperature, e.TopP = float32JSON(req.sess.Sampling.Temperature), float32JSON(req.sess.Sampling.TopP)
	if v, ok, err := f.Integer("top_logprobs"); err != nil {
		return nil, err
	} else if ok && v != 0 {
		return nil, session.Unsupported("top_logprobs", "top_logprobs is not supported by this endpoint")
	}
	if err := parseMisc(f, req); err != nil {
		return nil, err
	}
	if err := f.Unknown(); err != nil {
		return nil, err
	}
	return req, nil
}

// float32JSON is a float32 setting as the decimal it was written as
// (0.7, not 0.699999988079071).
func float32JSON(x float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
	return v
}

// parseInput reads input: a string (one user message) or a list of items.
func parseInput(f *jsonhttp.Fields, req *request) error {
	v, ok := f.Raw("input")
	if !ok {
		if req.previous == "" {
			return session.Invalid("input", session.CodeMissing, "input is required")
		}
		return nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		item, _ := json.Marshal(map[string]any{"type": typeMessage, "role": "user", "content": []any{map[string]any{"type": "input_text", "text": s}}})
		req.input = []json.RawMessage{item}
		return nil
	}
	items, ok := jsonhttp.ParseArray(v)
	if !ok {
		return session.Invalid("input", session.CodeInvalidType, "input must be a string or an array of input items")
	}
	if len(items) > session.MaxMessages {
		return session.Invalid("input", session.CodeInvalidValue, "input holds %d items; at most %d are allowed", len(items), session.MaxMessages)
	}
	// Each item is checked now, so that a bad one is a 400 about it.
	var c conversation
	for i, item := range items {
		if err := c.add(item, "input["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
	}
	req.input = items
	return nil
}

// parseTools reads tools (function tools, flat: {"type":"function",
// "name", "description", "parameters", "strict"}), tool_choice and
// parallel_tool_calls.
func parseTools(f *jsonhttp.Fields, req *request) error {
	raw, _, err := f.Array("tools")
	if err != nil {
		return err
	}
	if len(raw) > session.MaxTools {
		return session.Invalid("tools", session.CodeInvalidValue, "tools holds %d tools; at most %d are allowed", len(raw), session.MaxTools)
	}
	for i, rt := range raw {
		p := "tools[" + strconv.Itoa(i) + "]"
		tf, err := jsonhttp.ObjectOf(rt, p)
		if err != nil {
			return err
		}
		typ, err := required(tf, "type")
		if err != nil {
			return err
		}
		if typ != "function" {
			return session.Unsupported(p+".type", "tools of type %s are not supported by this server; only \"function\" is", session.Quote(typ))
		}
		name, err := required(tf, "name")
		if err != nil {
			return err
		}
		if !session.ValidName(name) {
			return session.Invalid(p+".name", session.CodeInvalidValue, "%s.name %s must be 1 to 64 letters, digits, underscores and dashes", p, session.Quote(name))
		}
		t := session.Tool{Name: name}
		echo := functionTool{Type: "function", Name: name, Parameters: json.RawMessage("null")}
		if d, ok, err := tf.Str("description"); err != nil {
			return err
		} else if ok {
			t.Description, echo.Description = d, &d
		}
		if s, ok, err := tf.Bool("strict"); err != nil {
			return err
		} else if ok {
			echo.Strict = &s
		}
		if _, ok, err := tf.Object("parameters"); err != nil {
			return err
		} else if ok {
			t.Parameters, _ = tf.Raw("parameters")
			echo.Parameters = t.Parameters
		}
		if err := tf.Unknown(); err != nil {
			return err
		}
		req.sess.Tools = append(req.sess.Tools, t)
		req.echo.Tools = append(req.echo.Tools, echo)
	}
	if err := parseToolChoice(f, req); err != nil {
		return err
	}
	if p, ok, err := f.Bool("parallel_tool_calls"); err != nil {
		return err
	} else if ok {
		req.sess.ToolChoice.Sequential = !p
		req.echo.ParallelToolCalls = p
	}
	return nil
}

// parseToolChoice reads tool_choice: "none", "auto", "required",
// {"type":"function","name"}, or {"type":"allowed_tools","mode",
// "tools"}, which narrows the tools to those listed.
func parseToolChoice(f *jsonhttp.Fields, req *request) error {
	v, ok := f.Raw("tool_choice")
	if !ok {
		return nil
	}
	tc := &req.sess.ToolChoice
	req.echo.ToolChoice = v
	var s string
	if json.Unmarshal(v, &s) == nil {
		switch s {
		case "none", "auto", "required":
			tc.Mode = s
		default:
			return session.Invalid("tool_choice", session.CodeInvalidValue, "tool_choice %s is not one of none, auto, required or a function", session.Quote(s))
		}
		return nil
	}
	obj, err := jsonhttp.ObjectOf(v, "tool_choice")
	if err != nil {
		return session.Invalid("tool_choice", session.CodeInvalidType, "tool_choice must be a string or an object")
	}
	typ, err := required(obj, "type")
	if err != nil {
		return err
	}
	switch typ {
	case "function":
		name, err := required(obj, "name")
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(req.sess.Tools, func(t session.Tool) bool { return t.Name == name }) {
			return session.Invalid("tool_choice.name", session.CodeInvalidValue, "tool_choice names %s, which is not one of the tools", session.Quote(name))
		}
		tc.Mode, tc.Name = session.ToolFunction, name
	case "allowed_tools":
		mode, err := required(obj, "mode")
		if err != nil {
			return err
		}
		if mode != "auto" && mode != "required" {
			return session.Invalid("tool_choice.mode", session.CodeInvalidValue, "tool_choice.mode %s is not one of auto, required", session.Quote(mode))
		}
		list, ok, err := obj.Array("tools")
		if err != nil {
			return err
		}
		if !ok {
			return session.Invalid("tool_choice.tools", session.CodeMissing, "tool_choice.tools is required")
		}
		allowed := map[string]bool{}
		for i, rt := range list {
			p := "tool_choice.tools[" + strconv.Itoa(i) + "]"
			tf, err := jsonhttp.ObjectOf(rt, p)
			if err != nil {
				return err
			}
			if typ, err := required(tf, "type"); err != nil {
				return err
			} else if typ != "function" {
				return session.Unsupported(p+".type", "tools of type %s are not supported by this server; only \"function\" is", session.Quote(typ))
			}
			name, err := required(tf, "name")
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(req.sess.Tools, func(t session.Tool) bool { return t.Name == name }) {
				return session.Invalid(p+".name", session.CodeInvalidValue, "%s names %s, which is not one of the tools", p, session.Quote(name))
			}
			if err := tf.Unknown(); err != nil {
				return err
			}
			allowed[name] = true
		}
		req.sess.Tools = slices.DeleteFunc(req.sess.Tools, func(t session.Tool) bool { return !allowed[t.Name] })
		tc.Mode = mode
	default:
		return session.Unsupported("tool_choice.type", "tool_choice of type %s is not supported; only function and allowed_tools are", session.Quote(typ))
	}
	return obj.Unknown()
}

// parseText reads text: its format ({"type":"text"}, {"type":
// "json_object"} or {"type":"json_schema","name","schema","strict",
// "description"}) and verbosity.
func parseText(f *jsonhttp.Fields, req *request) error {
	tf, ok, err := f.Object("text")
	if err != nil || !ok {
		return err
	}
	if v, ok, err := tf.Str("verbosity"); err != nil {
		return err
	} else if ok && v != "medium" {
		// A model's length is its own; only the default is honoured.
		return session.Unsupported("text.verbosity", "text.verbosity %s is not supported by this server; only medium is", session.Quote(v))
	}
	if ff, ok, err := tf.Object("format"); err != nil {
		return err
	} else if ok {
		typ, err := required(ff, "type")
		if err != nil {
			return err
		}
		switch typ {
		case "text":
			if err := ff.Unknown(); err != nil {
				return err
			}
		case "json_object":
			if err := ff.Unknown(); err != nil {
				return err
			}
			req.sess.Output = session.JSONObjectOutput()
		case "json_schema":
			if !ff.Has("schema") {
				return session.Invalid("text.format.schema", session.CodeMissing, "text.format.schema is required when the type is json_schema")
			}
			if req.sess.Output, err = openai.JSONSchemaObject(ff, "text.format"); err != nil {
				return err
			}
		default:
			return session.Invalid("text.format.type", session.CodeInvalidValue, "text.format.type %s is not one of text, json_object, json_schema", session.Quote(typ))
		}
		req.echo.Text.Format, _ = tf.Raw("format")
	}
	return tf.Unknown()
}

// parseReasoning reads reasoning: effort becomes what thinking templates
// read (none turns thinking off; minimal is low, xhigh and max are high,
// the levels templates know); summary is accepted, the reasoning being
// given whole as the reasoning item's content.
func parseReasoning(f *jsonhttp.Fields, req *request) error {
	rf, ok, err := f.Object("reasoning")
	if err != nil || !ok {
		return err
	}
	if e, ok, err := rf.Str("effort"); err != nil {
		return err
	} else if ok {
		level := map[string]string{"none": "none", "minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}[e]
		if level == "" {
			return session.Invalid("reasoning.effort", session.CodeInvalidValue, "reasoning.effort %s is not one of none, minimal, low, medium, high, xhigh, max", session.Quote(e))
		}
		req.sess.Reasoning.Effort = level
		req.echo.Reasoning.Effort = &e
	}
	for _, name := range []string{"summary", "generate_summary"} {
		if s, ok, err := rf.Str(name); err != nil {
			return err
		} else if ok {
			if s != "auto" && s != "concise" && s != "detailed" {
				return session.Invalid("reasoning."+name, session.CodeInvalidValue, "reasoning.%s %s is not one of auto, concise, detailed", name, session.Quote(s))
			}
			req.echo.Reasoning.Summary = &s
		}
	}
	// context says which past reasoning the model sees again: the chat
	// template decides that here.
	if c, ok, err := rf.Str("context"); err != nil {
		return err
	} else if ok && c != "auto" && c != "current_turn" && c != "all_turns" {
		return session.Invalid("reasoning.context", session.CodeInvalidValue, "reasoning.context %s is not one of auto, current_turn, all_turns", session.Quote(c))
	}
	if m, ok, err := rf.Str("mode"); err != nil {
		return err
	} else if ok && m != "standard" {
		return session.Unsupported("reasoning.mode", "reasoning.mode %s is not supported; only standard is", session.Quote(m))
	}
	return rf.Unknown()
}

// includable are the include values accepted: encrypted reasoning (this
// server's reasoning items carry their text instead), and the outputs of
// tools this server refuses, which change nothing.
var includable = []string{"reasoning.encrypted_content", "web_search_call.results", "web_search_call.action.sources", "file_search_call.results",
	"code_interpreter_call.outputs", "computer_call_output.output.image_url", "message.input_image.image_url"}

// parseMisc reads the fields that are echoed or change nothing: metadata
// (only echoed), user, truncation, include, service_tier (OpenAI's
// queues), and prompt_cache_key, prompt_cache_retention and
// safety_identifier (OpenAI's caches and abuse detection; the prefix cache
// here needs no hint).
func parseMisc(f *jsonhttp.Fields, req *request) error {
	e := &req.echo
	if mf, ok, err := f.Object("metadata"); err != nil {
		return err
	} else if ok {
		if mf.Len() > maxMetadata {
			return session.Invalid("metadata", session.CodeInvalidValue, "metadata holds %d pairs; at most %d are allowed", mf.Len(), maxMetadata)
		}
		for _, k := range mf.Names() {
			v, _, err := mf.Str(k)
			if err != nil {
				return err
			}
			if len(k) > maxMetadataKey || len(v) > maxMetadataValue {
				return session.Invalid("metadata", session.CodeInvalidValue, "metadata keys are at most %d characters and values at most %d", maxMetadataKey, maxMetadataValue)
			}
			e.Metadata[k] = v
		}
	}
	if u, ok, err := f.Str("user"); err != nil {
		return err
	} else if ok {
		req.sess.User, e.User = u, &u
	}
	// truncation auto drops the oldest items of an input beyond the
	// context; here such an input is refused either way.
	if t, ok, err := f.Str("truncation"); err != nil {
		return err
	} else if ok {
		if t != "auto" && t != "disabled" {
			return session.Invalid("truncation", session.CodeInvalidValue, "truncation %s is not one of auto, disabled", session.Quote(t))
		}
		e.Truncation = t
	}
	if inc, _, err := f.Strings("include"); err != nil {
		return err
	} else {
		for _, v := range inc {
			switch {
			case v == "message.output_text.logprobs":
				return session.Unsupported("include", "include %s is not supported by this endpoint", session.Quote(v))
			case !slices.Contains(includable, v):
				return session.Invalid("include", session.CodeInvalidValue, "include %s is not a value this endpoint knows", session.Quote(v))
			}
		}
	}
	if t, ok, err := f.Str("service_tier"); err != nil {
		return err
	} else if ok && !slices.Contains([]string{"auto", "default", "flex", "scale", "priority", "fast", "ultrafast"}, t) {
		return session.Invalid("service_tier", session.CodeInvalidValue, "service_tier %s is not one of auto, default, flex, scale, priority", session.Quote(t))
	}
	if k, ok, err := f.Str("prompt_cache_key"); err != nil {
		return err
	} else if ok {
		e.PromptCacheKey = &k
	}
	if s, ok, err := f.Str("safety_identifier"); err != nil {
		return err
	} else if ok {
		e.SafetyIdentifier = &s
	}
	_, _, err := f.Str("prompt_cache_retention")
	return err
}
