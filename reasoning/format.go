package reasoning

import "strings"

// Format is how a model family writes its reasoning in its output.
type Format int

// The formats.
const (
	// None is a model that does not think: its output is all content.
	None Format = iota
	// Think is <think>reasoning</think>answer (Qwen3, QwQ, DeepSeek-R1 and
	// its distills, DeepSeek-V3.1 in thinking mode). A generation prompt
	// that ends with <think> has opened the block for the model, which then
	// writes only </think>.
	Think
	// Granite is Granite 3.3 with thinking=True:
	// <think>reasoning</think><response>answer</response>.
	Granite
	// Harmony is gpt-oss's channels: reasoning on the analysis channel,
	// the answer on final (and commentary without a recipient, a preamble),
	// tool calls as messages to=functions.NAME.
	Harmony
)

func (f Format) String() string {
	switch f {
	case Think:
		return "think"
	case Granite:
		return "granite"
	case Harmony:
		return "harmony"
	}
	return "none"
}

// The markers of the formats, spelled once.
const (
	thinkOpen     = "<think>"
	thinkClose    = "</think>"
	responseOpen  = "<response>"
	responseClose = "</response>"

	hStart     = "<|start|>"
	hChannel   = "<|channel|>"
	hConstrain = "<|constrain|>"
	hMessage   = "<|message|>"
	hEnd       = "<|end|>"
	// <|call|> and <|return|> end generation (the engine stops on them),
	// but a message ends there too if they are in the text.
	hCall   = "<|call|>"
	hReturn = "<|return|>"
)

// Detect tells the reasoning format a chat template teaches from its
// source: harmony's channels, Granite's <response> beside <think>, or think
// tags. A template that writes none of them gets None.
func Detect(template string) Format {
	switch {
	case strings.Contains(template, hChannel) && strings.Contains(template, hMessage):
		return Harmony
	case strings.Contains(template, thinkOpen) && strings.Contains(template, responseOpen):
		return Granite
	case strings.Contains(template, thinkOpen) || strings.Contains(template, thinkClose):
		return Think
	}
	return None
}

// Markers are the texts of the special tokens the format's parser must see
// in the output: the decoder has to write them out even when the vocabulary
// has them as control tokens. The end-of-generation tokens (harmony's
// <|call|> and <|return|>) are not among them.
func (f Format) Markers() []string {
	switch f {
	case Think:
		return []string{thinkOpen, thinkClose}
	case Granite:
		return []string{thinkOpen, thinkClose, responseOpen, responseClose}
	case Harmony:
		return []string{hStart, hChannel, hConstrain, hMessage, hEnd}
	}
	return nil
}
