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

// tokenize serves llama-server's POST /tokenize: {"content", "add_special"
// (false), "parse_special" (true), "with_pieces" (false)} → {"tokens"}.
// content may also be a list mixing strings and token ids. "model" picks
// whose tokenizer (the default model's when absent; an adapter's is its
// model's).
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) error {
	f, err := readObject(r)
	if err != nil {
		return err
	}
	t, err := s.requestModel(f)
	if err != nil {
		return err
	}
	m := t.model
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

// tokenizeContent encodes content: a string, or a list of strings and ids
// (strings encoded without special tokens after the first, as llama-server
// does for mixed prompts).
func tokenizeContent(f *fields, t *tokenizer.Tokenizer, o tokenizer.EncodeOptions) ([]tokenizer.ID, *apiError) {
	v, ok := f.raw("content")
	if !ok {
		return nil, invalid("content", codeMissing, "content is required")
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

// detokenize serves llama-server's POST /detokenize: {"tokens"} →
// {"content"}, each token's piece with special tokens written out; "model"
// as for tokenize.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) error {
	f, err := readObject(r)
	if err != nil {
		return err
	}
	t, err := s.requestModel(f)
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
	writeJSON(w, http.StatusOK, map[string]string{"content": string(b)})
	return nil
}
