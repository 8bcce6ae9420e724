package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/session"
)

// Members of a request are read by name; members ollama does not know are
// ignored, as ollama's JSON decoding ignores them, and so are the option
// names it does not know.

// genRequest is what chat and generate share once read: the session
// request, and how the answer is framed.
type genRequest struct {
	req session.Request
	// name is the model as the client named it, which responses repeat.
	name   string
	target session.Target
	stream bool
	// think is the think member as given; nil when absent.
	think *thinkValue
	// keepAliveZero is keep_alive 0, which with nothing to generate
	// unloads the model.
	keepAliveZero bool
}

// thinkValue is ollama's think: true, false, or a level.
type thinkValue struct {
	on    bool
	level string // "low", "medium", "high" ("max" is read as "high"); "" for a boolean
}

// parseGen reads the members chat and generate share: model, stream,
// keep_alive, options, format, think, logprobs, top_logprobs.
func (a *API) parseGen(r *http.Request, f *jsonhttp.Fields, route string) (*genRequest, error) {
	g := &genRequest{stream: true}
	var err error
	if g.name, _, err = f.Str("model"); err != nil {
		return nil, err
	}
	if g.target, g.req.Model, err = a.resolve(g.name); err != nil {
		return nil, err
	}
	req := &g.req
	req.IDPrefix, req.Route, req.Received = "ollama-", route, jsonhttp.Received(r)
	req.Sampling = a.Models.Sampling()
	req.FitMaxTokens = true
	req.Names = session.FieldNames{MaxTokens: "options.num_predict", Stop: "options.stop", Output: "format", Prefix: "context"}
	if s, ok, err := f.Bool("stream"); err != nil {
		return nil, err
	} else if ok {
		g.stream = s
	}
	if v, ok := f.Raw("keep_alive"); ok {
		if req.KeepAlive, err = session.ParseKeepAlive(v, "keep_alive"); err != nil {
			return nil, err
		}
		g.keepAliveZero = *req.KeepAlive == 0
	}
	if err := parseOptions(f, req); err != nil {
		return nil, err
	}
	if req.Output, err = parseFormat(f); err != nil {
		return nil, err
	}
	if g.think, err = parseThink(f); err != nil {
		return nil, err
	}
	if req.Logprobs, _, err = f.Bool("logprobs"); err != nil {
		return nil, err
	}
	if v, ok, err := f.Integer("top_logprobs"); err != nil {
		return nil, err
	} else if ok {
		if v < 0 || v > 20 {
			return nil, session.Invalid("top_logprobs", session.CodeInvalidValue, "top_logprobs must be between 0 and 20")
		}
		req.TopLogprobs = int(v)
	}
	// truncate and shift are ollama's ways with prompts longer than the
	// context, which this server refuses instead (docs/ollama.md).
	if _, _, err := f.Bool("truncate"); err != nil {
		return nil, err
	}
	if _, _, err := f.Bool("shift"); err != nil {
		return nil, err
	}
	return g, nil
}

// applyThink turns think into the session's reasoning options for the
// model: a thinking model thinks unless told not to (ollama's default); a
// model that does not think refuses think true, as ollama does.
func (g *genRequest) applyThink() error {
	m := g.target.Model
	if m == nil {
		// The router chooses the model: its template decides.
		if g.think != nil {
			on := g.think.on
			g.req.Reasoning.Think = &on
			g.req.Reasoning.Effort = g.think.level
		}
		return nil
	}
	if !m.Thinks() {
		if g.think != nil && g.think.on {
			return session.Invalid("think", session.CodeUnsupported, "%q does not support thinking", g.name)
		}
		return nil
	}
	on := g.think == nil || g.think.on
	g.req.Reasoning.Think = &on
	if g.think != nil {
		g.req.Reasoning.Effort = g.think.level
	}
	return nil
}

// parseThink reads think: a boolean, or a level ("low", "medium", "high",
// "max"), which turns thinking on at that effort.
func parseThink(f *jsonhttp.Fields) (*thinkValue, error) {
	v, ok := f.Raw("think")
	if !ok {
		return nil, nil
	}
	var b bool
	if json.Unmarshal(v, &b) == nil {
		return &thinkValue{on: b}, nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		switch s {
		case "low", "medium", "high":
			return &thinkValue{on: true, level: s}, nil
		case "max":
			// The highest level thinking templates know.
			return &thinkValue{on: true, level: "high"}, nil
		}
		return nil, session.Invalid("think", session.CodeInvalidValue, "invalid think value: %s (must be \"high\", \"medium\", \"low\", \"max\", true, or false)", session.Quote(s))
	}
	return nil, f.TypeError("think", "a boolean or a string (\"high\", \"medium\", \"low\", \"max\")")
}

// parseFormat reads format: "json" (any JSON object), or a JSON schema the
// output must follow; "" or absent leaves the output free.
func parseFormat(f *jsonhttp.Fields) (*session.Output, error) {
	v, ok := f.Raw("format")
	if !ok {
		return nil, nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		switch s {
		case "":
			return nil, nil
		case "json":
			return session.JSONObjectOutput(), nil
		}
		return nil, session.Invalid("format", session.CodeInvalidValue, "invalid format: %s: expected \"json\" or a JSON schema", session.Quote(s))
	}
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' {
		return nil, f.TypeError("format", "\"json\" or a JSON schema (an object)")
	}
	return session.JSONSchemaOutput(v, "format")
}

// neutralOptions are the options of samplers this server does not have,
// with the values that turn them off; any other value is refused.
var neutralOptions = map[string]func(float64) bool{
	"typical_p": func(v float64) bool { return v >= 1 || v == 0 },
	"tfs_z":     func(v float64) bool { return v >= 1 || v == 0 },
	"mirostat":  func(v float64) bool { return v == 0 },
}

// ignoredOptions are options accepted and ignored: the settings of the
// samplers above, and those of how ollama loads a model and shifts its
// context, which this server decides when it starts (num_ctx among them:
// the served context is fixed, docs/ollama.md).
var ignoredOptions = []string{"mirostat_tau", "mirostat_eta", "penalize_newline", "num_keep", "num_ctx", "num_batch", "num_gpu",
	"main_gpu", "low_vram", "f16_kv", "logits_all", "vocab_only", "use_mmap", "use_mlock", "num_thread", "numa", "draft_num_predict"}

// parseOptions reads options into req: the sampling settings (with the
// server's defaults for those left out), num_predict (-1, -2 and 0: as
// many as the context holds; a larger cap stops where the context ends)
// and stop. Option names ollama does not know are ignored, as ollama
// ignores them.
func parseOptions(f *jsonhttp.Fields, req *session.Request) error {
	o, ok, err := f.Object("options")
	if err != nil || !ok {
		return err
	}
	p := &req.Sampling
	for _, n := range []struct {
		name string
		dst  *float32
	}{
		{"temperature", &p.Temperature}, {"top_p", &p.TopP}, {"min_p", &p.MinP}, {"repeat_penalty", &p.RepeatPenalty},
		{"presence_penalty", &p.PresencePenalty}, {"frequency_penalty", &p.FrequencyPenalty},
	} {
		if v, ok, err := o.Number(n.name); err != nil {
			return err
		} else if ok {
			*n.dst = float32(v)
		}
	}
	if v, ok, err := o.Integer("top_k"); err != nil {
		return err
	} else if ok {
		// 0 and below turn top-k off.
		p.TopK = int(max(0, min(v, math.MaxInt32)))
	}
	if v, ok, err := o.Integer("seed"); err != nil {
		return err
	} else if ok {
		if v < 0 {
			p.Seed = nil // ollama's -1: a random seed
		} else {
			p.Seed = &v
		}
	}
	if v, ok, err := o.Integer("num_predict"); err != nil {
		return err
	} else if ok && v > 0 {
		req.MaxTokens = int(min(v, math.MaxInt32))
	}
	if v, ok, err := o.Integer("repeat_last_n"); err != nil {
		return err
	} else if ok {
		switch {
		case v == 0:
			// ollama's 0: no window, so the penalties see nothing.
			p.RepeatPenalty, p.PresencePenalty, p.FrequencyPenalty = 1, 0, 0
		case v < -1 || v > backends.MaxRepeatLastN:
			return session.Invalid("options.repeat_last_n", session.CodeInvalidValue, "options.repeat_last_n must be in [-1, %d], got %d", backends.MaxRepeatLastN, v)
		default:
			p.RepeatLastN = int(v)
		}
	}
	if req.Stop, _, err = o.Strings("stop"); err != nil {
		return err
	}
	for name, neutral := range neutralOptions {
		if v, ok, err := o.Number(name); err != nil {
			return err
		} else if ok && !neutral(v) {
			return session.Unsupported("options."+name, "options.%s is not supported by this server (it is off at its default)", name)
		}
	}
	o.Ignore(ignoredOptions...)
	if err := p.Validate(); err != nil {
		var pe *backends.ParamError
		if errors.As(err, &pe) {
			return session.Invalid("options."+pe.Param, session.CodeInvalidValue, "invalid options.%s: %s", pe.Param, pe.Msg)
		}
		return session.Invalid("options", session.CodeInvalidValue, "%v", err)
	}
	return nil
}

// roles are the message roles ollama's templates know.
var roles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true}

// parseMessages reads ollama's chat messages into the template's: content
// (a string), tool calls (arguments as objects, as templates take them),
// tool_name on tool results (the message's name, and its tool_call_id when
// it has none), and thinking (reasoning_content, for templates that show
// past reasoning). Images need a vision model, which this server does not
// run.
func parseMessages(f *jsonhttp.Fields, model string) ([]session.Message, error) {
	raw, _, err := f.Array("messages")
	if err != nil {
		return nil, err
	}
	if len(raw) > session.MaxMessages {
		return nil, session.Invalid("messages", session.CodeInvalidValue, "messages holds %d messages; at most %d are allowed", len(raw), session.MaxMessages)
	}
	out := make([]session.Message, len(raw))
	for i, rm := range raw {
		p := "messages[" + strconv.Itoa(i) + "]"
		mf, err := jsonhttp.ObjectOf(rm, p)
		if err != nil {
			return nil, err
		}
		role, _, err := mf.Str("role")
		if err != nil {
			return nil, err
		}
		role = strings.ToLower(role)
		if !roles[role] {
			return nil, session.Invalid(p+".role", session.CodeInvalidValue, "%s.role %s is not one of system, user, assistant, tool", p, session.Quote(role))
		}
		content, _, err := mf.Str("content")
		if err != nil {
			return nil, err
		}
		msg := session.Message{"role": role, "content": content}
		if err := refuseImages(mf, model); err != nil {
			return nil, err
		}
		if th, ok, err := mf.Str("thinking"); err != nil {
			return nil, err
		} else if ok && th != "" && role == "assistant" {
			msg["reasoning_content"] = th
		}
		if calls, err := parseCalls(mf, p); err != nil {
			return nil, err
		} else if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		name, _, err := mf.Str("tool_name")
		if err != nil {
			return nil, err
		}
		id, _, err := mf.Str("tool_call_id")
		if err != nil {
			return nil, err
		}
		if role == "tool" {
			if name != "" {
				msg["name"] = name
			}
			if id == "" {
				id = name
			}
			msg["tool_call_id"] = id
		}
		out[i] = msg
	}
	return out, nil
}

// refuseImages answers 400 for images: this server runs text models only.
func refuseImages(f *jsonhttp.Fields, model string) error {
	a, ok, err := f.Array("images")
	if err != nil {
		return err
	}
	if ok && len(a) > 0 {
		return session.Unsupported(f.Param("images"), "%q does not support images: this server runs text models only", model)
	}
	return nil
}

// parseCalls reads an assistant message's tool_calls into OpenAI's shape,
// which templates read: {"id", "type": "function", "function": {"name",
// "arguments": {...}}}. Arguments given as JSON text are read as the
// object they hold.
func parseCalls(mf *jsonhttp.Fields, p string) ([]any, error) {
	raw, ok, err := mf.Array("tool_calls")
	if err != nil || !ok {
		return nil, err
	}
	calls := make([]any, 0, len(raw))
	for j, rc := range raw {
		cp := p + ".tool_calls[" + strconv.Itoa(j) + "]"
		cf, err := jsonhttp.ObjectOf(rc, cp)
		if err != nil {
			return nil, err
		}
		fn, ok, err := cf.Object("function")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, session.Invalid(cp+".function", session.CodeMissing, "%s.function is required", cp)
		}
		name, _, err := fn.Str("name")
		if err != nil {
			return nil, err
		}
		args := map[string]any{}
		if v, ok := fn.Raw("arguments"); ok {
			var s string
			if json.Unmarshal(v, &s) == nil {
				v = json.RawMessage(s)
			}
			if err := json.Unmarshal(v, &args); err != nil || args == nil {
				return nil, session.Invalid(cp+".function.arguments", session.CodeInvalidType, "%s.function.arguments must be an object", cp)
			}
		}
		call := map[string]any{"type": "function", "function": map[string]any{"name": name, "arguments": args}}
		if id, ok, err := cf.Str("id"); err != nil {
			return nil, err
		} else if ok && id != "" {
			call["id"] = id
		}
		calls = append(calls, call)
	}
	return calls, nil
}

// parseTools reads tools: OpenAI's function tools, {"type": "function",
// "function": {"name", "description", "parameters"}}, the type defaulting
// to function.
func parseTools(f *jsonhttp.Fields) ([]session.Tool, error) {
	var out []session.Tool
	_, err := f.EachObject("tools", session.MaxTools, func(_ int, p string, tf *jsonhttp.Fields, _ json.RawMessage) error {
		if typ, ok, err := tf.Str("type"); err != nil {
			return err
		} else if ok && typ != "function" {
			return session.Unsupported(p+".type", "tools of type %s are not supported; only \"function\" is", session.Quote(typ))
		}
		fn, ok, err := tf.Object("function")
		if err != nil {
			return err
		}
		if !ok {
			return session.Invalid(p+".function", session.CodeMissing, "%s.function is required", p)
		}
		name, _, err := fn.Str("name")
		if err != nil {
			return err
		}
		t := session.Tool{Name: name}
		if t.Description, _, err = fn.Str("description"); err != nil {
			return err
		}
		if _, ok, err := fn.Object("parameters"); err != nil {
			return err
		} else if ok {
			t.Parameters, _ = fn.Raw("parameters")
		}
		var obj map[string]any
		fnRaw, _ := tf.Raw("function")
		if err := json.Unmarshal(fnRaw, &obj); err != nil {
			return session.Invalid(p, session.CodeInvalidJSON, "%s: %v", p, err)
		}
		t.Object = map[string]any{"type": "function", "function": obj}
		out = append(out, t)
		return nil
	})
	return out, err
}
