package chat_test

import (
	"encoding/json"
	"fmt"

	"github.com/ruvllm/ruvllm/models/chat"
)

func Example() {
	src, _ := chat.Builtin("chatml")
	tpl, err := chat.Parse(src)
	if err != nil {
		panic(err)
	}
	prompt, err := tpl.Render(chat.Input{
		Messages: []chat.Message{
			{"role": "system", "content": "Be brief."},
			{"role": "user", "content": "Hi!"},
		},
		AddGenerationPrompt: true,
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", prompt)
	// Output: "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
}

// Tool definitions passed as raw JSON keep their key order, as Python's
// json.loads keeps it, so |tojson reproduces them exactly.
func ExampleTemplate_Render_tools() {
	tpl, err := chat.Parse(`{% for t in tools %}{{ t | tojson }}{% endfor %}`)
	if err != nil {
		panic(err)
	}
	out, err := tpl.Render(chat.Input{Tools: []any{
		json.RawMessage(`{"type": "function", "function": {"name": "now", "parameters": {}}}`),
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println(out)
	// Output: {"type": "function", "function": {"name": "now", "parameters": {}}}
}
