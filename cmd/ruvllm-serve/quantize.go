package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

func init() {
	register("quantize", "convert a model file to another quantization (Q4_0, Q4_K_M, Q8_0, F16, ...)", runQuantize)
	register("synth", "write a random-weight model of a real shape, for speed measurements", runSynth)
}

func runQuantize(e *env, args []string) error {
	fs := newFlags("quantize", "--model IN.gguf --out OUT.gguf --type TYPE [--pure] [--threads T]")
	in := fs.String("model", "", "model to convert")
	out := fs.String("out", "", "file to write")
	typ := fs.String("type", "", "target: "+fmt.Sprint(models.FileTypes()))
	pure := fs.Bool("pure", false, "give every weight matrix the base type (no per-tensor mix)")
	threads := addThreadsFlag(fs)
	if _, err := fs.parse(args, e.stdout); err != nil {
		return err
	}
	if *in == "" || *out == "" || *typ == "" {
		return fmt.Errorf("%w: --model, --out and --type are required", errUsage)
	}
	ft, err := models.ParseFileType(*typ)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	f, err := gguf.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := models.ReadConfig(f)
	if err != nil {
		return err
	}
	start := time.Now()
	plan := models.QuantPlan{Type: ft, Pure: *pure, Layers: c.Layers, GQA: c.Heads / c.KVHeads, HasOutput: !c.TiedOutput}
	if err := models.QuantizeFile(f, *out, plan, *threads); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %s (%s) in %.1f s\n", *out, ft.Name, time.Since(start).Seconds())
	return nil
}

func runSynth(e *env, args []string) error {
	fs := newFlags("synth", "--shape NAME [--arch A] --type TYPE --out F.gguf [--seed S] [--chat-template F.jinja] [--threads T]")
	shape := fs.String("shape", "", "one of "+strings.Join(models.ShapeNames(), ", "))
	arch := fs.String("arch", "", "the architecture to write the shape in ("+strings.Join(models.Architectures(), ", ")+"; default: the shape's own, llama)")
	typ := fs.String("type", "F16", "file type: "+fmt.Sprint(models.FileTypes()))
	out := fs.String("out", "", "file to write")
	seed := fs.Uint64("seed", 1, "seed of the random weights")
	template := fs.String("chat-template", "", "a chat template file to write as tokenizer.chat_template")
	threads := addThreadsFlag(fs)
	if _, err := fs.parse(args, e.stdout); err != nil {
		return err
	}
	if *shape == "" || *out == "" {
		return fmt.Errorf("%w: --shape and --out are required", errUsage)
	}
	s, err := models.ShapeByName(*shape)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *arch != "" {
		if !models.Supported(*arch) {
			return fmt.Errorf("%w: --arch %q is not one of %s", errUsage, *arch, strings.Join(models.Architectures(), ", "))
		}
		s.Arch = *arch
	}
	ft, err := models.ParseFileType(*typ)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *template != "" {
		src, err := os.ReadFile(*template)
		if err != nil {
			return err
		}
		s.ChatTemplate = string(src)
	}
	start := time.Now()
	if err := models.Synthesize(*out, s, ft, *seed, *threads); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %s (%s, %s) in %.1f s\n", *out, s.Name, ft.Name, time.Since(start).Seconds())
	return nil
}
