package native

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// activationFixture is testdata/llamacpp_activations.json: the first 16
// values of the last token's row at every named point of llama.cpp's graph,
// for a prompt and the first decode step (see ../../kernels/testdata).
type activationFixture struct {
	Model        string         `json:"model"`
	PromptTokens []tokenizer.ID `json:"prompt_tokens"`
	NextToken    int            `json:"next_token"`
	Points       []struct {
		Decode int    `json:"decode"`
		Name   string `json:"name"` // llama.cpp's tensor name, as "ffn_out-2"
		Op     string `json:"op"`
		Rows   int    `json:"rows"`
		Last   string `json:"last"`
	} `json:"points"`
}

// tapName is the observe point of a llama.cpp tensor: the name without its
// layer, the rotated query and key as Qrope and Krope.
func tapName(name, op string) (point string, layer int) {
	layer = -1
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := fmt.Sscan(name[i+1:], &layer); err == nil {
			name = name[:i]
		}
	}
	if op == "ROPE" {
		name = strings.TrimSuffix(name, "cur") + "rope"
	}
	return name, layer
}

// TestActivationsMatchLlamaCpp follows a prompt and one decode step through
// the blocks and checks every intermediate result against llama.cpp's bit
// for bit, so that a difference shows where it starts.
func TestActivationsMatchLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "llamacpp_activations.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx activationFixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	b := open(t, backends.Options{Threads: 2}, "models", "mini", fx.Model)
	type key struct {
		point string
		layer int
	}
	seen := map[key][]float32{}
	b.tap = func(point string, layer int, x []float32) {
		seen[key{point, layer}] = append([]float32(nil), x...)
	}
	seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, b.Model().VocabSize)
	checked := 0
	for decode, toks := range [][]tokenizer.ID{fx.PromptTokens, {tokenizer.ID(tokenizer.ID(fx.NextToken))}} {
		clear(seen)
		if err := b.Forward([]backends.Step{{Seq: seq, Tokens: toks, Logits: logits}}); err != nil {
			t.Fatal(err)
		}
		for _, p := range fx.Points {
			if p.Decode != decode {
				continue
			}
			k := key{}
			k.point, k.layer = tapName(p.Name, p.Op)
			got, ok := seen[k]
			if !ok {
				t.Fatalf("decode %d: nothing observed at %s (%s)", decode, p.Name, p.Op)
			}
			if len(got)%p.Rows != 0 {
				t.Fatalf("decode %d %s: %d values in %d rows", decode, p.Name, len(got), p.Rows)
			}
			last := got[len(got)-len(got)/p.Rows:]
			want, err := base64.StdEncoding.DecodeString(p.Last)
			if err != nil {
				t.Fatal(err)
			}
			for i := range len(want) / 4 {
				w := math.Float32frombits(binary.LittleEndian.Uint32(want[4*i:]))
				if math.Float32bits(last[i]) != math.Float32bits(w) {
					t.Fatalf("decode %d %s (%s) [%d] = %.9g, llama.cpp %.9g", decode, p.Name, p.Op, i, last[i], w)
				}
			}
			checked++
		}
	}
	if checked < 100 {
		t.Fatalf("only %d points checked", checked)
	}
}
