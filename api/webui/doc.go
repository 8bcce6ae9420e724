// Package webui is the chat page served at / (as llama-server serves one):
// plain HTML, CSS and JavaScript embedded in the binary, with no build step
// and nothing loaded from elsewhere. The page talks to the server's own
// OpenAI routes (/v1/models, /v1/chat/completions, streamed), so that a
// user can try a model in a browser without a client; model output is
// rendered by the page's own small Markdown renderer, which builds DOM
// nodes and never parses model text as HTML.
package webui
