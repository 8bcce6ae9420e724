package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestBuiltinTemplates(t *testing.T) {
	names := BuiltinNames()
	if len(names) < 7 {
		t.Fatalf("BuiltinNames() = %v, want at least 7", names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			src, ok := Builtin(name)
			if !ok {
				t.Fatalf("Builtin(%q) not found", name)
			}
			tpl, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join("testdata", "builtin", name+".cases.json"))
			if err != nil {
				t.Fatal(err)
			}
			var cases []renderCase
			if err := json.Unmarshal(raw, &cases); err != nil {
				t.Fatal(err)
			}
			if len(cases) == 0 {
				t.Fatal("no cases")
			}
			for i, c := range cases {
				got, err := tpl.Render(c.input())
				switch {
				case c.Error != nil:
					if err == nil {
						t.Errorf("case %d: want error %q, got %q", i, *c.Error, got)
					}
				case err != nil:
					t.Errorf("case %d: %v", i, err)
				case got != *c.Expected:
					t.Errorf("case %d:\n got: %q\nwant: %q", i, got, *c.Expected)
				}
			}
		})
	}
}

func TestBuiltinLookup(t *testing.T) {
	if src, ok := Builtin("chatml"); !ok || src != ChatML {
		t.Errorf("Builtin(chatml) differs from ChatML")
	}
	for _, alias := range []string{"Llama-3", "LLAMA3", "llama_3", "phi-3.", "Gemma"} {
		if _, ok := Builtin(alias); !ok {
			t.Errorf("Builtin(%q) not found", alias)
		}
	}
	for _, bad := range []string{"", "nope", "../template", "chatml.jinja"} {
		if _, ok := Builtin(bad); ok {
			t.Errorf("Builtin(%q) found", bad)
		}
	}
}

// TestBuiltinFormats pins the prompt text of the common formats, so a change
// to a built-in template cannot go unnoticed.
func TestBuiltinFormats(t *testing.T) {
	msgs := []Message{
		{"role": "system", "content": "S"},
		{"role": "user", "content": "U1"},
		{"role": "assistant", "content": "A1"},
		{"role": "user", "content": "U2"},
	}
	tests := []struct {
		name, want string
	}{
		{"chatml", "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n"},
		{"llama2", "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1 </s><s>[INST] U2 [/INST]"},
		{"llama3", "<s><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU1<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nA1<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU2<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"mistral", "<s>[INST] S\n\nU1 [/INST]A1</s>[INST] U2 [/INST]"},
		{"zephyr", "<|system|>\nS</s>\n<|user|>\nU1</s>\n<|assistant|>\nA1</s>\n<|user|>\nU2</s>\n<|assistant|>\n"},
		{"gemma", "<s><start_of_turn>user\nS\n\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n<start_of_turn>user\nU2<end_of_turn>\n<start_of_turn>model\n"},
		{"phi3", "<|system|>\nS<|end|>\n<|user|>\nU1<|end|>\n<|assistant|>\nA1<|end|>\n<|user|>\nU2<|end|>\n<|assistant|>\n"},
		{"phi4", "<|im_start|>system<|im_sep|>S<|im_end|><|im_start|>user<|im_sep|>U1<|im_end|><|im_start|>assistant<|im_sep|>A1<|im_end|><|im_start|>user<|im_sep|>U2<|im_end|><|im_start|>assistant<|im_sep|>"},
		{"vicuna", "S\n\nUSER: U1\nASSISTANT: A1</s>\nUSER: U2\nASSISTANT:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, ok := Builtin(tt.name)
			if !ok {
				t.Fatal("missing")
			}
			tpl, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tpl.Render(Input{Messages: msgs, AddGenerationPrompt: true, BOSToken: "<s>", EOSToken: "</s>"})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("\n got: %q\nwant: %q", got, tt.want)
			}
		})
	}
}
