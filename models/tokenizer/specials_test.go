package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// specialsReference is llama.cpp's view of one vocabulary's special
// tokens (testdata/specials/README.md says how it was made).
type specialsReference struct {
	NTokens  int             `json:"n_tokens"`
	EOG      []ID            `json:"eog"`
	Rendered map[string]bool `json:"rendered"`
	Cases    []struct {
		Text    string `json:"text"`
		Plain   []ID   `json:"plain"`
		Special []ID   `json:"special"`
	} `json:"cases"`
}

// TestSpecialTokensMatchLlamaCpp checks, for every vocabulary of
// ../shared/vocab, the token-type rules against llama.cpp: which tokens end
// generation, which are written when decoding without special tokens, and
// how texts holding every special-looking token (control, user-defined,
// unknown and unused tokens, and ordinary tokens whose text looks like a
// tag) encode with special parsing off and on.
func TestSpecialTokensMatchLlamaCpp(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "specials", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no reference files: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var ref specialsReference
			if err := json.Unmarshal(b, &ref); err != nil {
				t.Fatal(err)
			}
			tok := openTokenizer(t, "vocab", name+".gguf")
			if n := len(tok.Vocab().Tokens); n != ref.NTokens {
				t.Fatalf("%d tokens, llama.cpp has %d", n, ref.NTokens)
			}
			var eog []ID
			for id := range ref.NTokens {
				if tok.IsEOG(ID(id)) {
					eog = append(eog, ID(id))
				}
			}
			if !slices.Equal(eog, ref.EOG) {
				t.Errorf("end-of-generation tokens %v, llama.cpp's %v", eog, ref.EOG)
			}
			for k, want := range ref.Rendered {
				id, _ := strconv.Atoi(k)
				if got := tok.pieceFor(ID(id), false) != ""; got != want {
					t.Errorf("token %d %q written without special rendering: %v, llama.cpp: %v", id, tok.Vocab().Tokens[id], got, want)
				}
			}
			for _, c := range ref.Cases {
				if got := tok.Encode(c.Text, EncodeOptions{}); !slices.Equal(got, c.Plain) {
					t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, got, c.Plain)
				}
				if got := tok.Encode(c.Text, EncodeOptions{ParseSpecial: true}); !slices.Equal(got, c.Special) {
					t.Errorf("Encode(%q, ParseSpecial)\n got %v\nwant %v", c.Text, got, c.Special)
				}
			}
		})
	}
}
