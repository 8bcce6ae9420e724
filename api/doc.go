// Package api serves loaded models over OpenAI's HTTP API, the request's
// "model" picking which (or which adapter of one): chat and text
// completions (with SSE streaming), models, embeddings, LoRA adapters
// (upload, list, delete, vLLM's load and unload), llama-server's tokenize
// and detokenize, health and Prometheus metrics. It turns requests
// into engine requests and engine events into OpenAI-shaped responses and
// errors, with the middleware a public server needs (request ids, access
// log, auth, body limits, panic recovery, CORS).
package api
