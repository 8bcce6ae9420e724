package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/api/openai"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// maxDetokenize bounds the ids of one /detokenize request.
const maxDetokenize = 1 << 20

type pieceToken struct {
	ID    tokenizer.ID `json:"id"`
	Piece any          `json:"piece"` // a string, or the byte values when not valid UTF-8
}

// vllmTokenized is vLLM's tokenize response.
type vllmTokenized struct {
	Count       int            `json:"count"`
	MaxModelLen int            `json:"max_model_len"`
	Tokens      []tokenizer.ID `json:"tokens"`
	// TokenStrs are the vocabulary's token texts (HF's
	// convert_ids_to_tokens), when return_token_strs asks for them.
	TokenStrs []string `json:"token_strs"`
}

// tokenize serves POST /tokenize in the two shapes clients send. "model"
// picks whose tokenizer (the default model's when absent; an adapter's is
// its model's).
//
// llama-server's: {"content", "add_special" (false), "parse_special"
// (true), "with_pieces" (false)} → {"tokens"}; content may also be a list
// mixing strings and token ids.
//
// vLLM's: {"prompt", "add_special_tokens" (true)} or {"messages",
// "add_generation_prompt" (true), "add_special_tokens", "tools"}, both with
// "return_token_strs" (false) → {"count", "max_model_len", "tokens",
// "token_strs"}. Messages are rendered with the model's chat template and,
// unless add_special_tokens says otherwise, encoded exactly as a chat
// completion would feed them to the model, so the count is what the
// request would cost.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	name, _, err := f.Str("model")
	if err != nil {
		return err
	}
	t, err := s.models.Resolve(name, "model")
	if err != nil {
		return err
	}
	m := t.Model
	if !f.Has("content") && (f.Has("prompt") || f.Has("messages")) {
		return s.tokenizeVLLM(w, f, m)
	}
	addSpecial, _, err := f.Bool("add_special")
	if err != nil {
		return err
	}
	parseSpecial, ok, err := f.Bool("parse_special")
	if err != nil {
		return err
	}
	if !ok {
		parseSpecial = true
	}
	withPieces, _, err := f.Bool("with_pieces")
	if err != nil {
		return err
	}
	ids, err := tokenizeContent(f, m.Tokenizer, tokenizer.EncodeOptions{AddSpecial: addSpecial, ParseSpecial: parseSpecial})
	if err != nil {
		return err
	}
	if err := f.Unknown(); err != nil {
		return err
	}
	if !withPieces {
		jsonhttp.WriteJSON(w, http.StatusOK, map[string]any{"tokens": ids})
		return nil
	}
	out := make([]pieceToken, len(ids))
	for i, id := range ids {
		p := m.Tokenizer.Piece(id)
		out[i] = pieceToken{ID: id, Piece: p}
		if !utf8.ValidString(p) {
			out[i].Piece = byteValues(p)
		}
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]any{"tokens": out})
	return nil
}

// tokenizeVLLM answers vLLM's shape of /tokenize: a prompt, or messages.
func (s *Server) tokenizeVLLM(w http.ResponseWriter, f *jsonhttp.Fields, m *session.Model) error {
	addSpecial, hasAddSpecial, err := f.Bool("add_special_tokens")
	if err != nil {
		return err
	}
	withStrs, _, err := f.Bool("return_token_strs")
	if err != nil {
		return err
	}
	var ids []tokenizer.ID
	if text, ok, err := f.Str("prompt"); err != nil {
		return err
	} else if ok {
		if !hasAddSpecial {
			addSpecial = true
		}
		ids = m.Tokenizer.Encode(text, tokenizer.EncodeOptions{AddSpecial: addSpecial, ParseSpecial: true})
	} else {
		if m.Chat == nil {
			return session.Unsupported("messages", "the model %s has no chat template; tokenize a prompt instead", session.Quote(m.ID))
		}
		messages, err := openai.ParseMessages(f, "messages")
		if err != nil {
			return err
		}
		addGen, ok, err := f.Bool("add_generation_prompt")
		if err != nil {
			return err
		}
		if !ok {
			addGen = true
		}
		tools, err := openai.ParseTools(f)
		if err != nil {
			return err
		}
		for _, name := range []string{"continue_final_message", "chat_template", "chat_template_kwargs", "mm_processor_kwargs"} {
			if v, ok := f.Raw(name); ok && string(v) != "false" {
				return session.Unsupported(name, "%s is not supported by this server's /tokenize", name)
			}
		}
		// The prompt a chat completion with these tools (and
		// tool_choice auto) would get.
		req := &session.Request{Model: m.ID, Messages: messages, Tools: tools}
		req.Template.NoGenerationPrompt = !addGen
		rendered, err := s.models.Render(req)
		if err != nil {
			return err
		}
		ids = rendered.Tokens
		if hasAddSpecial {
			ids = m.Tokenizer.Encode(rendered.Text, tokenizer.EncodeOptions{AddSpecial: addSpecial, ParseSpecial: true})
		}
	}
	if err := f.Unknown(); err != nil {
		return err
	}
	if ids == nil {
		ids = []tokenizer.ID{}
	}
	out := vllmTokenized{Count: len(ids), MaxModelLen: m.Engine.MaxLen(), Tokens: ids}
	if withStrs {
		toks := m.Tokenizer.Vocab().Tokens
		out.TokenStrs = make([]string, len(ids))
		for i, id := range ids {
			out.TokenStrs[i] = toks[id]
		}
	}
	jsonhttp.WriteJSON(w, http.StatusOK, out)
	return nil
}

// tokenizeContent encodes content: a string, or a list of strings and ids
// (strings encoded without special tokens after the first, as llama-server
// does for mixed prompts).
func tokenizeContent(f *jsonhttp.Fields, t *tokenizer.Tokenizer, o tokenizer.EncodeOptions) ([]tokenizer.ID, error) {
	v, ok := f.Raw("content")
	if !ok {
		return nil, session.Invalid("content", session.CodeMissing, "content (llama-server's field), prompt or messages (vLLM's) is required")
	}
	var text string
	if json.Unmarshal(v, &text) == nil {
		ids := t.Encode(text, o)
		if ids == nil {
			ids = []tokenizer.ID{}
		}
		return ids, nil
	}
	items, ok := jsonhttp.ParseArray(v)
	if !ok {
		return nil, f.TypeError("content", "a string or an array of strings and token ids")
	}
	vocab := len(t.Vocab().Tokens)
	ids := []tokenizer.ID{}
	for i, it := range items {
		if json.Unmarshal(it, &text) == nil {
			ids = append(ids, t.Encode(text, o)...)
			o.AddSpecial = false
			continue
		}
		id, ok := jsonhttp.ParseInteger(it)
		if !ok || id < 0 || id >= int64(vocab) {
			p := "content[" + strconv.Itoa(i) + "]"
			return nil, session.Invalid(p, session.CodeInvalidValue, "%s must be a string or a token id in [0, %d)", p, vocab)
		}
		ids = append(ids, tokenizer.ID(id))
		o.AddSpecial = false
	}
	return ids, nil
}

// detokenize serves POST /detokenize: {"tokens"} → the text of the tokens,
// each token's piece with special tokens written out, as "content"
// (llama-server's name) and as "prompt" (vLLM's); "model" as for tokenize.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	name, _, err := f.Str("model")
	if err != nil {
		return err
	}
	t, err := s.models.Resolve(name, "model")
	if err != nil {
		return err
	}
	m := t.Model
	items, ok, err := f.Array("tokens")
	if err != nil {
		return err
	}
	if err := f.Unknown(); err != nil {
		return err
	}
	if len(items) > maxDetokenize {
		return session.Invalid("tokens", session.CodeInvalidValue, "tokens holds %d ids; at most %d are allowed", len(items), maxDetokenize)
	}
	vocab := len(m.Tokenizer.Vocab().Tokens)
	var b []byte
	if ok {
		for i, it := range items {
			id, ok := jsonhttp.ParseInteger(it)
			if !ok || id < 0 || id >= int64(vocab) {
				p := "tokens[" + strconv.Itoa(i) + "]"
				return session.Invalid(p, session.CodeInvalidValue, "%s must be a token id in [0, %d)", p, vocab)
			}
			b = append(b, m.Tokenizer.Piece(tokenizer.ID(id))...)
		}
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]string{"content": string(b), "prompt": string(b)})
	return nil
}

// byteValues is s as a list of byte values, which llama-server gives for a
// piece that is not valid UTF-8 on its own.
func byteValues(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}
