package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/session"
)

// chatSession is run's conversation: the history, re-rendered with the model's
// template at each turn (the engine's prefix cache keeps the part already
// computed), and the settings the /commands change.
type chatSession struct {
	models *session.Models
	model  *session.Model
	file   *models.Model
	// maxLen is the context; threads the backend's, for /show info.
	maxLen, threads int

	// params are the sampling settings, defaults those run started with
	// (what /unset returns to).
	params, defaults chatParams
	system           string
	// think turns thinking on or off; nil leaves it to the template.
	think *bool
	// history are the turns so far: user and assistant messages.
	history []session.Message

	out, errOut io.Writer
	// color: standard output is a terminal (and NO_COLOR is not set);
	// showThinking writes the reasoning (dimmed); prompts writes ">>> ";
	// verbose the speed after each answer.
	color, showThinking, prompts, verbose bool
	// interrupted says that Ctrl-C stopped the last answer.
	interrupted bool
}

// ANSI sequences for the terminal.
const (
	ansiDim   = "\x1b[2m"
	ansiReset = "\x1b[0m"
)

// multilineQuote begins and ends a message of several lines, as in ollama.
const multilineQuote = `"""`

// note writes a remark of the chat's own (not the model's) to standard
// error.
func (c *chatSession) note(format string, args ...any) {
	fmt.Fprintf(c.errOut, format+"\n", args...)
}

// readLines reads in's lines on a goroutine of its own, so that the chat
// waits for a line and for Ctrl-C at once; the channel closes at the end
// of the input (Ctrl-D). stop lets the goroutine go.
func readLines(in io.Reader) (<-chan string, func()) {
	lines, done := make(chan string), make(chan struct{})
	go func() {
		defer close(lines)
		br := bufio.NewReader(in)
		for {
			s, err := br.ReadString('\n')
			if s != "" {
				select {
				case lines <- strings.TrimRight(s, "\r\n"):
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	var once sync.Once
	return lines, func() { once.Do(func() { close(done) }) }
}

// loop is the chat: it reads messages and /commands until /bye, the end
// of the input, or two Ctrl-C in a row at the prompt.
func (c *chatSession) loop(ctx context.Context, lines <-chan string, intr <-chan os.Signal) {
	if c.prompts {
		fmt.Fprintf(c.out, "%s is ready. /help lists the commands, /bye (or Ctrl-D) ends the chat.\n", c.model.ID)
	}
	interrupted := false
	for {
		c.prompt(">>> ")
		var line string
		select {
		case <-intr:
			if interrupted {
				fmt.Fprintln(c.out)
				return
			}
			interrupted = true
			fmt.Fprintln(c.out, "\nUse Ctrl + d or /bye to exit.")
			continue
		case l, ok := <-lines:
			if !ok {
				if c.prompts {
					fmt.Fprintln(c.out)
				}
				return
			}
			line = l
		}
		interrupted = false
		if strings.HasPrefix(strings.TrimSpace(line), multilineQuote) {
			text, ok := c.readMultiline(strings.TrimSpace(line), lines, intr)
			if !ok {
				continue
			}
			if err := c.turn(ctx, text, intr); err != nil {
				c.note("Error: %v", err)
			}
			continue
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "/"):
			if c.command(line) {
				return
			}
			continue
		}
		if err := c.turn(ctx, line, intr); err != nil {
			c.note("Error: %v", err)
		}
	}
}

// prompt writes the prompt on a terminal.
func (c *chatSession) prompt(p string) {
	if c.prompts {
		fmt.Fprint(c.out, p)
	}
}

// readMultiline reads a message between """ and """, which first began;
// ok is false when the input ended or Ctrl-C gave it up.
func (c *chatSession) readMultiline(first string, lines <-chan string, intr <-chan os.Signal) (string, bool) {
	rest := strings.TrimPrefix(first, multilineQuote)
	if body, closed := strings.CutSuffix(rest, multilineQuote); closed {
		return body, strings.TrimSpace(body) != ""
	}
	var b strings.Builder
	b.WriteString(rest)
	for {
		c.prompt("... ")
		select {
		case <-intr:
			fmt.Fprintln(c.out)
			return "", false
		case l, ok := <-lines:
			if !ok {
				return "", false
			}
			if b.Len() > 0 || rest != "" {
				b.WriteByte('\n')
			}
			if body, closed := strings.CutSuffix(strings.TrimRight(l, " \t"), multilineQuote); closed {
				b.WriteString(body)
				return b.String(), strings.TrimSpace(b.String()) != ""
			}
			b.WriteString(l)
		}
	}
}

// turn answers text with the conversation so far, streaming the answer;
// Ctrl-C (intr) stops the answer, which is kept as far as it went.
func (c *chatSession) turn(ctx context.Context, text string, intr <-chan os.Signal) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.interrupted = false
	watching := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var stopped bool
	go func() {
		defer wg.Done()
		select {
		case <-intr:
			stopped = true
			cancel()
		case <-watching:
		}
	}()
	err := c.answer(ctx, text)
	close(watching)
	wg.Wait()
	c.interrupted = stopped
	return err
}

// user is a user message.
func user(text string) session.Message { return session.Message{"role": "user", "content": text} }

// messages are the system message, the history and msg.
func (c *chatSession) messages(msg session.Message) []session.Message {
	var all []session.Message
	if c.system != "" {
		all = append(all, session.Message{"role": "system", "content": c.system})
	}
	all = append(all, c.history...)
	return append(all, msg)
}

// request is the session request of a turn.
func (c *chatSession) request(msgs []session.Message) *session.Request {
	return &session.Request{
		Messages: msgs, Route: "run", IDPrefix: "run-",
		Sampling: c.params.sampling(), MaxTokens: max(c.params.numPredict, 0), FitMaxTokens: true,
		Stop: c.params.stop, Reasoning: session.ReasoningOptions{Think: c.think},
	}
}

// fit leaves out the oldest turns while the conversation would leave
// less room for the answer than -n asks (a quarter of the context without
// it).
func (c *chatSession) fit(msg session.Message) {
	room := c.params.numPredict
	if room <= 0 || room > c.maxLen/2 {
		room = c.maxLen / 4
	}
	dropped := 0
	for len(c.history) > 0 {
		r, err := c.models.Render(c.request(c.messages(msg)))
		if err != nil || len(r.Tokens)+room <= c.maxLen {
			break
		}
		// Drop the first turn: its user message and what answered it.
		n := 1
		for n < len(c.history) && c.history[n]["role"] != "user" {
			n++
		}
		c.history = c.history[n:]
		dropped++
	}
	switch {
	case dropped == 1:
		c.note("(the oldest turn of the chat no longer fits its context of %d tokens: it was left out)", c.maxLen)
	case dropped > 1:
		c.note("(the %d oldest turns of the chat no longer fit its context of %d tokens: they were left out)", dropped, c.maxLen)
	}
}

// answer runs one turn: the model's answer to text is streamed and, with
// text, joins the history.
func (c *chatSession) answer(ctx context.Context, text string) error {
	msg := user(text)
	c.fit(msg)
	gen, err := c.models.Start(ctx, c.request(c.messages(msg)))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer gen.Close()
	p := &replyPrinter{w: c.out, color: c.color, showThinking: c.showThinking}
	err = gen.Run(ctx, p)
	p.end()
	if err != nil && !(errors.Is(err, session.ErrClientGone) && ctx.Err() != nil) {
		return err
	}
	c.history = append(c.history, msg, session.Message{"role": "assistant", "content": p.content.String()})
	if ctx.Err() != nil {
		return nil // Ctrl-C: what was written stays, as far as it went
	}
	if res := gen.Results()[0]; res.Finish == session.FinishLength && (c.params.numPredict <= 0 || res.Generated < c.params.numPredict) {
		c.note("(the answer was cut off: the context of %d tokens is full; /clear starts afresh)", c.maxLen)
	}
	if c.verbose {
		c.stats(gen)
	}
	return nil
}

// stats writes a turn's token counts and speeds.
func (c *chatSession) stats(gen *session.Generation) {
	u, t := gen.Usage(), gen.Timings()
	promptTime, genTime := t.FirstToken.Sub(t.Started), t.Ended.Sub(t.FirstToken)
	if t.FirstToken.IsZero() {
		promptTime, genTime = t.Ended.Sub(t.Started), 0
	}
	c.note("prompt: %d tokens (%d cached) in %.1f ms (%.1f tokens/s); answer: %d tokens in %.1f ms (%.1f tokens/s); total %s",
		u.PromptTokens, u.CachedTokens, ms(promptTime), rate(u.PromptTokens-u.CachedTokens, promptTime),
		u.CompletionTokens, ms(genTime), rate(max(u.CompletionTokens-1, 0), genTime), t.Ended.Sub(t.Received).Round(time.Millisecond))
}

// replyPrinter is the sink of a turn: it streams the answer, and a
// thinking model's reasoning apart from it (dimmed, between
// "Thinking..." and "...done thinking."), and keeps the answer.
type replyPrinter struct {
	w                   io.Writer
	color, showThinking bool
	content             strings.Builder
	thinking            bool // the reasoning is being shown
	// started: the answer has begun (leading blank lines are left out);
	// last is the last byte written.
	started bool
	last    byte
}

func (p *replyPrinter) write(s string) error {
	if s == "" {
		return nil
	}
	p.last = s[len(s)-1]
	_, err := io.WriteString(p.w, s)
	return err
}

// Send writes the events' text.
func (p *replyPrinter) Send(evs []session.Event) error {
	for _, e := range evs {
		switch e.Kind {
		case session.EventReasoning:
			if !p.showThinking {
				continue
			}
			if !p.thinking {
				p.thinking = true
				if err := p.write(p.style(ansiDim) + "Thinking...\n"); err != nil {
					return err
				}
			}
			if err := p.write(e.Text); err != nil {
				return err
			}
		case session.EventText:
			p.content.WriteString(e.Text)
			text := e.Text
			if !p.started {
				text = strings.TrimLeft(text, "\n")
				if text == "" {
					continue
				}
				p.started = true
			}
			if err := p.endThinking(); err != nil {
				return err
			}
			if err := p.write(text); err != nil {
				return err
			}
		}
	}
	return nil
}

// style is an ANSI sequence when writing to a terminal.
func (p *replyPrinter) style(s string) string {
	if p.color {
		return s
	}
	return ""
}

// endThinking closes the reasoning shown.
func (p *replyPrinter) endThinking() error {
	if !p.thinking {
		return nil
	}
	p.thinking = false
	nl := ""
	if p.last != '\n' {
		nl = "\n"
	}
	return p.write(nl + "...done thinking." + p.style(ansiReset) + "\n\n")
}

// end finishes the answer's line.
func (p *replyPrinter) end() {
	_ = p.endThinking()
	if p.last != 0 && p.last != '\n' {
		_ = p.write("\n")
	}
}

// chatParams are the sampling settings of a chat.
type chatParams struct {
	temperature, topP, minP, repeatPenalty float64
	topK                                   int
	// seed < 0 draws a seed per answer; numPredict <= 0 lets an answer
	// run until the model ends it or the context is full.
	seed       int64
	numPredict int
	stop       []string
}

// sampling is the session's sampling of p.
func (p chatParams) sampling() backends.Params {
	s := backends.Params{Temperature: float32(p.temperature), TopK: p.topK, TopP: float32(p.topP), MinP: float32(p.minP),
		RepeatPenalty: float32(p.repeatPenalty)}
	if p.seed >= 0 {
		seed := p.seed
		s.Seed = &seed
	}
	return s
}

// chatParam is one setting /set changes: its names (ollama's first), and
// how it is read and shown.
type chatParam struct {
	names []string
	help  string
	get   func(*chatParams) string
	set   func(*chatParams, string) error
}

// numParam is a numeric setting held in the field f points to.
func numParam[T int | int64 | float64](names []string, help string, f func(*chatParams) *T) chatParam {
	return chatParam{names: names, help: help,
		get: func(p *chatParams) string { return fmt.Sprint(*f(p)) },
		set: func(p *chatParams, v string) error {
			var x T
			switch any(x).(type) {
			case float64:
				n, err := strconv.ParseFloat(v, 64)
				if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
					return fmt.Errorf("%q is not a number", v)
				}
				x = T(n)
			case int64:
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return fmt.Errorf("%q is not a whole number", v)
				}
				x = T(n)
			default:
				n, err := strconv.ParseInt(v, 10, 32)
				if err != nil {
					return fmt.Errorf("%q is not a whole number (of at most 32 bits)", v)
				}
				x = T(n)
			}
			*f(p) = x
			return nil
		}}
}

// chatParamList are the settings, in the order /set lists them.
var chatParamList = []chatParam{
	numParam([]string{"temperature", "temp"}, "0 is greedy", func(p *chatParams) *float64 { return &p.temperature }),
	numParam([]string{"top_k", "top-k"}, "keep the K most likely tokens; 0 is off", func(p *chatParams) *int { return &p.topK }),
	numParam([]string{"top_p", "top-p"}, "nucleus sampling; 1 is off", func(p *chatParams) *float64 { return &p.topP }),
	numParam([]string{"min_p", "min-p"}, "keep tokens at least this fraction as likely as the best; 0 is off", func(p *chatParams) *float64 { return &p.minP }),
	numParam([]string{"seed"}, "-1 draws one per answer", func(p *chatParams) *int64 { return &p.seed }),
	numParam([]string{"num_predict", "max_tokens", "n_predict", "n"}, "tokens per answer at most; -1: until the model stops or the context is full",
		func(p *chatParams) *int { return &p.numPredict }),
	numParam([]string{"repeat_penalty", "repeat-penalty"}, "penalise tokens of the last 64; 1 is off", func(p *chatParams) *float64 { return &p.repeatPenalty }),
	{names: []string{"stop"}, help: "strings that end an answer (space-separated; quote one with spaces as \"a b\")",
		get: func(p *chatParams) string {
			q := make([]string, len(p.stop))
			for i, s := range p.stop {
				q[i] = strconv.Quote(s)
			}
			return strings.Join(q, " ")
		},
		set: func(p *chatParams, v string) error {
			stops, err := splitQuoted(v)
			if err != nil {
				return err
			}
			if len(stops) > session.MaxStops {
				return fmt.Errorf("at most %d stop strings", session.MaxStops)
			}
			p.stop = stops
			return nil
		}},
}

// findParam finds a setting by any of its names.
func findParam(name string) (chatParam, bool) {
	name = strings.ToLower(name)
	for _, p := range chatParamList {
		for _, n := range p.names {
			if n == name {
				return p, true
			}
		}
	}
	return chatParam{}, false
}

// splitQuoted splits s at spaces, reading "quoted strings" (with Go's
// escapes, as "\n") as one.
func splitQuoted(s string) ([]string, error) {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] != '"' {
			word, rest, _ := strings.Cut(s, " ")
			out, s = append(out, word), rest
			continue
		}
		prefix, err := strconv.QuotedPrefix(s)
		if err != nil {
			return nil, fmt.Errorf("unterminated quote in %s", s)
		}
		word, _ := strconv.Unquote(prefix)
		out, s = append(out, word), s[len(prefix):]
	}
	return out, nil
}

const chatHelp = `Commands:
  /set NAME VALUE    change a sampling setting (/set alone lists them): temperature, top_k, top_p, min_p,
                     seed, num_predict, repeat_penalty, stop (also as /set parameter NAME VALUE)
  /set system TEXT   the system message (also /system TEXT)
  /set think         thinking models think before answering (/set nothink: they do not)
  /set verbose       tokens and speed after each answer (/set quiet: not)
  /unset NAME        a setting back to its start value (/unset system: no system message)
  /show [WHAT]       parameters (also /show alone), system, history, info, template
  /clear             forget the conversation (the system message and settings stay)
  /bye               end the chat (also /exit, Ctrl-D)
  /help, /?          this help

Ctrl-C stops the answer being written; at the prompt, twice in a row, it ends the chat.
Begin and end a message of several lines with """.
`

// command runs a /command; quit says the chat ends.
func (c *chatSession) command(line string) (quit bool) {
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch strings.ToLower(name) {
	case "/bye", "/exit", "/quit":
		return true
	case "/help", "/?":
		fmt.Fprint(c.out, chatHelp)
	case "/clear":
		c.history = nil
		fmt.Fprintln(c.out, "Cleared the conversation.")
	case "/system":
		if arg == "" {
			c.show("system")
			break
		}
		c.system = arg
		fmt.Fprintln(c.out, "Set the system message.")
	case "/set":
		c.set(arg)
	case "/unset":
		c.unset(arg)
	case "/show":
		c.show(arg)
	default:
		c.note("Unknown command %s (/help lists them).", name)
	}
	return false
}

// set is /set.
func (c *chatSession) set(arg string) {
	name, value, _ := strings.Cut(arg, " ")
	value = strings.TrimSpace(value)
	if strings.EqualFold(name, "parameter") {
		name, value, _ = strings.Cut(value, " ")
		value = strings.TrimSpace(value)
	}
	switch strings.ToLower(name) {
	case "":
		c.show("parameters")
		return
	case "system":
		c.system = value
		fmt.Fprintln(c.out, "Set the system message.")
		return
	case "think", "nothink":
		on := strings.EqualFold(name, "think")
		c.think = &on
		if !c.model.Thinks() {
			c.note("(%s's template does not think: this changes nothing)", c.model.ID)
		}
		fmt.Fprintf(c.out, "Set thinking %s.\n", map[bool]string{true: "on", false: "off"}[on])
		return
	case "verbose", "quiet":
		c.verbose = strings.EqualFold(name, "verbose")
		fmt.Fprintf(c.out, "Set %s mode.\n", strings.ToLower(name))
		return
	}
	p, ok := findParam(name)
	if !ok {
		c.note("Unknown setting %s (/set alone lists them).", name)
		return
	}
	if value == "" && p.names[0] != "stop" {
		c.note("/set %s needs a value.", p.names[0])
		return
	}
	next := c.params
	if err := p.set(&next, value); err != nil {
		c.note("/set %s: %v", p.names[0], err)
		return
	}
	if err := next.sampling().Validate(); err != nil {
		c.note("/set %s: %v", p.names[0], err)
		return
	}
	c.params = next
	fmt.Fprintf(c.out, "Set %s to %s.\n", p.names[0], p.get(&c.params))
}

// unset is /unset: a setting back to its start value.
func (c *chatSession) unset(name string) {
	switch strings.ToLower(name) {
	case "system":
		c.system = ""
		fmt.Fprintln(c.out, "Removed the system message.")
		return
	case "think", "nothink":
		c.think = nil
		fmt.Fprintln(c.out, "Thinking is the template's choice again.")
		return
	}
	p, ok := findParam(name)
	if !ok {
		c.note("Unknown setting %q (/set alone lists them).", name)
		return
	}
	_ = p.set(&c.params, p.get(&c.defaults))
	fmt.Fprintf(c.out, "Set %s back to %s.\n", p.names[0], p.get(&c.params))
}

// show is /show.
func (c *chatSession) show(what string) {
	switch strings.ToLower(what) {
	case "", "parameters", "params":
		for _, p := range chatParamList {
			fmt.Fprintf(c.out, "%-16s %-10s %s\n", p.names[0], p.get(&c.params), p.help)
		}
		think := "the template's choice"
		if c.think != nil {
			think = map[bool]string{true: "on", false: "off"}[*c.think]
		}
		fmt.Fprintf(c.out, "%-16s %s\n", "think", think)
	case "system":
		if c.system == "" {
			fmt.Fprintln(c.out, "No system message.")
			return
		}
		fmt.Fprintln(c.out, c.system)
	case "history":
		if len(c.history) == 0 {
			fmt.Fprintln(c.out, "The conversation is empty.")
			return
		}
		for _, m := range c.history {
			fmt.Fprintf(c.out, "%s: %s\n", m["role"], m["content"])
		}
	case "info":
		fmt.Fprintf(c.out, "%-14s %s\n%-14s %s\n", "model", c.model.ID, "file", c.file.Path)
		if info, err := c.file.Info(); err == nil {
			fmt.Fprintf(c.out, "%-14s %s\n%-14s %d\n%-14s %s\n%-14s %s\n", "architecture", info.Arch, "parameters", info.Parameters,
				"quantization", info.FileType, "size", humanBytes(uint64(info.Size)))
		}
		fmt.Fprintf(c.out, "%-14s %d tokens (trained: %d)\n%-14s %s\n%-14s %t\n%-14s %d\n", "context", c.maxLen, c.file.Config.ContextLength,
			"template", c.file.TemplateSource, "thinks", c.model.Thinks(), "threads", c.threads)
	case "template":
		fmt.Fprintln(c.out, c.model.TemplateSource())
	default:
		c.note("Unknown /show %s: parameters, system, history, info, template.", what)
	}
}
