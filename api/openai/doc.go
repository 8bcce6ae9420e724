// Package openai is the OpenAI wire format: chat and text completions
// (with SSE streaming) and embeddings, with the fields vLLM and
// llama-server add to them (guided decoding, GBNF grammars, template
// kwargs, sampling extras). It decodes requests into session requests and
// frames the session's events as OpenAI's chunks; errors have OpenAI's
// shape, {"error": {"message", "type", "param", "code"}}.
package openai
