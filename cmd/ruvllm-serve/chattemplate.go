package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ruvllm/ruvllm/internal/serving"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/chat"
)

func init() {
	register("chat-template", "render a chat template for a list of messages", runChatTemplate)
}

func runChatTemplate(e *env, args []string) error {
	fs := newFlags("chat-template", "--model PATH | --template FILE --messages FILE.json [--tools FILE.json] [--kwargs FILE.json] [--add-generation-prompt] [--bos-token S] [--eos-token S] [--date YYYY-MM-DD]")
	model := fs.String("model", "", "GGUF file whose template (and BOS/EOS texts) are used")
	tmpl := fs.String("template", "", "built-in name (chatml, llama3, mistral-v7, ...), template file (.jinja) or the Jinja text itself; overrides the model's")
	msgFile := fs.String("messages", "", "JSON file with the list of messages")
	toolFile := fs.String("tools", "", "JSON file with the list of tools")
	kwargsFile := fs.String("kwargs", "", `JSON file with an object of extra template variables, as a client sends chat_template_kwargs (e.g. {"enable_thinking": false})`)
	addGen := fs.Bool("add-generation-prompt", false, "end with the assistant turn's opening")
	date := fs.String("date", "", "the day strftime_now tells the template (default: today), for a render that does not change with the date")
	var bos, eos optString
	fs.Var(&bos, "bos-token", "bos_token text (default: the model's, else empty)")
	fs.Var(&eos, "eos-token", "eos_token text (default: the model's, else empty)")
	if _, err := fs.parse(args, e.stdout); err != nil {
		return err
	}
	if *msgFile == "" || (*model == "" && *tmpl == "") {
		return fmt.Errorf("%w: --messages and one of --model or --template are required", errUsage)
	}
	// Values stay raw JSON so that objects keep their key order, which
	// tojson reproduces as Python's json.dumps does.
	var in chat.Input
	var msgs []map[string]json.RawMessage
	if err := readJSONFile(*msgFile, &msgs); err != nil {
		return fmt.Errorf("--messages: %w", err)
	}
	for _, m := range msgs {
		msg := chat.Message{}
		for k, v := range m {
			msg[k] = v
		}
		in.Messages = append(in.Messages, msg)
	}
	if *toolFile != "" {
		var tools []json.RawMessage
		if err := readJSONFile(*toolFile, &tools); err != nil {
			return fmt.Errorf("--tools: %w", err)
		}
		in.Tools = []any{}
		for _, t := range tools {
			in.Tools = append(in.Tools, t)
		}
	}
	if *kwargsFile != "" {
		// A JSON object, not null or another value: its keys become
		// template variables.
		var kwargs map[string]json.RawMessage
		if err := readJSONFile(*kwargsFile, &kwargs); err != nil || kwargs == nil {
			if err == nil {
				err = errors.New("want a JSON object")
			}
			return fmt.Errorf("--kwargs: %w", err)
		}
		in.Extra = map[string]any{}
		for k, v := range kwargs {
			in.Extra[k] = v
		}
	}
	if *date != "" {
		day, err := time.Parse(time.DateOnly, *date)
		if err != nil {
			return fmt.Errorf("%w: --date: %v", errUsage, err)
		}
		in.Now = func() time.Time { return day }
	}
	in.AddGenerationPrompt = *addGen
	var t *chat.Template
	if *model != "" {
		path, err := serving.ResolveModelFile(context.Background(), e.log, *model, "")
		if err != nil {
			return err
		}
		m, err := models.Load(path, models.LoadOptions{ChatTemplate: *tmpl, VocabOnly: true, Logger: e.log})
		if err != nil {
			return err
		}
		defer m.Close()
		t = m.Template
		v := m.Tokenizer.Vocab()
		if v.BOS >= 0 {
			in.BOSToken = v.Tokens[v.BOS]
		}
		if v.EOS >= 0 {
			in.EOSToken = v.Tokens[v.EOS]
		}
	} else {
		src, _, err := models.ChatTemplateOverride(*tmpl)
		if err != nil {
			return err
		}
		if t, err = chat.Parse(src); err != nil {
			return err
		}
	}
	if bos.set {
		in.BOSToken = bos.s
	}
	if eos.set {
		in.EOSToken = eos.s
	}
	out, err := t.Render(in)
	if err != nil {
		return err
	}
	_, err = io.WriteString(e.stdout, out)
	return err
}

func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// optString is a string flag that knows whether it was given, so that an
// explicit empty --bos-token "" differs from no flag.
type optString struct {
	s   string
	set bool
}

func (o *optString) String() string     { return o.s }
func (o *optString) Set(s string) error { o.s, o.set = s, true; return nil }
