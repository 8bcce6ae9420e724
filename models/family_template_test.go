package models

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// TestFamilyChatTemplates serves each new family's real chat template from
// its GGUF, as a downloaded model carries it: a tiny model of the family with
// the template as tokenizer.chat_template loads with it, renders every case
// Python's Jinja2 rendered (models/chat/testdata, ../shared/templates) byte
// for byte, and the render tokenizes its control tokens as the tokens of the
// family's vocab, the end of a turn being an end of generation.
func TestFamilyChatTemplates(t *testing.T) {
	chatData := filepath.Join("chat", "testdata", "templates")
	cases := []struct {
		shape, template string
		endOfTurn       string
	}{
		{"tiny-qwen3", filepath.Join(chatData, "Qwen-Qwen3-0.6B"), "<|im_end|>"},
		{"tiny-gemma3", filepath.Join(chatData, "google-gemma-3-270m-it"), "<end_of_turn>"},
		{"tiny-gemma2", "shared:google-gemma-2-2b-it", "<end_of_turn>"},
		{"tiny-phi3", "shared:microsoft-Phi-3.5-mini-instruct", "<|end|>"},
		{"tiny-phi3", filepath.Join(chatData, "microsoft-phi-4"), ""}, // Phi-4 is a phi3 too, with ChatML turns
	}
	f32, _ := ParseFileType("F32")
	for _, c := range cases {
		t.Run(c.shape+"/"+filepath.Base(c.template), func(t *testing.T) {
			base := c.template
			if name, ok := strings.CutPrefix(base, "shared:"); ok {
				base = shared.Path(t, "templates", name+".jinja")
				base = strings.TrimSuffix(base, ".jinja")
			}
			src, err := os.ReadFile(base + ".jinja")
			if err != nil {
				t.Fatal(err)
			}
			var renders []struct {
				// Raw JSON values keep the order of objects' keys,
				// which the chat package renders in (as the API's
				// request decoding does).
				Messages            []map[string]json.RawMessage `json:"messages"`
				Tools               []json.RawMessage            `json:"tools"`
				AddGenerationPrompt bool                         `json:"add_generation_prompt"`
				BOSToken            string                       `json:"bos_token"`
				EOSToken            string                       `json:"eos_token"`
				Extra               map[string]any               `json:"extra"`
				Expected            *string                      `json:"expected"`
			}
			raw, err := os.ReadFile(base + ".cases.json")
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &renders); err != nil {
				t.Fatal(err)
			}
			s, _ := ShapeByName(c.shape)
			s.ChatTemplate = string(src)
			path := filepath.Join(t.TempDir(), c.shape+".gguf")
			if err := Synthesize(path, s, f32, 1, 2); err != nil {
				t.Fatal(err)
			}
			m, err := Load(path, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.TemplateSource != "model" {
				t.Fatalf("template from %q, want the model's", m.TemplateSource)
			}
			rendered := 0
			for i, r := range renders {
				// The cases with template arguments of their own, or
				// other BOS/EOS texts than the vocab's, are the chat
				// package's to check.
				if r.Expected == nil || r.Extra != nil || r.BOSToken != "<s>" || r.EOSToken != "</s>" {
					continue
				}
				var msgs []map[string]any
				for _, rm := range r.Messages {
					msg := map[string]any{}
					for k, v := range rm {
						msg[k] = v
					}
					msgs = append(msgs, msg)
				}
				var tools []any
				for _, tl := range r.Tools {
					tools = append(tools, tl)
				}
				got, err := m.RenderChat(chat.Input{Messages: msgs, Tools: tools, AddGenerationPrompt: r.AddGenerationPrompt})
				if err != nil || got != *r.Expected {
					t.Fatalf("case %d: %v\n got %q\nwant %q", i, err, got, *r.Expected)
				}
				rendered++
				ids := m.Tokenizer.Encode(got, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
				for _, sp := range s.Specials {
					if n := strings.Count(got, sp); n > 0 && count(ids, m.Tokenizer, sp) != n {
						t.Fatalf("case %d: %q appears %d times in the render, %d times as its token", i, sp, n, count(ids, m.Tokenizer, sp))
					}
				}
			}
			if rendered == 0 {
				t.Fatal("no case rendered")
			}
			if c.endOfTurn != "" {
				id := tokenizer.ID(slices.Index(m.Tokenizer.Vocab().Tokens, c.endOfTurn))
				if id < 0 || !m.Tokenizer.IsEOG(id) {
					t.Errorf("%s is not an end of generation (id %d)", c.endOfTurn, id)
				}
			}
			t.Logf("%d renders", rendered)
		})
	}
}

// count is how many of ids are the token whose text is text.
func count(ids []tokenizer.ID, tok *tokenizer.Tokenizer, text string) int {
	n := 0
	for _, id := range ids {
		if tok.Vocab().Tokens[id] == text {
			n++
		}
	}
	return n
}
