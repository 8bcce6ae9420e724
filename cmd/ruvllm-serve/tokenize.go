package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/ruvllm/ruvllm/internal/serving"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

func init() {
	register("tokenize", "print the token ids of a text as a JSON array", runTokenize)
}

func runTokenize(e *env, args []string) error {
	fs := newFlags("tokenize", "--model PATH [--no-bos] [--special] [--show] [--file F] [TEXT]")
	model := fs.String("model", "", "GGUF file whose vocab is used")
	noBOS := fs.Bool("no-bos", false, "do not add the BOS/EOS tokens the vocab asks for")
	special := fs.Bool("special", false, "parse special-token text such as <|im_start|> as those tokens")
	show := fs.Bool("show", false, "print id and piece on one line per token instead of a JSON array")
	file := fs.String("file", "", "read the text from this file, byte for byte")
	pos, err := fs.parse(args, e.stdout)
	if err != nil {
		return err
	}
	if *model == "" {
		return fmt.Errorf("%w: --model PATH is required", errUsage)
	}
	var text string
	switch {
	case *file != "" && len(pos) > 0:
		return fmt.Errorf("%w: give the text as an argument or with --file, not both", errUsage)
	case *file != "":
		b, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		text = string(b)
	case len(pos) == 1:
		text = pos[0]
	case len(pos) > 1:
		return fmt.Errorf("%w: one TEXT argument expected, got %d (quote the text)", errUsage, len(pos))
	}
	path, err := serving.ResolveModelFile(context.Background(), e.log, *model, "")
	if err != nil {
		return err
	}
	m, err := models.Load(path, models.LoadOptions{VocabOnly: true, Logger: e.log})
	if err != nil {
		return err
	}
	defer m.Close()
	ids := m.Tokenizer.Encode(text, tokenizer.EncodeOptions{AddSpecial: !*noBOS, ParseSpecial: *special})
	if *show {
		for _, id := range ids {
			fmt.Fprintf(e.stdout, "%6d -> %s\n", id, strconv.Quote(m.Tokenizer.Piece(id)))
		}
		return nil
	}
	if ids == nil {
		ids = []tokenizer.ID{}
	}
	b, _ := json.Marshal(ids)
	_, err = fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}
