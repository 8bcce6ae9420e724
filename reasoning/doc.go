// Package reasoning separates a thinking model's reasoning from its answer as
// the output streams: Detect tells which format a chat template teaches (think
// tags, Granite 3.3's <think>/<response>, Command R7B's thinking and response
// blocks, gpt-oss's harmony channels), Markers the special tokens the decoder
// must write out for it, and a Parser turns the output into content,
// reasoning and (harmony) tool-call events.
package reasoning
