package session

import "testing"

// A choice's token limit: the request's, clamped to the context when it
// asks so; without one, the context left, stopping at the end of the
// trained context for a prompt within it.
func TestChoiceLimit(t *testing.T) {
	for _, tc := range []struct {
		maxTokens, trained, prompt, maxLen int
		clamp                              bool
		want                               int
	}{
		{0, 0, 10, 256, false, 246},
		{0, 128, 10, 256, false, 118},  // the trained context ends first
		{0, 128, 200, 256, false, 56},  // a prompt past it: the context
		{0, 2048, 10, 256, false, 246}, // trained longer than the slot
		{50, 128, 10, 256, false, 50},  // the request's own limit
		{500, 0, 10, 256, true, 246},   // clamped to the context
		{500, 0, 255, 256, true, 1},    // at least one
		{500, 0, 10, 256, false, 500},  // not clamped: the caller refuses it
	} {
		g := &Generation{req: &Request{MaxTokens: tc.maxTokens, FitMaxTokens: tc.clamp}, model: &Model{TrainedContext: tc.trained}}
		if got := g.choiceLimit(tc.prompt, tc.maxLen); got != tc.want {
			t.Errorf("%+v: %d", tc, got)
		}
	}
}
