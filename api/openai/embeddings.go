package openai

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
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
// hidden states of the model.
func (a *API) embeddings(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	name, _, err := f.Str("model")
	if err != nil {
		return err
	}
	format, ok, err := f.Str("encoding_format")
	if err != nil {
		return err
	}
	if ok && format != "float" && format != "base64" {
		return session.Invalid("encoding_format", session.CodeInvalidValue, "encoding_format must be \"float\" or \"base64\", got %s", session.Quote(format))
	}
	dims, hasDims, err := f.Integer("dimensions")
	if err != nil {
		return err
	}
	if hasDims && dims < 1 {
		return session.Invalid("dimensions", session.CodeInvalidValue, "dimensions must be at least 1, got %d", dims)
	}
	m, err := a.Models.Lookup(name, "model")
	if err != nil {
		return err
	}
	inputs, err := ParseEmbeddingInput(f, "input", m.Tokenizer)
	if err != nil {
		return err
	}
	var keepAlive *time.Duration
	if v, ok := f.Raw("keep_alive"); ok {
		if keepAlive, err = session.ParseKeepAlive(v, "keep_alive"); err != nil {
			return err
		}
	}
	if err := f.Unknown("user"); err != nil {
		return err
	}
	vecs, err := a.Models.Embed(r.Context(), m, inputs, keepAlive, "input")
	if err != nil {
		return err
	}
	resp := embeddingList{Object: "list", Model: m.ID, Data: make([]embedding, len(inputs))}
	for i, vec := range vecs {
		if hasDims && int64(len(vec)) != dims {
			return session.Unsupported("dimensions", "this model's embeddings have %d dimensions; shortening them is not supported", len(vec))
		}
		resp.Data[i] = embedding{Object: "embedding", Index: i, Embedding: vec}
		if format == "base64" {
			resp.Data[i].Embedding = float32Base64(vec)
		}
		resp.Usage.PromptTokens += len(inputs[i])
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	if a.OnTokens != nil {
		a.OnTokens(r, resp.Usage.PromptTokens)
	}
	jsonhttp.WriteJSON(w, http.StatusOK, resp)
	return nil
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

// ParseEmbeddingInput reads the inputs to embed (the field param): a
// string, a list of strings, a list of token ids, or a list of such lists.
// Empty inputs are refused, as OpenAI does.
func ParseEmbeddingInput(f *jsonhttp.Fields, param string, t *tokenizer.Tokenizer) ([][]tokenizer.ID, error) {
	v, ok := f.Raw(param)
	if !ok {
		return nil, session.Invalid(param, session.CodeMissing, "%s is required", param)
	}
	vocab := len(t.Vocab().Tokens)
	encode := func(text, p string) ([]tokenizer.ID, error) {
		if text == "" {
			return nil, session.Invalid(p, session.CodeInvalidValue, "%s must not be empty", p)
		}
		return t.Encode(text, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true}), nil
	}
	ids := func(list []tokenizer.ID, p string) ([]tokenizer.ID, error) {
		if len(list) == 0 {
			return nil, session.Invalid(p, session.CodeInvalidValue, "%s must not be empty", p)
		}
		for _, id := range list {
			if id < 0 || int(id) >= vocab {
				return nil, session.Invalid(p, session.CodeInvalidValue, "token id %d is outside the vocabulary [0, %d)", id, vocab)
			}
		}
		return list, nil
	}
	var text string
	if json.Unmarshal(v, &text) == nil {
		in, err := encode(text, param)
		if err != nil {
			return nil, err
		}
		return [][]tokenizer.ID{in}, nil
	}
	items, ok := jsonhttp.ParseArray(v)
	if !ok {
		return nil, f.TypeError(param, "a string, an array of strings, or an array of token ids")
	}
	if len(items) == 0 {
		return nil, session.Invalid(param, session.CodeInvalidValue, "%s must not be an empty array", param)
	}
	if list, ok := tokenList(items); ok {
		in, err := ids(list, param)
		if err != nil {
			return nil, err
		}
		return [][]tokenizer.ID{in}, nil
	}
	if len(items) > maxEmbeddingInputs {
		return nil, session.Invalid(param, session.CodeInvalidValue, "%s holds %d items; at most %d are allowed", param, len(items), maxEmbeddingInputs)
	}
	out := make([][]tokenizer.ID, len(items))
	for i, it := range items {
		p := param + "[" + strconv.Itoa(i) + "]"
		var err error
		if json.Unmarshal(it, &text) == nil {
			out[i], err = encode(text, p)
		} else if arr, ok := jsonhttp.ParseArray(it); ok {
			list, ok := tokenList(arr)
			if !ok {
				return nil, session.Invalid(p, session.CodeInvalidType, "%s must be a string or an array of token ids", p)
			}
			out[i], err = ids(list, p)
		} else {
			return nil, session.Invalid(p, session.CodeInvalidType, "%s must be a string or an array of token ids", p)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
