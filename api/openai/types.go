package openai

import (
	"encoding/json"
	"math"

	"github.com/ruvllm/ruvllm/session"
)

// The OpenAI response shapes, exported for the clients that decode them
// (tests among them). Fields OpenAI sends as null are pointers or `any` so
// that they encode as null rather than vanish.

// Usage counts a response's tokens, as OpenAI reports them.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
	// Speculative counts speculative decoding's drafted tokens and those
	// of them generated; absent when nothing was drafted.
	Speculative *SpeculativeUsage `json:"speculative,omitempty"`
}

// SpeculativeUsage is this server's usage.speculative: the tokens
// speculative decoding drafted for a response and those accepted (which
// are part of completion_tokens).
type SpeculativeUsage struct {
	DraftedTokens  int `json:"drafted_tokens"`
	AcceptedTokens int `json:"accepted_tokens"`
}

// PromptTokensDetails says how many prompt tokens the prefix cache held.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// ChatMessage is the assistant's message of a chat completion's choice.
type ChatMessage struct {
	Role string `json:"role"`
	// Content is null when the message only calls tools.
	Content *string `json:"content"`
	// ReasoningContent is a thinking model's reasoning, as llama-server,
	// vLLM and DeepSeek's API return it; absent when there is none.
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	Refusal          *string    `json:"refusal"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// ChatDelta is what a streamed chunk adds to a choice's message.
type ChatDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCallDelta `json:"tool_calls,omitempty"`
	// NullContent writes "content": null when Content is nil (the first
	// chunk's delta, as llama-server sends it).
	NullContent bool `json:"-"`
}

// MarshalJSON writes the delta, with "content": null when NullContent.
func (d ChatDelta) MarshalJSON() ([]byte, error) {
	type plain ChatDelta
	if !d.NullContent || d.Content != nil {
		return json.Marshal(plain(d))
	}
	return json.Marshal(struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content"`
		plain
	}{Role: d.Role, plain: plain(d)})
}

// ChatLogprobs are a chat choice's tokens with their log-probabilities.
type ChatLogprobs struct {
	Content []ChatTokenLogprob `json:"content"`
	Refusal *string            `json:"refusal"`
}

// ChatTokenLogprob is one generated token and its most likely alternatives.
type ChatTokenLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []ChatTopLogprob `json:"top_logprobs"`
}

// ChatTopLogprob is one of the most likely tokens at a step.
type ChatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// ChatChoice is one choice of a chat completion.
type ChatChoice struct {
	Index        int           `json:"index"`
	Message      ChatMessage   `json:"message"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

// ChatCompletion is the response of /v1/chat/completions sent whole.
type ChatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []ChatChoice `json:"choices"`
	Usage             Usage        `json:"usage"`
	// Timings are llama-server's measure of the prompt processing and
	// the generation, which its clients read beside the usage.
	Timings *session.TimingsJSON `json:"timings,omitempty"`
	// Verbose is llama-server's __verbose object, under API.Verbose.
	Verbose *Verbose `json:"__verbose,omitempty"`
}

// Verbose is what llama-server's --verbose adds to a whole response: the
// fields of its native /completion answer that say what the model read
// and did.
type Verbose struct {
	Prompt          string `json:"prompt"`
	Content         string `json:"content"`
	Model           string `json:"model"`
	TokensEvaluated int    `json:"tokens_evaluated"`
	TokensPredicted int    `json:"tokens_predicted"`
	Stop            bool   `json:"stop"`
	StoppingWord    string `json:"stopping_word"`
}

// ChatChunkChoice is a choice of a streamed chat completion chunk.
type ChatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        ChatDelta     `json:"delta"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

// ToolCall is a call in a response message.
type ToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function ToolCallFunction `json:"function"`
}

// ToolCallFunction is the function a call calls and its JSON arguments.
type ToolCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolCallDelta is a piece of a call in a stream: the first carries the
// id, type and name, the rest fragments of the arguments.
type ToolCallDelta struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function ToolFunctionDelta `json:"function"`
}

// ToolFunctionDelta is a streamed piece of a call's function.
type ToolFunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// TextLogprobs is the legacy completions logprobs object.
type TextLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"` // null for a prompt's first token
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`   // a nil map is null
	TextOffset    []int                `json:"text_offset"`
}

// TextChoice is one choice of a text completion, whole or streamed.
type TextChoice struct {
	Text         string        `json:"text"`
	Index        int           `json:"index"`
	Logprobs     *TextLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

// TextCompletion is the response of /v1/completions sent whole.
type TextCompletion struct {
	ID                string               `json:"id"`
	Object            string               `json:"object"`
	Created           int64                `json:"created"`
	Model             string               `json:"model"`
	SystemFingerprint string               `json:"system_fingerprint"`
	Choices           []TextChoice         `json:"choices"`
	Usage             any                  `json:"usage,omitempty"`
	Timings           *session.TimingsJSON `json:"timings,omitempty"`
	// Verbose is llama-server's __verbose object, under API.Verbose.
	Verbose *Verbose `json:"__verbose,omitempty"`
}

// streamChunk is one event of a stream: the head every chunk of a request
// repeats, and its choices.
type streamChunk[C any] struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint"`
	Choices           []C    `json:"choices"`
	// Usage is null on every chunk but the last when the client asked for
	// usage, and absent otherwise.
	Usage any `json:"usage,omitempty"`
	// Timings are on the last chunk (the usage chunk, or the last choice's
	// finish), and on every content chunk with timings_per_token, as
	// llama-server sends them.
	Timings *session.TimingsJSON `json:"timings,omitempty"`
	// PromptProgress is on the chunks of llama-server's return_progress.
	PromptProgress *PromptProgress `json:"prompt_progress,omitempty"`
}

// PromptProgress is llama-server's prompt_progress object.
type PromptProgress struct {
	Total     int   `json:"total"`
	Cache     int   `json:"cache"`
	Processed int   `json:"processed"`
	TimeMS    int64 `json:"time_ms"`
}

// ProgressOf is p as llama-server's prompt_progress.
func ProgressOf(p session.Progress) *PromptProgress {
	return &PromptProgress{Total: p.Total, Cache: p.Cache, Processed: p.Processed, TimeMS: p.Elapsed.Milliseconds()}
}

// minLogprob stands in for -Inf, which JSON cannot carry; OpenAI reports
// impossible tokens the same way.
const minLogprob = -9999.0

// JSONLogprob is a log-probability as JSON can carry it: -Inf (and NaN)
// become -9999, as OpenAI reports impossible tokens.
func JSONLogprob(lp float32) float64 {
	v := float64(lp)
	if math.IsNaN(v) || v < minLogprob {
		return minLogprob
	}
	return v
}

// byteList is s as the list of byte values OpenAI's "bytes" fields hold.
func byteList(s string) []int {
	b := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		b[i] = int(s[i])
	}
	return b
}
