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
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
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
	// Finish is why the generation ended: stop, stop_sequence, length.
	Finish string `json:"finish"`
	// Drafted and Accepted are speculative decoding's drafted tokens and
	// those generated.
	Drafted  int `json:"draft_n"`
	Accepted int `json:"draft_n_accepted"`
}

// stringList is a flag that may repeat.
type stringList []string

func (l *stringList) String() string     { return fmt.Sprint(*l) }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func runGenerate(e *env, args []string) error {
	fs := newFlags("generate", "--model PATH --prompt TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [--stop S ...] [--grammar F.gbnf | --json-schema F.json] [--lora A.gguf] [--top-probs K] [--json] [--threads T] [--spec ngram|suffix|draft|off] [--draft M.gguf]")
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
	var stops stringList
	fs.Var(&stops, "stop", "end the text where this string appears (repeatable)")
	grammarFile := fs.String("grammar", "", "a GBNF grammar file the text must follow")
	schemaFile := fs.String("json-schema", "", "a JSON schema file the text must follow")
	adapterPath := fs.String("lora", "", "generate with this LoRA adapter (a GGUF file or a PEFT directory)")
	bf := addBackendFlags(fs, true)
	ctxLen := fs.Int("ctx", 0, "context length in tokens; 0 = prompt + n")
	sf := addSpecFlags(fs, defaultSpec)
	if _, err := fs.parse(args, e.stdout); err != nil {
		return err
	}
	if err := sf.check(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	m, b, err := openModel(ctx, e.log, src, bf, backends.Options{})
	if err != nil {
		return err
	}
	defer m.Close()
	defer b.Close()

	req := &session.Request{Prompts: []session.Prompt{{Text: *prompt}}, MaxTokens: *n, Stop: stops, IgnoreEOS: *ignoreEOS, Route: "generate"}
	req.Sampling = backends.Params{Temperature: float32(*temp), TopK: *topK, TopP: float32(*topP), MinP: float32(*minP), RepeatPenalty: float32(*repeat)}
	if *seed >= 0 {
		req.Sampling.Seed = seed
	}
	if err := req.Sampling.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *asJSON || *topProbs > 0 {
		req.Logprobs, req.TopLogprobs = true, *topProbs
	}
	switch {
	case *grammarFile != "" && *schemaFile != "":
		return fmt.Errorf("%w: give --grammar or --json-schema, not both", errUsage)
	case *grammarFile != "":
		src, err := os.ReadFile(*grammarFile)
		if err != nil {
			return err
		}
		if req.Output, err = session.GBNFOutput(string(src), "--grammar"); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	case *schemaFile != "":
		src, err := os.ReadFile(*schemaFile)
		if err != nil {
			return err
		}
		if req.Output, err = session.JSONSchemaOutput(src, "--json-schema"); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	if *adapterPath != "" {
		if req.Adapter, err = lora.Load(*adapterPath, m.Config, m.File); err != nil {
			return fmt.Errorf("--lora %s: %w", *adapterPath, err)
		}
	}
	promptIDs := session.EncodePrompt(m.Tokenizer, *prompt)
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
	dm, db, err := sf.openDraft(e.log, m, b.Threads(), maxLen)
	if err != nil {
		return err
	}
	if dm != nil {
		defer dm.Close()
		defer db.Close()
	}
	eng, err := backends.NewEngine(b, backends.EngineOptions{Parallel: 1, MaxLen: maxLen, IsEOG: m.Tokenizer.IsEOG, Spec: sf.options(m, db)})
	if err != nil {
		return err
	}
	defer eng.Close()
	models := session.New(session.Options{})
	if err := models.AddModel(&session.Model{ID: m.ID(), Tokenizer: m.Tokenizer, Chat: m, Engine: eng}); err != nil {
		return err
	}
	gen, err := models.Start(ctx, req)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	defer gen.Close()
	var sink session.Sink = session.Discard{}
	if !*asJSON {
		sink = textWriter{e.stdout}
	}
	if err := gen.Run(ctx, sink); err != nil && err != session.ErrClientGone {
		return err
	}
	res := gen.Results()[0]
	t := gen.Timings()
	if *asJSON {
		_, ids := gen.Prompt(0)
		u := gen.Usage()
		out := generateResult{PromptIDs: ids, IDs: []tokenizer.ID{}, Text: res.Text, Finish: string(res.Finish),
			Drafted: u.DraftedTokens, Accepted: u.AcceptedTokens}
		for _, tok := range res.Tokens {
			out.IDs = append(out.IDs, tok.ID)
			if *topProbs > 0 {
				step := make([]topProb, len(tok.Top))
				for j, alt := range tok.Top {
					step[j] = topProb{ID: alt.ID, P: math.Exp(float64(alt.Logprob))}
				}
				out.Top = append(out.Top, step)
			}
		}
		return json.NewEncoder(e.stdout).Encode(out)
	}
	fmt.Fprintln(e.stdout)
	promptTime, genTime := t.FirstToken.Sub(t.Started), t.Ended.Sub(t.FirstToken)
	if t.FirstToken.IsZero() {
		promptTime, genTime = t.Ended.Sub(t.Started), 0
	}
	// The first token is the prompt's: generation counts the rest.
	fmt.Fprintf(e.stderr, "prompt: %d tokens in %.1f ms (%.1f tokens/s); generation: %d tokens in %.1f ms (%.1f tokens/s); %d threads\n",
		len(promptIDs), ms(promptTime), rate(len(promptIDs), promptTime), res.Generated, ms(genTime), rate(max(res.Generated-1, 0), genTime), b.Threads())
	if u := gen.Usage(); u.DraftedTokens > 0 {
		fmt.Fprintf(e.stderr, "speculative (%s): %d tokens drafted, %d accepted (accept_rate %.2f)\n",
			sf.sourceName(), u.DraftedTokens, u.AcceptedTokens, float64(u.AcceptedTokens)/float64(u.DraftedTokens))
	}
	return nil
}

// textWriter streams a generation's text to w.
type textWriter struct{ w io.Writer }

func (tw textWriter) Send(evs []session.Event) error {
	for _, e := range evs {
		if e.Kind == session.EventText {
			if _, err := io.WriteString(tw.w, e.Text); err != nil {
				return err
			}
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
