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
	// CommandR is Command R7B's blocks:
	// <|START_THINKING|>reasoning<|END_THINKING|><|START_RESPONSE|>answer<|END_RESPONSE|>.
	CommandR
)

func (f Format) String() string {
	switch f {
	case Think:
		return "think"
	case Granite:
		return "granite"
	case Harmony:
		return "harmony"
	case CommandR:
		return "command-r7b"
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

	crThinkOpen     = "<|START_THINKING|>"
	crThinkClose    = "<|END_THINKING|>"
	crResponseOpen  = "<|START_RESPONSE|>"
	crResponseClose = "<|END_RESPONSE|>"
	// crGenerationPrompt ends Command R7B's generation prompt: its
	// thinking, unlike the think tags, is not opened by the template.
	crGenerationPrompt = "<|CHATBOT_TOKEN|>"
)

// tagSet are the markers of a format that writes its reasoning (and, for
// some, its answer) as blocks between tags.
type tagSet struct {
	thinkOpen, thinkClose, responseOpen, responseClose string
}

// tags are the format's block markers.
func (f Format) tags() tagSet {
	if f == CommandR {
		return tagSet{crThinkOpen, crThinkClose, crResponseOpen, crResponseClose}
	}
	return tagSet{thinkOpen, thinkClose, responseOpen, responseClose}
}

// blocks reports whether the format writes blocks of tags (rather than
// harmony's channels, or nothing).
func (f Format) blocks() bool { return f == Think || f == Granite || f == CommandR }

// Detect tells the reasoning format a chat template teaches from its
// source: harmony's channels, Command R7B's thinking and response blocks,
// Granite's <response> beside <think>, or think tags. A template that
// writes none of them gets None.
func Detect(template string) Format {
	switch {
	case strings.Contains(template, hChannel) && strings.Contains(template, hMessage):
		return Harmony
	case strings.Contains(template, crThinkOpen) && strings.Contains(template, crResponseOpen):
		return CommandR
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
	case CommandR:
		return []string{crThinkOpen, crThinkClose, crResponseOpen, crResponseClose}
	}
	return nil
}
