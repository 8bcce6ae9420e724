package session

import (
	"encoding/json"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/grammar"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// Message is one chat message as the template sees it: role, content (a
// string), and optional name, tool_calls (arguments as objects, as Hugging
// Face passes them), tool_call_id, reasoning_content.
type Message = map[string]any

// Prompt is one text prompt: its text, or its tokens when the client sent
// token ids (Text is then their decoded text).
type Prompt struct {
	Text   string
	Tokens []tokenizer.ID
}

// Request is one generation as any protocol asks for it, once its wire
// package has decoded and checked the fields. The zero value of every
// field means what a client that leaves the field out gets.
type Request struct {
	// Model is the "model" as the client sent it: "" for the default
	// model, a model's id, "MODEL:ADAPTER", "ADAPTER", or the router's
	// name.
	Model string
	// IDPrefix starts the generation's id ("chatcmpl-", "msg_", ...); the
	// id names the completion for feedback and for the router.
	IDPrefix string
	// CallIDPrefix starts the ids of the tool calls the model makes
	// ("toolu_" for Anthropic); "" means "call_", OpenAI's. A tool-call
	// format whose templates need ids of a fixed length (Mistral's nine
	// characters) has them without a prefix.
	CallIDPrefix string
	// Route labels the generation in metrics: the HTTP route, or the
	// command.
	Route string
	// Received is when the request arrived, which time to first token
	// counts from; zero means when Start is called.
	Received time.Time

	// Messages is a chat, rendered with the model's template; Prompts are
	// text prompts, each continued by N choices. Exactly one is set.
	Messages []Message
	Prompts  []Prompt
	// Prefix are token ids put before the prompt: the conversation so far
	// as an earlier response gave it back (ollama's context). The prompt's
	// own leading BOS is then left out. It needs a chat or one prompt.
	Prefix []tokenizer.ID
	// Tools are the functions the model may call; ToolChoice how.
	Tools      []Tool
	ToolChoice ToolChoice
	// Template are the chat template's options.
	Template TemplateOptions
	// Reasoning is what the client asked of a thinking model.
	Reasoning ReasoningOptions

	// Output constrains the text to a grammar (JSON, a JSON schema, GBNF,
	// a regex, a choice); nil generates freely.
	Output *Output
	// Sampling configures the sampler; start from Models.Sampling.
	Sampling backends.Params
	// MaxTokens caps the tokens each choice generates; 0 means the
	// context left after the prompt, as llama-server does, and for a
	// prompt within the model's trained context (Model.TrainedContext) no
	// further than its end. Start sets it to the limit in force: the server's
	// (Options.MaxTokens) when it is lower or the request gives none.
	MaxTokens int
	// FitMaxTokens caps MaxTokens at what the context leaves after the
	// prompt instead of refusing a request whose prompt and MaxTokens
	// together exceed the context: ollama's num_predict, and Anthropic's
	// newer models, whose answer then ends when the context is full.
	FitMaxTokens bool
	// MinTokens are generated before an end-of-generation token or a stop
	// string may end a choice (vLLM's min_tokens).
	MinTokens int
	// IgnoreEOS generates past end-of-generation tokens, up to MaxTokens.
	IgnoreEOS bool
	// Stop are strings that end a choice where they appear; the stop
	// string itself is left out unless IncludeStop.
	Stop        []string
	IncludeStop bool
	// KeepSpecial writes control tokens (<|im_end|>, ...) into the text;
	// by default they are skipped, as vLLM's skip_special_tokens does.
	KeepSpecial bool
	// N is the number of choices per prompt; 0 means 1.
	N int
	// Logprobs asks for the chosen tokens' log-probabilities, TopLogprobs
	// for that many alternatives too.
	Logprobs    bool
	TopLogprobs int
	// PromptLogprobs scores the prompt's tokens too (echo with logprobs);
	// ScoreOnly generates nothing (max_tokens 0).
	PromptLogprobs, ScoreOnly bool
	// Slot, when not nil, runs the generation in that slot of the
	// model's engine (llama-server's id_slot); NoCache prefills the whole
	// prompt, reusing nothing cached (cache_prompt false).
	Slot    *int
	NoCache bool
	// Progress sends an EventProgress after each chunk of a prompt is
	// processed (llama-server's return_progress), best effort.
	Progress bool
	// PostSampling makes the logprobs those of the distribution each
	// token was drawn from, after the sampler's filters and temperature
	// (llama-server's post_sampling_probs).
	PostSampling bool
	// Speculative overrides the engine's speculative decoding (its draft
	// source and lengths) for this request; the zero value keeps the
	// server's. It changes the speed, never the output.
	Speculative backends.SpecParams
	// LoRAScale, when set, multiplies the adapter's updates (0 is the base
	// model exactly); it needs an adapter.
	LoRAScale *float32
	// Adapter is an adapter the caller loaded itself (the command line's
	// --lora), used when Model names none of the model's registry; the
	// caller keeps it alive until the generation is closed.
	Adapter *lora.Adapter
	// KeepAlive, when set, is how long a model on demand stays loaded
	// after this request.
	KeepAlive *time.Duration
	// User is the client's end user, which the router may tell apart;
	// RouteCostWeight overrides the router's cost weight.
	User            string
	RouteCostWeight *float64
	// Names are the protocol's names of the fields errors point at.
	Names FieldNames
}

// FieldNames are a protocol's names for the request fields a session's
// errors name; empty ones default to OpenAI's.
type FieldNames struct {
	Model, Messages, Prompt, MaxTokens, Stop, Tools, ToolChoice, Output, Prefix string
}

// names fills the defaults of req.Names.
func (req *Request) names() FieldNames {
	n := req.Names
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&n.Model, "model")
	def(&n.Messages, "messages")
	def(&n.Prompt, "prompt")
	def(&n.MaxTokens, "max_tokens")
	def(&n.Stop, "stop")
	def(&n.Tools, "tools")
	def(&n.ToolChoice, "tool_choice")
	def(&n.Output, "response_format")
	def(&n.Prefix, "prefix")
	return n
}

// promptParam is the field that holds the prompt.
func (req *Request) promptParam() string {
	if req.Messages != nil {
		return req.names().Messages
	}
	return req.names().Prompt
}

// Tool is one function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON schema of the arguments; nil when the tool
	// takes none.
	Parameters json.RawMessage
	// Object is the tool as the chat template sees it: OpenAI's
	// {"type":"function","function":{...}}. nil makes it from the fields.
	Object any
}

// ToolChoice modes.
const (
	ToolAuto     = "auto"     // the model decides (the default with tools)
	ToolNone     = "none"     // no call: the tools are not even shown
	ToolRequired = "required" // at least one call
	ToolFunction = "function" // a call of Name
)

// ToolChoice is how the model may call the tools.
type ToolChoice struct {
	// Mode is ToolAuto, ToolNone, ToolRequired or ToolFunction; "" means
	// auto with tools and none without.
	Mode string
	// Name is the function a ToolFunction choice must call.
	Name string
	// Sequential allows one call only (parallel_tool_calls false).
	Sequential bool
}

// TemplateOptions are a chat's template options.
type TemplateOptions struct {
	// Kwargs are extra template variables (enable_thinking, ...), as
	// chat_template_kwargs passes them.
	Kwargs map[string]any
	// NoGenerationPrompt leaves out the assistant's turn opening
	// (add_generation_prompt false).
	NoGenerationPrompt bool
	// ContinueFinal continues the last (assistant) message instead of
	// starting a new turn (vLLM's continue_final_message).
	ContinueFinal bool
}

// ReasoningFormat is how a thinking model's reasoning reaches the client.
type ReasoningFormat int

// Reasoning formats, as llama-server's --reasoning-format names them.
const (
	// ReasoningAuto separates the reasoning of a model whose template
	// thinks (the default).
	ReasoningAuto ReasoningFormat = iota
	// ReasoningNone leaves the reasoning in the text, as the model wrote it.
	ReasoningNone
	// ReasoningDeepSeek separates the reasoning (reasoning_content).
	ReasoningDeepSeek
)

// ParseReasoningFormat reads a --reasoning-format or reasoning_format
// value: none, auto or deepseek (deepseek-legacy is taken as deepseek).
func ParseReasoningFormat(s string) (ReasoningFormat, bool) {
	switch s {
	case "auto", "":
		return ReasoningAuto, true
	case "none":
		return ReasoningNone, true
	case "deepseek", "deepseek-legacy":
		return ReasoningDeepSeek, true
	}
	return 0, false
}

// ReasoningOptions are what a client asked of a thinking model. The
// template sees them as the variables thinking templates read
// (enable_thinking, thinking, reasoning_effort), unless Template.Kwargs
// sets those itself.
type ReasoningOptions struct {
	// Think turns thinking on or off; nil leaves the template's default.
	Think *bool
	// Effort is low, medium or high (gpt-oss's reasoning levels), or
	// "none" (thinking off); "" leaves the template's default.
	Effort string
	// Format overrides the server's reasoning format for this request;
	// nil keeps it.
	Format *ReasoningFormat
}

// Output is a constraint on the generated text: the grammar it must
// follow, made by one of the constructors (JSONObject, JSONSchema, GBNF,
// Regex, Choice).
type Output struct {
	g *grammar.Grammar
	// render are control tokens the output writes out (tool-call markers).
	render []string
}
