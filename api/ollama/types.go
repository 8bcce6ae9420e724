package ollama

import (
	"encoding/json"
	"time"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// The response shapes of ollama's api/types.go, as its clients decode them.

// message is a chat message of a response.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Thinking is a thinking model's reasoning; absent when there is none.
	Thinking  string     `json:"thinking,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

// toolCall is a call of a response: its arguments are an object, not
// OpenAI's JSON text.
type toolCall struct {
	ID       string       `json:"id,omitempty"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	// Index is the call's position among the response's calls.
	Index     int             `json:"index"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// metrics are the final chunk's counts and durations, in nanoseconds.
type metrics struct {
	TotalDuration      int64 `json:"total_duration"`
	LoadDuration       int64 `json:"load_duration"`
	PromptEvalCount    int   `json:"prompt_eval_count"`
	PromptEvalDuration int64 `json:"prompt_eval_duration"`
	EvalCount          int   `json:"eval_count"`
	EvalDuration       int64 `json:"eval_duration"`
}

// chatChunk is a /api/chat response or stream chunk; the final one has
// done, done_reason and the metrics.
type chatChunk struct {
	Model      string    `json:"model"`
	CreatedAt  time.Time `json:"created_at"`
	Message    message   `json:"message"`
	Done       bool      `json:"done"`
	DoneReason string    `json:"done_reason,omitempty"`
	Logprobs   []logprob `json:"logprobs,omitempty"`
	*metrics
}

// generateChunk is a /api/generate response or stream chunk; the final one
// carries the context (the conversation's token ids) too.
type generateChunk struct {
	Model      string         `json:"model"`
	CreatedAt  time.Time      `json:"created_at"`
	Response   string         `json:"response"`
	Thinking   string         `json:"thinking,omitempty"`
	Done       bool           `json:"done"`
	DoneReason string         `json:"done_reason,omitempty"`
	Context    []tokenizer.ID `json:"context,omitempty"`
	ToolCalls  []toolCall     `json:"tool_calls,omitempty"`
	Logprobs   []logprob      `json:"logprobs,omitempty"`
	*metrics
}

// logprob is a generated token's log-probability, with the most likely
// alternatives when asked for.
type logprob struct {
	tokenLogprob
	TopLogprobs []tokenLogprob `json:"top_logprobs,omitempty"`
}

type tokenLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes,omitempty"`
}

// details are a model's details in listings.
type details struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

// listModel is a model of /api/tags.
type listModel struct {
	Name       string    `json:"name"`
	Model      string    `json:"model"`
	ModifiedAt time.Time `json:"modified_at"`
	Size       int64     `json:"size"`
	Digest     string    `json:"digest"`
	Details    details   `json:"details"`
}

// runningModel is a model of /api/ps.
type runningModel struct {
	Name          string    `json:"name"`
	Model         string    `json:"model"`
	Size          int64     `json:"size"`
	Digest        string    `json:"digest"`
	Details       details   `json:"details"`
	ExpiresAt     time.Time `json:"expires_at"`
	SizeVRAM      int64     `json:"size_vram"`
	ContextLength int       `json:"context_length"`
}

// tensor is a tensor of /api/show.
type tensor struct {
	Name  string   `json:"name"`
	Type  string   `json:"type"`
	Shape []uint64 `json:"shape"`
}

// showResponse is /api/show's answer.
type showResponse struct {
	License      string         `json:"license,omitempty"`
	Modelfile    string         `json:"modelfile"`
	Parameters   string         `json:"parameters"`
	Template     string         `json:"template"`
	Details      details        `json:"details"`
	ModelInfo    map[string]any `json:"model_info"`
	Tensors      []tensor       `json:"tensors,omitempty"`
	Capabilities []string       `json:"capabilities"`
	ModifiedAt   time.Time      `json:"modified_at"`
}
