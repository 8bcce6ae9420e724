// Package session is the protocol-neutral generation session behind every
// wire format the server speaks and the command line: a neutral Request
// (messages or prompts, tools, a constraint, sampling, adapter, template
// kwargs, reasoning options, stops) goes in, and a stream of neutral Events
// (text, reasoning, tool calls, logprobs, finish) comes out, which each
// protocol frames its own way. It owns the served models: resolving a
// request's "model" (adapters, the router's "auto"), loading models on
// demand, and keeping finished completions for feedback.
package session
