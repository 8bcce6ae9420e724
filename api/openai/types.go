package openai

import (
	"encoding/json"
	"math"

	"github.com/ruvllm/ruvllm/session"
)

// The OpenAI response shapes. Fields OpenAI sends as null are pointers or
// `any` so that they encode as null rather than vanish.

type usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *promptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is null when the message only calls tools.
	Content *string `json:"content"`
	// ReasoningContent is a thinking model's reasoning, as llama-server,
	// vLLM and DeepSeek's API return it; absent when there is none.
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	Refusal          *string    `json:"refusal"`
	ToolCalls        []toolCall `json:"tool_calls,omitempty"`
}

type chatDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallDelta `json:"tool_calls,omitempty"`
	// NullContent writes "content": null when Content is nil (the first
	// chunk's delta, as llama-server sends it).
	NullContent bool `json:"-"`
}

// MarshalJSON writes the delta, with "content": null when NullContent.
func (d chatDelta) MarshalJSON() ([]byte, error) {
	type plain chatDelta
	if !d.NullContent || d.Content != nil {
		return json.Marshal(plain(d))
	}
	return json.Marshal(struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content"`
		plain
	}{Role: d.Role, plain: plain(d)})
}

type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
	Refusal *string            `json:"refusal"`
}

type chatTokenLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      chatMessage   `json:"message"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             usage        `json:"usage"`
	// Timings are llama-server's measure of the prompt processing and
	// the generation, which its clients read beside the usage.
	Timings *session.TimingsJSON `json:"timings,omitempty"`
}

type chatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        chatDelta     `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

// toolCall is a call in a response message.
type toolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function toolCallFunction `json:"function"`
}

type toolCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// toolCallDelta is a piece of a call in a stream: the first carries the
// id, type and name, the rest fragments of the arguments.
type toolCallDelta struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function toolFunctionDelta `json:"function"`
}

type toolFunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// textLogprobs is the legacy completions logprobs object.
type textLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"` // null for a prompt's first token
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`   // a nil map is null
	TextOffset    []int                `json:"text_offset"`
}

type textChoice struct {
	Text         string        `json:"text"`
	Index        int           `json:"index"`
	Logprobs     *textLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type textCompletion struct {
	ID                string               `json:"id"`
	Object            string               `json:"object"`
	Created           int64                `json:"created"`
	Model             string               `json:"model"`
	SystemFingerprint string               `json:"system_fingerprint"`
	Choices           []textChoice         `json:"choices"`
	Usage             any                  `json:"usage,omitempty"`
	Timings           *session.TimingsJSON `json:"timings,omitempty"`
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
