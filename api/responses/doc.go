// Package responses is OpenAI's Responses API (POST /v1/responses, GET and
// DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items), the wire
// format Codex CLI and the OpenAI Agents SDK speak. A request's input items
// (messages, function calls and their outputs, reasoning) become the chat
// of a session request; the session's events become output items
// (reasoning, message, function_call), sent whole or as the API's typed
// server-sent events. A stored response keeps the conversation's items so
// that previous_response_id continues it, in memory or as one JSON file per
// response in a directory. Errors have OpenAI's shape.
package responses
