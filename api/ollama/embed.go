package ollama

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// maxEmbedInputs bounds the inputs of one request.
const maxEmbedInputs = 2048

// embedRequest reads the members both embedding routes share, and holds
// the model (loading it when needed) for the request: the caller releases
// it.
type embedRequest struct {
	name      string
	model     *session.Model
	keepAlive *time.Duration
	release   func(*time.Duration)
	received  time.Time
	loaded    time.Time
}

func (a *API) embedModel(r *http.Request, f *jsonhttp.Fields) (*embedRequest, error) {
	e := &embedRequest{received: jsonhttp.Received(r)}
	var err error
	if e.name, _, err = f.Str("model"); err != nil {
		return nil, err
	}
	_, sname, err := a.resolve(e.name)
	if err != nil {
		return nil, err
	}
	if e.model, err = a.Models.Lookup(sname, "model"); err != nil {
		return nil, err
	}
	if v, ok := f.Raw("keep_alive"); ok {
		if e.keepAlive, err = session.ParseKeepAlive(v, "keep_alive"); err != nil {
			return nil, err
		}
	}
	// Options change nothing about an embedding here.
	if _, _, err := f.Object("options"); err != nil {
		return nil, err
	}
	if e.release, err = a.Models.Hold(r.Context(), e.model); err != nil {
		return nil, err
	}
	e.loaded = time.Now()
	return e, nil
}

// embed serves POST /api/embed: the embeddings of input (a string or a
// list of strings), each the model's mean-pooled, normalised final hidden
// states. An input longer than the context is cut to it unless truncate
// is false (400); dimensions keeps that many leading dimensions,
// normalised again, as ollama does.
func (a *API) embed(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	var texts []string
	if v, ok := f.Raw("input"); ok {
		var one string
		if json.Unmarshal(v, &one) == nil {
			if one != "" {
				texts = []string{one}
			}
		} else if err := json.Unmarshal(v, &texts); err != nil {
			return session.Invalid("input", session.CodeInvalidType, "invalid input type")
		}
	}
	if len(texts) > maxEmbedInputs {
		return session.Invalid("input", session.CodeInvalidValue, "input holds %d items; at most %d are allowed", len(texts), maxEmbedInputs)
	}
	truncate := true
	if v, ok, err := f.Bool("truncate"); err != nil {
		return err
	} else if ok {
		truncate = v
	}
	dims, _, err := f.Integer("dimensions")
	if err != nil {
		return err
	}
	if dims < 0 {
		return session.Invalid("dimensions", session.CodeInvalidValue, "dimensions must not be negative, got %d", dims)
	}
	e, err := a.embedModel(r, f)
	if err != nil {
		return err
	}
	defer e.release(e.keepAlive)
	resp := struct {
		Model           string      `json:"model"`
		Embeddings      [][]float32 `json:"embeddings"`
		TotalDuration   int64       `json:"total_duration,omitempty"`
		LoadDuration    int64       `json:"load_duration,omitempty"`
		PromptEvalCount int         `json:"prompt_eval_count,omitempty"`
	}{Model: e.name, Embeddings: [][]float32{}}
	if len(texts) > 0 {
		m := e.model
		maxLen := m.Engine.MaxLen()
		inputs := make([][]tokenizer.ID, len(texts))
		for i, text := range texts {
			ids := m.Tokenizer.Encode(text, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
			if len(ids) > maxLen {
				if !truncate {
					return session.Invalid("input", session.CodeContextLength, "the input length exceeds the context length")
				}
				ids = ids[:maxLen]
			}
			if len(ids) == 0 {
				return session.Invalid("input["+strconv.Itoa(i)+"]", session.CodeInvalidValue, "input %d has no tokens", i)
			}
			inputs[i] = ids
			resp.PromptEvalCount += len(ids)
		}
		vecs, err := a.Models.Embed(r.Context(), m, inputs, e.keepAlive, "input")
		if err != nil {
			return err
		}
		for i, v := range vecs {
			if dims > 0 && int(dims) < len(v) {
				vecs[i] = normalize(v[:dims])
			}
		}
		resp.Embeddings = vecs
		if a.OnTokens != nil {
			a.OnTokens(r, resp.PromptEvalCount)
		}
	}
	resp.TotalDuration = int64(time.Since(e.received))
	resp.LoadDuration = int64(e.loaded.Sub(e.received))
	jsonhttp.WriteJSON(w, http.StatusOK, resp)
	return nil
}

// normalize scales v to unit length.
func normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	n := float32(1 / max(math.Sqrt(sum), 1e-12))
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x * n
	}
	return out
}

// embeddings serves ollama's older POST /api/embeddings: the embedding of
// one prompt, {"embedding": [...]}; an empty prompt only loads the model.
func (a *API) embeddings(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	prompt, _, err := f.Str("prompt")
	if err != nil {
		return err
	}
	e, err := a.embedModel(r, f)
	if err != nil {
		return err
	}
	defer e.release(e.keepAlive)
	out := []float64{}
	if prompt != "" {
		ids := e.model.Tokenizer.Encode(prompt, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
		vecs, err := a.Models.Embed(r.Context(), e.model, [][]tokenizer.ID{ids}, e.keepAlive, "prompt")
		if err != nil {
			return err
		}
		for _, x := range vecs[0] {
			out = append(out, float64(x))
		}
		if a.OnTokens != nil {
			a.OnTokens(r, len(ids))
		}
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string][]float64{"embedding": out})
	return nil
}
