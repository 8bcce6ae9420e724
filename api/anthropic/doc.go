// Package anthropic is Anthropic's Messages API on the wire: POST
// /v1/messages (whole or streamed as server-sent events with "event:"
// lines) and POST /v1/messages/count_tokens, so that Anthropic's SDKs and
// Claude Code pointed at the server (ANTHROPIC_BASE_URL) work. It decodes
// a request's content blocks into the session's chat messages (tool_use
// blocks as tool_calls, tool_result blocks as tool messages, thinking as
// reasoning_content), frames the session's events as content blocks
// (thinking, text, tool_use), and gives errors Anthropic's shape and
// statuses. docs/anthropic.md says what is supported.
package anthropic
