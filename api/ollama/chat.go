package ollama

import (
	"encoding/json"
	"net/http"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// chat serves POST /api/chat: the next message of a chat, streamed by
// default. An empty chat loads the model (keep_alive 0: unloads it).
func (a *API) chat(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	g, err := a.parseGen(r, f, "/api/chat")
	if err != nil {
		return err
	}
	msgs, err := parseMessages(f, g.name)
	if err != nil {
		return err
	}
	if g.req.Tools, err = parseTools(f); err != nil {
		return err
	}
	fm := frame{name: g.name}
	if len(msgs) == 0 {
		return a.loadOnly(w, r, g, fm)
	}
	g.req.Messages = msgs
	if err := g.applyThink(); err != nil {
		return err
	}
	return a.run(w, r, g, fm)
}

// generate serves POST /api/generate: a completion of a prompt, rendered
// with the model's chat template as a user message (after the system one)
// unless raw; context, an earlier response's, goes before it. An empty
// prompt loads the model (keep_alive 0: unloads it).
func (a *API) generate(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	g, err := a.parseGen(r, f, "/api/generate")
	if err != nil {
		return err
	}
	prompt, _, err := f.Str("prompt")
	if err != nil {
		return err
	}
	system, _, err := f.Str("system")
	if err != nil {
		return err
	}
	raw, _, err := f.Bool("raw")
	if err != nil {
		return err
	}
	tmpl, _, err := f.Str("template")
	if err != nil {
		return err
	}
	suffix, _, err := f.Str("suffix")
	if err != nil {
		return err
	}
	if err := refuseImages(f, g.name); err != nil {
		return err
	}
	var context []tokenizer.ID
	if v, ok := f.Raw("context"); ok {
		if err := json.Unmarshal(v, &context); err != nil {
			return f.TypeError("context", "an array of token ids")
		}
	}
	switch {
	case suffix != "":
		return session.Unsupported("suffix", "%q does not support insert", g.name)
	case raw && (tmpl != "" || system != "" || len(context) > 0):
		return session.Invalid("raw", session.CodeInvalidValue, "raw mode does not support template, system, or context")
	case tmpl != "":
		return session.Unsupported("template", "template is not supported: this server renders the model's own chat template "+
			"(GET /api/show shows it); to template the prompt yourself, send it with raw true")
	}
	fm := frame{name: g.name, generate: true, context: !raw}
	if prompt == "" {
		return a.loadOnly(w, r, g, fm)
	}
	m := g.target.Model
	if !raw && (m == nil || m.Chat != nil) {
		if system != "" {
			g.req.Messages = append(g.req.Messages, session.Message{"role": "system", "content": system})
		}
		g.req.Messages = append(g.req.Messages, session.Message{"role": "user", "content": prompt})
		if err := g.applyThink(); err != nil {
			return err
		}
	} else {
		// A model without a chat template takes the prompt as it is, as
		// ollama's default template ({{ .Prompt }}) gives it.
		if g.think != nil && g.think.on && m != nil && !m.Thinks() {
			return session.Invalid("think", session.CodeUnsupported, "%q does not support thinking", g.name)
		}
		if system != "" {
			prompt = system + "\n\n" + prompt
		}
		g.req.Prompts = []session.Prompt{{Text: prompt}}
	}
	g.req.Prefix = context
	return a.run(w, r, g, fm)
}

// loadOnly answers a request with nothing to generate: it loads the model
// (for the request's keep-alive), or with keep_alive 0 unloads it as soon
// as no request uses it, answering one final chunk done "load" or
// "unload".
func (a *API) loadOnly(w http.ResponseWriter, r *http.Request, g *genRequest, fm frame) error {
	m := g.target.Model
	reason := "load"
	if g.keepAliveZero {
		reason = "unload"
		if m != nil {
			a.Models.Expire(m)
		}
	} else if m != nil {
		release, err := a.Models.Hold(r.Context(), m)
		if err != nil {
			return err
		}
		release(g.req.KeepAlive)
	}
	jsonhttp.WriteJSON(w, http.StatusOK, fm.chunk(part{done: true, reason: reason}))
	return nil
}
