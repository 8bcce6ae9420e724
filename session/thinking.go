package session

import "github.com/ruvllm/ruvllm/reasoning"

// thinkStyle is how a model's template thinks: the reasoning format it
// teaches (think tags, Granite's response tags, gpt-oss's harmony
// channels), or none.
type thinkStyle struct{ format reasoning.Format }

func detectThinking(src string) thinkStyle { return thinkStyle{format: reasoning.Detect(src)} }

// thinks reports whether the model's output holds reasoning to separate.
func (ts thinkStyle) thinks() bool { return ts.format != reasoning.None }

// markers are the special tokens the parser must see in the text.
func (ts thinkStyle) markers() []string { return ts.format.Markers() }

// parser starts parsing a choice whose prompt is prompt: the prompt tells
// whether the output starts inside the reasoning.
func (ts thinkStyle) parser(prompt string) *reasoning.Parser { return ts.format.NewParser(prompt) }
