package chat

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Message is one chat message as the template sees it: role, content (a
// string or a list of parts), and optional tool_calls, name, tool_call_id,
// reasoning_content and whatever else the caller passes.
type Message = map[string]any

// Input is what a chat template is rendered with.
//
// Values are JSON-shaped: map[string]any, []any, string, float64, int, bool
// and nil, as encoding/json decodes them. A json.RawMessage anywhere is
// decoded keeping its object key order and its integers apart from its floats,
// exactly as Python's json.loads would; plain Go maps have no order, so their
// keys are sorted, and a float64 holding a whole number is taken for a JSON
// integer. Any other value (a struct, say) goes through encoding/json.
type Input struct {
	Messages            []Message
	Tools               []any // the tools variable is defined only when this is non-nil
	AddGenerationPrompt bool
	BOSToken, EOSToken  string
	// Extra holds further template variables (documents, enable_thinking,
	// ...), passed like transformers' template kwargs.
	Extra map[string]any
	// Now is the clock behind strftime_now; nil means time.Now.
	Now func() time.Time
}

// Template is a parsed chat template. It is safe for concurrent use.
type Template struct {
	tpl      *exec.Template
	literals map[string]string
	src      string
}

// Source is the template's Jinja source, which tells what else the model
// was taught (how it writes tool calls, say).
func (t *Template) Source() string { return t.src }

// ErrTemplate marks every error that comes from the template itself: syntax
// errors, raise_exception and failures while rendering.
var ErrTemplate = errors.New("chat template")

// RaiseError is the error raise_exception(message) makes a template return.
type RaiseError struct{ Message string }

func (e *RaiseError) Error() string { return e.Message }

// maxSource bounds the size of a template; real ones are tens of kilobytes.
const maxSource = 1 << 20

// maxOutput bounds the size of a render, so a hostile template cannot make
// the process allocate without end.
const maxOutput = 64 << 20

// Parse compiles the Jinja2 source of a chat template.
func Parse(src string) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("%w: parse: internal error: %v", ErrTemplate, r)
		}
	}()
	if len(src) > maxSource {
		return nil, fmt.Errorf("%w: template is larger than %d bytes", ErrTemplate, maxSource)
	}
	rewritten, literals, err := rewriteSource(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	const name = "chat_template"
	loader, err := loaders.NewShiftedLoader(name, strings.NewReader(rewritten), loaders.MustNewMemoryLoader(map[string]string{}))
	if err != nil {
		return nil, err
	}
	tpl, err := exec.NewTemplate(name, jinjaConfig(), loader, environment)
	if err != nil {
		// gonja's message quotes the whole source before the parser's.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return nil, fmt.Errorf("%w: syntax error: %v", ErrTemplate, err)
	}
	if err := rewriteTree(tpl.Root()); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	return &Template{tpl: tpl, literals: literals, src: src}, nil
}

// jinjaConfig is Jinja2 configured as transformers configures it.
func jinjaConfig() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	return c
}

// renderState is per-render bookkeeping the template functions reach
// through the context.
type renderState struct {
	now        func() time.Time
	raised     *RaiseError // the first raise_exception, which ends the render
	failure    error       // the first error of a Python operation
	steps      int
	macroDepth int
}

const stateKey = "__chat_render_state"

// Render renders the template for in. Errors raised by the template, with
// raise_exception or otherwise, come back wrapped in ErrTemplate; it never
// panics.
func (t *Template) Render(in Input) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("%w: render: internal error: %v", ErrTemplate, r)
		}
	}()
	st := &renderState{now: in.Now}
	if st.now == nil {
		st.now = time.Now
	}
	vars, err := t.variables(in, st)
	if err != nil {
		return "", err
	}
	var b limitedBuilder
	if err := t.tpl.Execute(&b, exec.NewContext(vars)); err != nil {
		// gonja flattens the errors of template functions into strings, so
		// raise_exception leaves its error in the render state too.
		if st.raised != nil {
			return "", fmt.Errorf("%w: %w", ErrTemplate, st.raised)
		}
		if st.failure != nil {
			return "", fmt.Errorf("%w: %w", ErrTemplate, st.failure)
		}
		if errors.Is(err, errOutputTooLarge) {
			return "", fmt.Errorf("%w: %w", ErrTemplate, errOutputTooLarge)
		}
		return "", fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	// Python raises where gonja sometimes carries on (a failing loop filter,
	// say): any failure fails the render.
	if st.raised != nil {
		return "", fmt.Errorf("%w: %w", ErrTemplate, st.raised)
	}
	if st.failure != nil {
		return "", fmt.Errorf("%w: %w", ErrTemplate, st.failure)
	}
	return b.String(), nil
}

func (t *Template) variables(in Input, st *renderState) (map[string]any, error) {
	vars := map[string]any{}
	for k, v := range in.Extra {
		c, err := templateValue(v, 0)
		if err != nil {
			return nil, err
		}
		vars[k] = c
	}
	vars[stateKey] = st
	vars["add_generation_prompt"] = in.AddGenerationPrompt
	vars["bos_token"] = in.BOSToken
	vars["eos_token"] = in.EOSToken
	messages := make(pyList, len(in.Messages))
	for i, m := range in.Messages {
		c, err := templateValue(m, 0)
		if err != nil {
			return nil, err
		}
		messages[i] = c
	}
	vars["messages"] = messages
	if in.Tools != nil {
		c, err := templateValue(in.Tools, 0)
		if err != nil {
			return nil, err
		}
		vars["tools"] = c
	}
	for k, v := range t.literals {
		vars[k] = v
	}
	return vars, nil
}

var errOutputTooLarge = fmt.Errorf("output exceeds %d bytes", maxOutput)

// limitedBuilder collects the output and fails once it grows past maxOutput.
type limitedBuilder struct{ strings.Builder }

func (b *limitedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxOutput {
		return 0, errOutputTooLarge
	}
	return b.Builder.Write(p)
}

func (b *limitedBuilder) WriteString(s string) (int, error) {
	if b.Len()+len(s) > maxOutput {
		return 0, errOutputTooLarge
	}
	return b.Builder.WriteString(s)
}

var _ io.StringWriter = (*limitedBuilder)(nil)
