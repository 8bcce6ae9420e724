package api

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// maxEmbeddingInputs bounds the inputs of one embeddings request, as
// OpenAI does.
const maxEmbeddingInputs = 2048

type embedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

type embeddingList struct {
	Object string         `json:"object"`
	Data   []embedding    `json:"data"`
	Model  string         `json:"model"`
	Usage  embeddingUsage `json:"usage"`
}

// embeddings serves POST /v1/embeddings: the mean-pooled, normalised final
// hidden states of the loaded model.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) error {
	f, err := readObject(r)
	if err != nil {
		return err
	}
	name, _, err := f.str("model")
	if err != nil {
		return err
	}
	format, ok, err := f.str("encoding_format")
	if err != nil {
		return err
	}
	if ok && format != "float" && format != "base64" {
		return invalid("encoding_format", codeInvalidValue, "encoding_format must be \"float\" or \"base64\", got %s", quote(format))
	}
	dims, hasDims, err := f.integer("dimensions")
	if err != nil {
		return err
	}
	if hasDims && dims < 1 {
		return invalid("dimensions", codeInvalidValue, "dimensions must be at least 1, got %d", dims)
	}
	m, err := s.lookupModel(name)
	if err != nil {
		return err
	}
	inputs, err := parseEmbeddingInput(f, m.Tokenizer)
	if err != nil {
		return err
	}
	keepAlive, err := parseKeepAlive(f)
	if err != nil {
		return err
	}
	if err := f.unknown("user"); err != nil {
		return err
	}
	release, err := s.holdModel(r.Context(), m)
	if err != nil {
		return err
	}
	defer release(keepAlive)
	maxLen := m.Engine.MaxLen()
	resp := embeddingList{Object: "list", Model: m.ID, Data: make([]embedding, len(inputs))}
	for i, ids := range inputs {
		if len(ids) > maxLen {
			return invalid("input", codeContextLength, "input %d has %d tokens; this model's maximum context length is %d tokens", i, len(ids), maxLen)
		}
	}
	for i, ids := range inputs {
		vec, e := m.Engine.Embed(r.Context(), ids)
		if e != nil {
			return embedError(e)
		}
		if hasDims && int64(len(vec)) != dims {
			return unsupported("dimensions", "this model's embeddings have %d dimensions; shortening them is not supported", len(vec))
		}
		resp.Data[i] = embedding{Object: "embedding", Index: i, Embedding: vec}
		if format == "base64" {
			resp.Data[i].Embedding = float32Base64(vec)
		}
		resp.Usage.PromptTokens += len(ids)
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	info(r.Context()).promptTokens = resp.Usage.PromptTokens
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func embedError(err error) *apiError {
	switch {
	case errors.Is(err, backends.ErrQueueFull):
		return &apiError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: codeQueueFull, RetryAfter: 1,
			Message: "the server is busy: every slot is taken and the queue is full; retry shortly"}
	case errors.Is(err, backends.ErrContextLength):
		return invalid("input", codeContextLength, "%v", err)
	case errors.Is(err, backends.ErrInvalidRequest):
		return invalid("input", codeInvalidValue, "%v", err)
	case errors.Is(err, backends.ErrClosed):
		return shuttingDown()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errClientGone
	}
	return internalError("embedding failed: %v", err)
}

// float32Base64 is OpenAI's base64 encoding: the little-endian float32
// bytes of the vector.
func float32Base64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// parseEmbeddingInput reads input: a string, a list of strings, a list of
// token ids, or a list of such lists. Empty inputs are refused, as OpenAI
// does.
func parseEmbeddingInput(f *fields, t *tokenizer.Tokenizer) ([][]tokenizer.ID, *apiError) {
	v, ok := f.raw("input")
	if !ok {
		return nil, invalid("input", codeMissing, "input is required")
	}
	vocab := len(t.Vocab().Tokens)
	encode := func(text, param string) ([]tokenizer.ID, *apiError) {
		if text == "" {
			return nil, invalid(param, codeInvalidValue, "%s must not be empty", param)
		}
		return t.Encode(text, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true}), nil
	}
	ids := func(list []int64, param string) ([]tokenizer.ID, *apiError) {
		if len(list) == 0 {
			return nil, invalid(param, codeInvalidValue, "%s must not be empty", param)
		}
		out := make([]tokenizer.ID, len(list))
		for i, id := range list {
			if id < 0 || id >= int64(vocab) {
				return nil, invalid(param, codeInvalidValue, "token id %d is outside the vocabulary [0, %d)", id, vocab)
			}
			out[i] = tokenizer.ID(id)
		}
		return out, nil
	}
	var text string
	if json.Unmarshal(v, &text) == nil {
		in, err := encode(text, "input")
		if err != nil {
			return nil, err
		}
		return [][]tokenizer.ID{in}, nil
	}
	items, ok := parseArray(v)
	if !ok {
		return nil, f.typeError("input", "a string, an array of strings, or an array of token ids")
	}
	if len(items) == 0 {
		return nil, invalid("input", codeInvalidValue, "input must not be an empty array")
	}
	if list, ok := tokenList(items); ok {
		in, err := ids(list, "input")
		if err != nil {
			return nil, err
		}
		return [][]tokenizer.ID{in}, nil
	}
	if len(items) > maxEmbeddingInputs {
		return nil, invalid("input", codeInvalidValue, "input holds %d items; at most %d are allowed", len(items), maxEmbeddingInputs)
	}
	out := make([][]tokenizer.ID, len(items))
	for i, it := range items {
		param := "input[" + strconv.Itoa(i) + "]"
		var err *apiError
		if json.Unmarshal(it, &text) == nil {
			out[i], err = encode(text, param)
		} else if a, ok := parseArray(it); ok {
			list, ok := tokenList(a)
			if !ok {
				return nil, invalid(param, codeInvalidType, "%s must be a string or an array of token ids", param)
			}
			out[i], err = ids(list, param)
		} else {
			return nil, invalid(param, codeInvalidType, "%s must be a string or an array of token ids", param)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
