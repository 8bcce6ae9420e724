package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

func init() {
	register("generate", "complete a prompt on the command line, streaming the text", runGenerate)
}

type topProb struct {
	ID tokenizer.ID `json:"id"`
	P  float64      `json:"p"`
}

type generateResult struct {
	PromptIDs []tokenizer.ID `json:"prompt_ids"`
	IDs       []tokenizer.ID `json:"ids"`
	Text      string         `json:"text"`
	Top       [][]topProb    `json:"top,omitempty"`
}

func runGenerate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("generate", "--model PATH --prompt TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [--top-probs K] [--json] [--threads T]")
	src := addModelFlags(fs)
	prompt := fs.String("prompt", "", "the prompt, tokenized as llama-server does (BOS when the vocab asks for it, special tokens parsed)")
	n := fs.Int("n", 128, "tokens to generate at most")
	fs.IntVar(n, "n-predict", 128, "same as -n")
	temp := fs.Float64("temp", 0.8, "temperature; 0 is greedy")
	topK := fs.Int("top-k", 40, "keep the K most likely tokens; 0 is off")
	topP := fs.Float64("top-p", 0.95, "nucleus sampling; 1 is off")
	minP := fs.Float64("min-p", 0.05, "keep tokens at least this fraction as likely as the best; 0 is off")
	repeat := fs.Float64("repeat-penalty", 1, "penalise tokens of the last 64; 1 is off")
	seed := fs.Int64("seed", -1, "random seed; -1 picks one")
	topProbs := fs.Int("top-probs", 0, "with --json, the K most probable tokens at each step (softmax at temperature 1)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of streaming text")
	ignoreEOS := fs.Bool("ignore-eos", false, "keep generating past end-of-generation tokens")
	bf := addBackendFlags(fs, true)
	ctxLen := fs.Int("ctx", 0, "context length in tokens; 0 = prompt + n")
	if _, err := fs.parse(args, stdout); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	m, b, err := openModel(ctx, src, bf, backends.Options{})
	if err != nil {
		return err
	}
	defer m.Close()
	defer b.Close()

	promptIDs := m.Tokenizer.Encode(*prompt, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	if len(promptIDs) == 0 {
		return fmt.Errorf("the prompt is empty and the vocab adds no BOS: nothing to start from")
	}
	maxLen := *ctxLen
	if maxLen <= 0 {
		maxLen = len(promptIDs) + *n
	}
	if len(promptIDs)+*n > maxLen {
		return fmt.Errorf("prompt (%d tokens) + -n %d exceeds --ctx %d", len(promptIDs), *n, maxLen)
	}
	seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: maxLen})
	if err != nil {
		return err
	}
	defer seq.Close()

	p := backends.Params{Temperature: float32(*temp), TopK: *topK, TopP: float32(*topP), MinP: float32(*minP), RepeatPenalty: float32(*repeat)}
	if *seed >= 0 {
		p.Seed = seed
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	vocab := b.Model().VocabSize
	sampler := backends.NewSampler(p, vocab)
	logits := make([]float32, vocab)
	res := generateResult{PromptIDs: promptIDs, IDs: []tokenizer.ID{}}
	dec := m.Tokenizer.NewDecoderWith(tokenizer.DecodeOptions{Continuation: true})
	var top []backends.TokenLogprob

	start := time.Now()
	if err := b.Forward([]backends.Step{{Seq: seq, Tokens: promptIDs, Logits: logits}}); err != nil {
		return err
	}
	promptTime := time.Since(start)
	genStart := time.Now()
	one := make([]tokenizer.ID, 1)
	for i := 0; i < *n; i++ {
		if ctx.Err() != nil {
			break
		}
		if *topProbs > 0 {
			top = sampler.TopLogprobs(logits, *topProbs, top[:0])
			step := make([]topProb, len(top))
			for j, t := range top {
				step[j] = topProb{ID: t.ID, P: math.Exp(float64(t.Logprob))}
			}
			res.Top = append(res.Top, step)
		}
		id := sampler.Sample(logits)
		sampler.Accept(id)
		if !*ignoreEOS && m.Tokenizer.IsEOG(id) {
			break
		}
		res.IDs = append(res.IDs, id)
		text := dec.Add(id)
		res.Text += text
		if !*asJSON {
			io.WriteString(stdout, text)
		}
		if i == *n-1 {
			break
		}
		one[0] = id
		if err := b.Forward([]backends.Step{{Seq: seq, Tokens: one, Logits: logits}}); err != nil {
			return err
		}
	}
	genTime := time.Since(genStart)
	tail := dec.Flush()
	res.Text += tail
	if *asJSON {
		enc := json.NewEncoder(stdout)
		return enc.Encode(res)
	}
	fmt.Fprintln(stdout, tail)
	fmt.Fprintf(stderr, "prompt: %d tokens in %.1f ms (%.1f tokens/s); generation: %d tokens in %.1f ms (%.1f tokens/s); %d threads\n",
		len(promptIDs), ms(promptTime), rate(len(promptIDs), promptTime), len(res.IDs), ms(genTime), rate(len(res.IDs), genTime), b.Threads())
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
