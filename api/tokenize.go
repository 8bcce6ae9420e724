package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/ruvllm/ruvllm/models/tokenizer"
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
	f, err := readObject(r)
	if err != nil {
		return err
	}
	t, err := s.requestModel(f, "")
	if err != nil {
		return err
	}
	m := t.model
	if !f.has("content") && (f.has("prompt") || f.has("messages")) {
		return s.tokenizeVLLM(w, f, m)
	}
	addSpecial, _, err := f.boolean("add_special")
	if err != nil {
		return err
	}
	parseSpecial, ok, err := f.boolean("parse_special")
	if err != nil {
		return err
	}
	if !ok {
		parseSpecial = true
	}
	withPieces, _, err := f.boolean("with_pieces")
	if err != nil {
		return err
	}
	ids, err := tokenizeContent(f, m.Tokenizer, tokenizer.EncodeOptions{AddSpecial: addSpecial, ParseSpecial: parseSpecial})
	if err != nil {
		return err
	}
	if err := f.unknown(); err != nil {
		return err
	}
	if !withPieces {
		writeJSON(w, http.StatusOK, map[string]any{"tokens": ids})
		return nil
	}
	out := make([]pieceToken, len(ids))
	for i, id := range ids {
		p := m.Tokenizer.Piece(id)
		out[i] = pieceToken{ID: id, Piece: p}
		if !utf8.ValidString(p) {
			out[i].Piece = byteList(p)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
	return nil
}

// tokenizeVLLM answers vLLM's shape of /tokenize: a prompt, or messages.
func (s *Server) tokenizeVLLM(w http.ResponseWriter, f *fields, m *Model) error {
	addSpecial, hasAddSpecial, err := f.boolean("add_special_tokens")
	if err != nil {
		return err
	}
	withStrs, _, err := f.boolean("return_token_strs")
	if err != nil {
		return err
	}
	var ids []tokenizer.ID
	if text, ok, err := f.str("prompt"); err != nil {
		return err
	} else if ok {
		if !hasAddSpecial {
			addSpecial = true
		}
		ids = m.Tokenizer.Encode(text, tokenizer.EncodeOptions{AddSpecial: addSpecial, ParseSpecial: true})
	} else {
		if m.Chat == nil {
			return unsupported("messages", "the model %s has no chat template; tokenize a prompt instead", quote(m.ID))
		}
		messages, err := parseMessages(f)
		if err != nil {
			return err
		}
		addGen, ok, err := f.boolean("add_generation_prompt")
		if err != nil {
			return err
		}
		if !ok {
			addGen = true
		}
		tools, err := parseToolList(f)
		if err != nil {
			return err
		}
		for _, name := range []string{"continue_final_message", "chat_template", "chat_template_kwargs", "mm_processor_kwargs"} {
			if v, ok := f.raw(name); ok && string(v) != "false" {
				return unsupported(name, "%s is not supported by this server's /tokenize", name)
			}
		}
		// The prompt a chat completion with these tools (and
		// tool_choice auto) would get.
		tr := &toolRequest{tools: tools, style: m.tools, choice: "auto"}
		if len(tools) == 0 {
			tr.choice = "none"
		}
		text, err := renderChat(m, tr.prepareMessages(messages, false), tr.templateTools(), addGen)
		if err != nil && tr.active() && !tr.style.knows {
			text, err = renderChat(m, tr.prepareMessages(messages, true), tr.templateTools(), addGen)
		}
		if err != nil {
			return err
		}
		if hasAddSpecial {
			ids = m.Tokenizer.Encode(text, tokenizer.EncodeOptions{AddSpecial: addSpecial, ParseSpecial: true})
		} else {
			ids = encodePrompt(m.Tokenizer, text)
		}
	}
	if err := f.unknown(); err != nil {
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
	writeJSON(w, http.StatusOK, out)
	return nil
}

// tokenizeContent encodes content: a string, or a list of strings and ids
// (strings encoded without special tokens after the first, as llama-server
// does for mixed prompts).
func tokenizeContent(f *fields, t *tokenizer.Tokenizer, o tokenizer.EncodeOptions) ([]tokenizer.ID, *apiError) {
	v, ok := f.raw("content")
	if !ok {
		return nil, invalid("content", codeMissing, "content (llama-server's field), prompt or messages (vLLM's) is required")
	}
	var text string
	if json.Unmarshal(v, &text) == nil {
		ids := t.Encode(text, o)
		if ids == nil {
			ids = []tokenizer.ID{}
		}
		return ids, nil
	}
	items, ok := parseArray(v)
	if !ok {
		return nil, f.typeError("content", "a string or an array of strings and token ids")
	}
	vocab := len(t.Vocab().Tokens)
	ids := []tokenizer.ID{}
	for i, it := range items {
		if json.Unmarshal(it, &text) == nil {
			ids = append(ids, t.Encode(text, o)...)
			o.AddSpecial = false
			continue
		}
		id, ok := parseInteger(it)
		if !ok || id < 0 || id >= int64(vocab) {
			p := "content[" + strconv.Itoa(i) + "]"
			return nil, invalid(p, codeInvalidValue, "%s must be a string or a token id in [0, %d)", p, vocab)
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
	f, err := readObject(r)
	if err != nil {
		return err
	}
	t, err := s.requestModel(f, "")
	if err != nil {
		return err
	}
	m := t.model
	items, ok, err := f.array("tokens")
	if err != nil {
		return err
	}
	if err := f.unknown(); err != nil {
		return err
	}
	if len(items) > maxDetokenize {
		return invalid("tokens", codeInvalidValue, "tokens holds %d ids; at most %d are allowed", len(items), maxDetokenize)
	}
	vocab := len(m.Tokenizer.Vocab().Tokens)
	var b []byte
	if ok {
		for i, it := range items {
			id, ok := parseInteger(it)
			if !ok || id < 0 || id >= int64(vocab) {
				p := "tokens[" + strconv.Itoa(i) + "]"
				return invalid(p, codeInvalidValue, "%s must be a token id in [0, %d)", p, vocab)
			}
			b = append(b, m.Tokenizer.Piece(tokenizer.ID(id))...)
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"content": string(b), "prompt": string(b)})
	return nil
}
