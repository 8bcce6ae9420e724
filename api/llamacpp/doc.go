// Package llamacpp is llama-server's own wire format: its native
// completion (POST /completion and /completions: llama-server's request
// fields, token and mixed prompts, per-token streaming with token ids,
// completion_probabilities, timings, response_fields), GET /props, GET
// /slots and the slot actions (save, restore and erase a slot's KV cache
// under --slot-save-path), and POST /apply-template. It decodes requests
// into the protocol-neutral session and writes errors in llama-server's
// shape, {"error": {"code", "message", "type"}}. llama-server's habits on
// the OpenAI routes live in api/openai. See docs/llama-server.md.
package llamacpp
