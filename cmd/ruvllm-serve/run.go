package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/serving"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/session"
)

func init() {
	register("run", "chat with a model in the terminal, as ollama run (MODEL: a GGUF file or a Hugging Face name, pulled first); with a PROMPT or piped input, answer once", runRun)
}

const runSynopsis = "MODEL [PROMPT ...] [--system TEXT] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [-n N] " +
	"[--repeat-penalty R] [--think | --think=false] [--hide-thinking] [--verbose] [-i] [--chat-template NAME|FILE|JINJA] [--ctx N] [--threads T]\n" +
	"  MODEL is a GGUF file, or a Hugging Face name pulled into the cache first: OWNER/REPO[:QUANT], OWNER/REPO/FILE.gguf, hf.co/OWNER/REPO:QUANT.\n" +
	"  Without PROMPT and with a terminal on standard input, it is a chat (/help lists its commands); a PROMPT, piped input or both\n" +
	"  (the PROMPT, a blank line, then the input) are answered once, the answer alone on standard output."

// runRun is `run`: the model runs in this process, on an engine of its
// own, through the session as the server's requests do.
func runRun(e *env, args []string) error {
	intr := make(chan os.Signal, 1)
	signal.Notify(intr, os.Interrupt)
	defer signal.Stop(intr)
	return runChat(e, args, os.Stdin, intr)
}

// runOptions are run's flags.
type runOptions struct {
	model, template, system string
	ctx                     int
	params                  chatParams
	think                   optBool
	hideThinking, verbose   bool
	interactive             bool
	backend                 *backendFlags
}

// parseRunArgs reads the flags and splits the arguments into the model
// and the prompt.
func parseRunArgs(args []string, stdout io.Writer) (*runOptions, string, error) {
	o := &runOptions{}
	fs := newFlags("run", runSynopsis)
	fs.StringVar(&o.model, "model", "", "the model, instead of the first argument (then every argument is the prompt)")
	fs.StringVar(&o.model, "m", "", "same as --model")
	fs.StringVar(&o.system, "system", "", "the system message (in the chat: /system TEXT)")
	p := &o.params
	fs.Float64Var(&p.temperature, "temp", 0.8, "temperature; 0 is greedy (in the chat: /set temperature T)")
	fs.Float64Var(&p.temperature, "temperature", 0.8, "same as --temp")
	fs.IntVar(&p.topK, "top-k", 40, "keep the K most likely tokens; 0 is off")
	fs.Float64Var(&p.topP, "top-p", 0.95, "nucleus sampling; 1 is off")
	fs.Float64Var(&p.minP, "min-p", 0.05, "keep tokens at least this fraction as likely as the best; 0 is off")
	fs.Float64Var(&p.repeatPenalty, "repeat-penalty", 1, "penalise tokens of the last 64; 1 is off")
	fs.Int64Var(&p.seed, "seed", -1, "random seed; -1 picks one")
	fs.IntVar(&p.numPredict, "n", -1, "tokens to generate at most per answer; -1: until the model ends its turn or the context is full")
	fs.IntVar(&p.numPredict, "num-predict", -1, "same as -n")
	fs.Var(&o.think, "think", "thinking models: think before answering (--think=false: do not); default: the model's template decides")
	fs.BoolVar(&o.hideThinking, "hide-thinking", false, "do not show a thinking model's reasoning (it is never written when standard output is not a terminal)")
	fs.BoolVar(&o.hideThinking, "hidethinking", false, "same as --hide-thinking")
	fs.BoolVar(&o.verbose, "verbose", false, "after each answer, the prompt's and the answer's tokens and speed (on standard error)")
	fs.BoolVar(&o.interactive, "i", false, "chat even when standard input is not a terminal: read messages and /commands from it, a line each")
	fs.StringVar(&o.template, "chat-template", "", "chat template: a built-in name (chatml, llama3, ...), a .jinja file or the Jinja text itself; default: the model's")
	fs.IntVar(&o.ctx, "ctx", defaultServeCtx, "context in tokens, which the conversation and the answer share (the oldest turns are left out when it is full); 0 = the model's trained context")
	fs.IntVar(&o.ctx, "c", defaultServeCtx, "same as --ctx")
	o.backend = addBackendFlags(fs, true)
	pos, err := fs.parse(args, stdout)
	if err != nil {
		return nil, "", err
	}
	if o.model == "" {
		if len(pos) == 0 {
			return nil, "", fmt.Errorf("%w: name the model: run MODEL [PROMPT] (a GGUF file or a Hugging Face name such as OWNER/REPO:Q4_K_M)", errUsage)
		}
		o.model, pos = pos[0], pos[1:]
	}
	if o.ctx < 0 || *o.backend.threads < 0 {
		return nil, "", fmt.Errorf("%w: --ctx and --threads must not be negative", errUsage)
	}
	if err := o.params.sampling().Validate(); err != nil {
		return nil, "", fmt.Errorf("%w: %v", errUsage, err)
	}
	return o, strings.Join(pos, " "), nil
}

// runChat is run with its standard input and interrupts given, so that
// tests drive it: intr delivers Ctrl-C.
func runChat(e *env, args []string, in io.Reader, intr <-chan os.Signal) error {
	o, prompt, err := parseRunArgs(args, e.stdout)
	if err != nil {
		return err
	}
	chatting := o.interactive || (prompt == "" && isTerminalReader(in))
	if !chatting && !isTerminalReader(in) {
		piped, err := io.ReadAll(in)
		if err != nil {
			return fmt.Errorf("reading standard input: %w", err)
		}
		if s := strings.TrimRight(string(piped), "\n"); s != "" {
			if prompt != "" {
				prompt += "\n\n"
			}
			prompt += s
		}
	}
	if !chatting && strings.TrimSpace(prompt) == "" {
		return fmt.Errorf("%w: nothing to answer: give a PROMPT or pipe one in (-i reads a chat from standard input)", errUsage)
	}
	// The chat's screen is the terminal: the model's loading is told by
	// warnings only, unless RUVLLM_LOG asks for more.
	if os.Getenv("RUVLLM_LOG") == "" {
		quiet := *e
		quiet.log = e.log.Level(zerolog.WarnLevel)
		e = &quiet
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loaded := make(chan struct{})
	go func() {
		// Ctrl-C while the model is pulled or loaded gives up.
		select {
		case <-intr:
			cancel()
		case <-loaded:
		}
	}()
	c, closeModel, err := openChat(ctx, e, o)
	close(loaded)
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("interrupted")
		}
		return err
	}
	defer closeModel()
	if !chatting {
		if err := c.turn(context.Background(), prompt, intr); err != nil {
			return err
		}
		if c.interrupted {
			return errors.New("interrupted")
		}
		return nil
	}
	lines, stop := readLines(in)
	defer stop()
	// Prompts only on a terminal: a script's output is the answers alone.
	c.prompts = isTerminalReader(in) && isTerminal(e.stdout)
	if prompt != "" {
		// -i with a PROMPT: it opens the chat.
		if err := c.turn(context.Background(), prompt, intr); err != nil {
			c.note("Error: %v", err)
		}
	}
	c.loop(context.Background(), lines, intr)
	return nil
}

// openChat finds and opens the model (pulling a Hugging Face name first),
// starts its engine and readies the chat; closeModel undoes it.
func openChat(ctx context.Context, e *env, o *runOptions) (c *chatSession, closeModel func(), err error) {
	if !isFile(o.model) {
		if _, ok := serving.HubName(o.model); !ok {
			return nil, nil, fmt.Errorf("%w: %s is not a GGUF file, nor a Hugging Face name (OWNER/REPO[:QUANT], OWNER/REPO/FILE.gguf); "+
				"run loads the model itself: to chat with a model a server serves, use the server's API", errUsage, o.model)
		}
	}
	path, err := serving.ResolveModelFile(ctx, e.log, o.model, "")
	if err != nil {
		return nil, nil, err
	}
	m, err := models.Load(path, models.LoadOptions{ChatTemplate: o.template, Logger: e.log})
	if err != nil {
		return nil, nil, err
	}
	var undo []func()
	closeModel = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	undo = append(undo, func() { m.Close() })
	defer func() {
		if err != nil {
			closeModel()
		}
	}()
	if m.Config == nil {
		return nil, nil, fmt.Errorf("%s: the file holds no runnable model (a vocabulary only?)", path)
	}
	maxLen := o.ctx
	if maxLen == 0 || maxLen > m.Config.ContextLength {
		maxLen = m.Config.ContextLength
	}
	b, err := o.backend.open(m, backends.Options{KVTokens: maxLen, KVSequences: 1})
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, func() { b.Close() })
	eng, err := backends.NewEngine(b, backends.EngineOptions{Parallel: 1, MaxLen: maxLen, IsEOG: m.Tokenizer.IsEOG})
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, func() { eng.Close() })
	ms := session.New(session.Options{})
	sm := &session.Model{ID: m.ID(), Tokenizer: m.Tokenizer, Chat: m, Engine: eng}
	if err := ms.AddModel(sm); err != nil {
		return nil, nil, err
	}
	c = &chatSession{
		models: ms, model: sm, file: m, maxLen: maxLen, threads: b.Threads(),
		params: o.params, defaults: o.params, system: o.system, think: o.think.ptr(),
		out: e.stdout, errOut: e.stderr, verbose: o.verbose,
		color: isTerminal(e.stdout) && os.Getenv("NO_COLOR") == "",
	}
	c.showThinking = c.color && !o.hideThinking
	if m.TemplateSource == models.FallbackTemplate {
		c.note("%s has no chat template: ChatML is used (--chat-template chooses another)", m.ID())
	}
	return c, closeModel, nil
}

// isTerminalReader reports whether r is a terminal.
func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// isFile reports whether p is an existing regular file.
func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// optBool is a boolean flag that knows whether it was given: --think,
// --think=false, or neither (the template decides).
type optBool struct {
	v, set bool
}

func (o *optBool) String() string {
	if !o.set {
		return ""
	}
	return fmt.Sprint(o.v)
}

func (o *optBool) Set(s string) error {
	switch strings.ToLower(s) {
	case "true", "1", "yes", "on":
		o.v = true
	case "false", "0", "no", "off":
		o.v = false
	default:
		return fmt.Errorf("%q is not true or false", s)
	}
	o.set = true
	return nil
}

// IsBoolFlag lets --think stand alone.
func (o *optBool) IsBoolFlag() bool { return true }

// ptr is the value as session.ReasoningOptions.Think takes it.
func (o *optBool) ptr() *bool {
	if !o.set {
		return nil
	}
	v := o.v
	return &v
}
