// Package ollama is ollama's native API (/api/chat, /api/generate,
// /api/tags, /api/show, /api/ps, /api/embed, /api/pull, /api/version) over
// the served models, so that ollama's own clients and the apps built on
// them work against this server. It decodes requests into session requests
// (ollama's options become sampling settings, format an output
// constraint, think the reasoning options) and frames the session's
// events as ollama's newline-delimited JSON chunks, with the final chunk's
// durations measured from the session's timings. Errors have ollama's
// shape, {"error": "message"}. docs/ollama.md says what differs from
// ollama.
package ollama
