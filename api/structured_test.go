package api

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/ruvllm/ruvllm/internal/schematest"
)

// structuredSchemas are the response formats the structured-output tests
// send: each feature a client's schema commonly uses.
var structuredSchemas = []struct{ name, schema string }{
	{"person", `{"type":"object","properties":{"name":{"type":"string","maxLength":24},"age":{"type":"integer","minimum":0,"maximum":120},
		"email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"type":"string","maxLength":10},"maxItems":3}},
		"required":["name","age","tags"],"additionalProperties":false}`},
	{"choices", `{"type":"object","properties":{"mood":{"enum":["happy","sad","ok"]},"level":{"anyOf":[{"type":"number","exclusiveMinimum":0,"maximum":1},{"type":"null"}]},
		"ok":{"type":"boolean"},"kind":{"const":"report"}},"required":["mood","level","ok","kind"],"additionalProperties":false}`},
	{"tree", `{"$defs":{"node":{"type":"object","properties":{"label":{"type":"string","pattern":"^[a-z]{1,8}$"},
		"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["label","children"],"additionalProperties":false}},
		"$ref":"#/$defs/node"}`},
	{"dates", `{"type":"array","items":{"type":"object","properties":{"day":{"type":"string","format":"date"},"id":{"type":"string","format":"uuid"},
		"score":{"type":"number","minimum":-2.5,"maximum":7.25}},"required":["day","id","score"],"additionalProperties":false},"minItems":1,"maxItems":3}`},
	{"map", `{"type":"object","additionalProperties":{"type":"integer"}}`},
}

// structuredModels are the models the structured outputs are checked on:
// the trained stories260K, the mini models (SPM and BPE vocabularies,
// llama and qwen2), the full Llama-2 vocabulary, and the synthesized tiny
// model when ../shared is absent.
var structuredModels = [][]string{
	{"models", "stories260K.gguf"},
	{"models", "mini", "mini-llama-Q4_K_M.gguf"},
	{"models", "mini", "mini-llama-Q8_0.gguf"},
	{"models", "mini", "mini-qwen2-Q8_0.gguf"},
	{"models", "mini", "mini-qwen2-bpe-Q8_0.gguf"},
	{"models", "llama-2-tiny-random.gguf"},
	nil, // the synthesized tiny model, which needs nothing beside the repository
}

// TestStructuredOutputs asks every model for every schema through the
// OpenAI SDK, streaming and not, greedy and sampled: each output must be
// valid under a JSON-schema validator, whole even when max_tokens is
// short, and a stream must write what the same request (same seed) gives
// at once.
func TestStructuredOutputs(t *testing.T) {
	for _, path := range structuredModels {
		name := "tiny"
		if path != nil {
			name = path[len(path)-1]
		}
		t.Run(name, func(t *testing.T) {
			rs := startRealServer(t, realOptions{shared: path, parallel: 4})
			ctx := context.Background()
			for i, sc := range structuredSchemas {
				if rs.id == "llama-2-tiny-random" && i > 1 {
					break // its 32000 logits take long on its width of 8; two schemas will do
				}
				val := schematest.Compile(t, sc.schema)
				var schema map[string]any
				if err := json.Unmarshal([]byte(sc.schema), &schema); err != nil {
					t.Fatal(err)
				}
				for _, temp := range []float64{0, 1} {
					params := openai.ChatCompletionNewParams{
						Model:       rs.id,
						Messages:    userMessage("Reply in JSON."),
						Temperature: openai.Float(temp),
						Seed:        openai.Int(42),
						ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
							JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: sc.name, Schema: schema, Strict: openai.Bool(true)}}},
					}
					r, err := rs.client.Chat.Completions.New(ctx, params)
					if err != nil {
						t.Fatalf("%s: %v", sc.name, err)
					}
					out := r.Choices[0].Message.Content
					schematest.Check(t, val, out)
					if r.Choices[0].FinishReason != "stop" {
						t.Errorf("%s: finish %q", sc.name, r.Choices[0].FinishReason)
					}
					stream := rs.client.Chat.Completions.NewStreaming(ctx, params)
					var acc openai.ChatCompletionAccumulator
					for stream.Next() {
						acc.AddChunk(stream.Current())
					}
					if err := stream.Err(); err != nil {
						t.Fatalf("%s stream: %v", sc.name, err)
					}
					got := acc.Choices[0].Message.Content
					schematest.Check(t, val, got)
					// Only stories260K's logits are the same whether the
					// prompt was prefilled or found cached; a random model's
					// near ties can go either way.
					if rs.id == "stories260K" && got != out {
						t.Errorf("%s temperature %v: streamed %q, at once %q", sc.name, temp, got, out)
					}
				}
				// A short budget still ends whole.
				short := openai.ChatCompletionNewParams{
					Model: rs.id, Messages: userMessage("JSON please"), Temperature: openai.Float(1), MaxTokens: openai.Int(80),
					ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
						JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: sc.name, Schema: schema}}},
				}
				r, err := rs.client.Chat.Completions.New(ctx, short)
				if err != nil {
					t.Fatal(err)
				}
				schematest.Check(t, val, r.Choices[0].Message.Content)
			}
			// json_object gives an object.
			for _, temp := range []float64{0, 1.5} {
				r, err := rs.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
					Model: rs.id, Messages: userMessage("An object, please."), Temperature: openai.Float(temp),
					ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}},
				})
				if err != nil {
					t.Fatal(err)
				}
				var obj map[string]any
				if out := r.Choices[0].Message.Content; json.Unmarshal([]byte(out), &obj) != nil || obj == nil {
					t.Errorf("json_object gave %q", out)
				}
			}
		})
	}
}
