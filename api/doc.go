// Package api is the HTTP server: chi routes, the middleware a public
// server needs (request ids, access log, auth, body limits, panic recovery,
// CORS), /health and Prometheus /metrics, the server's own routes (models,
// LoRA adapters, feedback, tokenize), and one line per protocol whose wire
// package (api/openai, ...) decodes requests into the protocol-neutral
// session (package session) and frames its events.
package api
