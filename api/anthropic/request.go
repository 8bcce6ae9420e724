package anthropic

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/session"
)

// minThinkingBudget is the least budget_tokens Anthropic accepts.
const minThinkingBudget = 1024

// names are Anthropic's names of the fields the session's errors point at.
var names = session.FieldNames{Model: "model", Messages: "messages", Prompt: "messages", MaxTokens: "max_tokens",
	Stop: "stop_sequences", Tools: "tools", ToolChoice: "tool_choice", Output: "output_config.format"}

// request is a Messages request once read: the session's request and how
// the answer is framed.
type request struct {
	req    session.Request
	stream bool
	// maxTokens is max_tokens as asked (the session fits it to the
	// context).
	maxTokens int
	// omitThinking leaves the thinking text out of the response
	// (thinking.display "omitted"), keeping the blocks and signatures.
	omitThinking bool
}

// parseRequest reads a Messages request, or with count a count_tokens
// request (which has no max_tokens, stream, sampling, stops or metadata).
func (a *API) parseRequest(f *jsonhttp.Fields, count bool) (*request, error) {
	mr := &request{req: session.Request{Sampling: a.Models.Sampling(), Names: names, IDPrefix: "msg_", CallIDPrefix: "toolu_",
		Route: "/v1/messages", FitMaxTokens: true, N: 1}}
	req := &mr.req
	model, ok, err := f.Str("model")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, missing("model")
	}
	req.Model = model
	var thinking thinkingConfig
	if !count {
		if err := mr.parseGeneration(f); err != nil {
			return nil, err
		}
	}
	system, err := parseSystem(f)
	if err != nil {
		return nil, err
	}
	conv, err := parseMessages(f, system)
	if err != nil {
		return nil, err
	}
	req.Messages, req.Template.ContinueFinal = conv.messages, conv.continueFinal
	if req.Tools, err = parseTools(f); err != nil {
		return nil, err
	}
	if req.ToolChoice, err = parseToolChoice(f, req.Tools); err != nil {
		return nil, err
	}
	if thinking, err = parseThinking(f); err != nil {
		return nil, err
	}
	req.Reasoning.Think, mr.omitThinking = thinking.think, thinking.omit
	if thinking.enabled && !count && thinking.budget >= mr.maxTokens {
		// As Anthropic: the thinking counts toward max_tokens.
		return nil, session.Invalid("max_tokens", session.CodeInvalidValue,
			"`max_tokens` must be greater than `thinking.budget_tokens` (%d is not greater than %d)", mr.maxTokens, thinking.budget)
	}
	if thinking.enabled && (req.ToolChoice.Mode == session.ToolRequired || req.ToolChoice.Mode == session.ToolFunction) {
		return nil, session.Invalid("tool_choice", session.CodeInvalidValue,
			"Thinking may not be enabled when tool_choice forces tool use.")
	}
	if err := parseOutputConfig(f, req); err != nil {
		return nil, err
	}
	if err := parseContextManagement(f); err != nil {
		return nil, err
	}
	if err := refuseFeatures(f); err != nil {
		return nil, err
	}
	if err := f.Unknown(); err != nil {
		return nil, err
	}
	return mr, nil
}

// parseGeneration reads what only a generation has: max_tokens, stream,
// the sampling, stop_sequences, metadata, the fields that change nothing
// here (service_tier, inference_geo, diagnostics, fallback_credit_token, a
// container without skills), and the features refused (fallbacks,
// threads).
func (mr *request) parseGeneration(f *jsonhttp.Fields) error {
	req := &mr.req
	v, ok, err := f.Integer("max_tokens")
	if err != nil {
		return err
	}
	if !ok {
		return missing("max_tokens")
	}
	if v < 0 {
		return session.Invalid("max_tokens", session.CodeInvalidValue, "max_tokens must be at least 0, got %d", v)
	}
	mr.maxTokens = int(min(v, math.MaxInt32))
	req.MaxTokens = mr.maxTokens
	if mr.stream, _, err = f.Bool("stream"); err != nil {
		return err
	}
	if req.Stop, _, err = f.Strings("stop_sequences"); err != nil {
		return err
	}
	for _, b := range []struct {
		name   string
		dst    *float32
		lo, hi float64
		loOpen bool
	}{{"temperature", &req.Sampling.Temperature, 0, 1, false}, {"top_p", &req.Sampling.TopP, 0, 1, true}} {
		x, ok, err := f.Number(b.name)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if x < b.lo || x > b.hi || (b.loOpen && x == b.lo) {
			lo := "["
			if b.loOpen {
				lo = "("
			}
			return session.Invalid(b.name, session.CodeInvalidValue, "%s must be in %s%g, %g], got %g", b.name, lo, b.lo, b.hi, x)
		}
		*b.dst = float32(x)
	}
	if k, ok, err := f.Integer("top_k"); err != nil {
		return err
	} else if ok {
		if k < 0 {
			return session.Invalid("top_k", session.CodeInvalidValue, "top_k must be at least 0, got %d", k)
		}
		req.Sampling.TopK = int(min(k, math.MaxInt32)) // 0 turns top-k off
	}
	if err := req.Sampling.Validate(); err != nil {
		param := ""
		if pe, ok := err.(*backends.ParamError); ok {
			param = pe.Param
		}
		return session.Invalid(param, session.CodeInvalidValue, "%v", err)
	}
	if md, ok, err := f.Object("metadata"); err != nil {
		return err
	} else if ok {
		if req.User, _, err = md.Str("user_id"); err != nil {
			return err
		}
		if err := md.Unknown(); err != nil {
			return err
		}
	}
	if err := oneOf(f, "service_tier", "auto", "standard_only"); err != nil {
		return err
	}
	if _, _, err := f.Str("inference_geo"); err != nil {
		return err
	}
	if _, _, err := f.Object("diagnostics"); err != nil {
		return err
	}
	// Billing: nothing to bill here.
	f.Raw("fallback_credit_token")
	if v, ok := f.Raw("container"); ok {
		var id string
		if json.Unmarshal(v, &id) != nil {
			cf, err := jsonhttp.ObjectOf(v, "container")
			if err != nil {
				return session.Invalid("container", session.CodeInvalidType, "container must be a string or an object")
			}
			if skills, ok, err := cf.Array("skills"); err != nil {
				return err
			} else if ok && len(skills) > 0 {
				return session.Unsupported("container.skills", "Agent Skills are not supported by this server")
			}
			cf.Raw("id")
			if err := cf.Unknown(); err != nil {
				return err
			}
		}
		// A container serves the code execution tool, which no request
		// here can have.
	}
	for _, name := range []string{"fallbacks", "thread"} {
		if f.Has(name) {
			f.Raw(name)
			return session.Unsupported(name, "%s is not supported by this server", name)
		}
	}
	return nil
}

// oneOf reads a string field that must be one of values; the value
// changes nothing here.
func oneOf(f *jsonhttp.Fields, name string, values ...string) error {
	s, ok, err := f.Str(name)
	if err != nil || !ok {
		return err
	}
	for _, v := range values {
		if s == v {
			return nil
		}
	}
	return session.Invalid(name, session.CodeInvalidValue, "%s %s is not one of %s", name, session.Quote(s), quoteList(values))
}

func quoteList(values []string) string {
	out := ""
	for i, v := range values {
		if i > 0 {
			out += ", "
		}
		out += strconv.Quote(v)
	}
	return out
}

// missing is Anthropic's 400 of a required field left out.
func missing(param string) *session.Error {
	return session.Invalid(param, session.CodeMissing, "%s: Field required", param)
}

// thinkingConfig is what "thinking" asks: think is nil for the
// template's default (adaptive, or no thinking field), enabled is the
// manual mode, budget its budget_tokens.
type thinkingConfig struct {
	think   *bool
	enabled bool
	budget  int
	omit    bool
}

// parseThinking reads thinking: {"type":"enabled","budget_tokens"},
// {"type":"disabled"} or {"type":"adaptive"}, each with an optional
// display ("summarized" or "omitted").
func parseThinking(f *jsonhttp.Fields) (thinkingConfig, error) {
	var tc thinkingConfig
	th, ok, err := f.Object("thinking")
	if err != nil || !ok {
		return tc, err
	}
	typ, ok, err := th.Str("type")
	if err != nil {
		return tc, err
	}
	if !ok {
		return tc, missing("thinking.type")
	}
	on, off := true, false
	switch typ {
	case "enabled":
		tc.think, tc.enabled = &on, true
		b, ok, err := th.Integer("budget_tokens")
		if err != nil {
			return tc, err
		}
		if !ok {
			return tc, missing("thinking.budget_tokens")
		}
		if b < minThinkingBudget {
			return tc, session.Invalid("thinking.budget_tokens", session.CodeInvalidValue,
				"thinking.budget_tokens must be at least %d, got %d", minThinkingBudget, b)
		}
		tc.budget = int(min(b, math.MaxInt32))
	case "disabled":
		tc.think = &off
	case "adaptive":
		// The model decides: the template's default.
	default:
		th.Raw("budget_tokens")
		return tc, session.Unsupported("thinking.type", "thinking.type %s is not supported; use enabled, disabled or adaptive", session.Quote(typ))
	}
	if typ != "disabled" {
		d, ok, err := th.Str("display")
		if err != nil {
			return tc, err
		}
		if ok {
			switch d {
			case "summarized":
				// The thinking comes whole, which is what a summary stands in for.
			case "omitted":
				tc.omit = true
			default:
				return tc, session.Invalid("thinking.display", session.CodeInvalidValue, "thinking.display %s is not one of \"summarized\", \"omitted\"", session.Quote(d))
			}
		}
	}
	if err := th.Unknown(); err != nil {
		return tc, err
	}
	return tc, nil
}

// parseOutputConfig reads output_config ({"effort", "format"}) and the
// older top-level output_format: the format's JSON schema constrains the
// answer; the effort becomes the template's reasoning effort (low, medium
// or high; xhigh and max are high).
func parseOutputConfig(f *jsonhttp.Fields, req *session.Request) error {
	oc, ok, err := f.Object("output_config")
	if err != nil {
		return err
	}
	if ok {
		if e, ok, err := oc.Str("effort"); err != nil {
			return err
		} else if ok {
			switch e {
			case "low", "medium", "high":
				req.Reasoning.Effort = e
			case "xhigh", "max":
				req.Reasoning.Effort = "high"
			default:
				return session.Invalid("output_config.effort", session.CodeInvalidValue,
					"output_config.effort %s is not one of \"low\", \"medium\", \"high\", \"xhigh\", \"max\"", session.Quote(e))
			}
		}
		if fm, ok, err := oc.Object("format"); err != nil {
			return err
		} else if ok {
			if req.Output, err = parseFormat(fm, "output_config.format"); err != nil {
				return err
			}
		}
		if err := oc.Unknown(); err != nil {
			return err
		}
	}
	if fm, ok, err := f.Object("output_format"); err != nil {
		return err
	} else if ok {
		if req.Output != nil {
			return session.Invalid("output_format", session.CodeInvalidValue, "give output_config.format or output_format, not both")
		}
		if req.Output, err = parseFormat(fm, "output_format"); err != nil {
			return err
		}
	}
	if req.Output != nil && (req.ToolChoice.Mode == session.ToolRequired || req.ToolChoice.Mode == session.ToolFunction) {
		return session.Unsupported("tool_choice", "an output format together with a tool_choice that forces a tool call is not supported: the output is the call")
	}
	return nil
}

// parseFormat reads {"type":"json_schema","schema":{...}} (the field
// param).
func parseFormat(fm *jsonhttp.Fields, param string) (*session.Output, error) {
	typ, ok, err := fm.Str("type")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, missing(param + ".type")
	}
	if typ != "json_schema" {
		return nil, session.Unsupported(param+".type", "%s.type %s is not supported; only \"json_schema\" is", param, session.Quote(typ))
	}
	if _, ok, err := fm.Object("schema"); err != nil {
		return nil, err
	} else if !ok {
		return nil, missing(param + ".schema")
	}
	schema, _ := fm.Raw("schema")
	if err := fm.Unknown(); err != nil {
		return nil, err
	}
	return session.JSONSchemaOutput(schema, param+".schema")
}

// parseContextManagement reads context_management, which Claude Code
// sends: the edit clear_thinking_20251015 keeping all thinking changes
// nothing and is accepted; edits that would clear context are refused.
func parseContextManagement(f *jsonhttp.Fields) error {
	cm, ok, err := f.Object("context_management")
	if err != nil || !ok {
		return err
	}
	edits, _, err := cm.Array("edits")
	if err != nil {
		return err
	}
	for i, raw := range edits {
		p := "context_management.edits[" + strconv.Itoa(i) + "]"
		ef, err := jsonhttp.ObjectOf(raw, p)
		if err != nil {
			return err
		}
		typ, _, err := ef.Str("type")
		if err != nil {
			return err
		}
		if typ == "clear_thinking_20251015" {
			if keep, ok := ef.Raw("keep"); ok && keepAll(keep) == "all" {
				if err := ef.Unknown(); err != nil {
					return err
				}
				continue
			}
			return session.Unsupported(p+".keep", "%s: clearing thinking from past turns is not supported; keep must be \"all\"", p)
		}
		return session.Unsupported(p+".type", "%s: the context edit %s is not supported by this server", p, session.Quote(typ))
	}
	return cm.Unknown()
}

// keepAll is "all" when keep is the string "all".
func keepAll(keep json.RawMessage) string {
	var s string
	if json.Unmarshal(keep, &s) == nil {
		return s
	}
	return ""
}

// refuseFeatures reads the fields of Anthropic's features that run on
// Anthropic's side, which count_tokens takes too: accepted where they
// change nothing (prompt caching is automatic here), refused where they
// would.
func refuseFeatures(f *jsonhttp.Fields) error {
	if _, _, err := f.Object("cache_control"); err != nil {
		return err
	}
	// Prefix reuse caches every prompt; speed and billing change no text.
	if err := oneOf(f, "speed", "standard", "fast"); err != nil {
		return err
	}
	if _, _, err := f.Object("billing_policy"); err != nil {
		return err
	}
	if f.Has("compaction") {
		f.Raw("compaction")
		return session.Unsupported("compaction", "server-side compaction is not supported by this server")
	}
	if servers, ok, err := f.Array("mcp_servers"); err != nil {
		return err
	} else if ok && len(servers) > 0 {
		return session.Unsupported("mcp_servers", "the MCP connector (mcp_servers) is not supported by this server; give the tools as client tools")
	}
	return nil
}
