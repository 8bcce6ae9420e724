package serving

import (
	"fmt"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models"
)

// Spec configures speculative decoding for every model served.
type Spec struct {
	// Source is the draft source; Max, Min and MaxBatchTokens are the
	// engine's SpecOptions of the same names.
	Source         backends.SpecSource
	Max, Min       int
	MaxBatchTokens int
	// Chosen says the source was asked for (--spec or --draft), so that
	// SmallSpecModel does not turn it off.
	Chosen bool
	// Draft is the draft model of the draft source ("" for none);
	// DraftThreads its forward pass's threads (0: the model's).
	Draft        string
	DraftThreads int
}

// SmallSpecModel is the size of weights below which the default source
// is off: a model that small is not bound by reading its weights (they
// stay in the CPU's caches), so a pass over k+1 tokens costs nearly k+1
// passes, and drafts cost more than they save. stories260K (1 MB) lost
// 10–13% with drafts that were accepted half the time; llama-134m (82 MB)
// gained 2.11× (docs/speculative.md). The line between is not measured.
const SmallSpecModel = 16 << 20

// For is the engine's SpecOptions for model m, with the draft model d
// (nil without one). Unless the source was chosen, a model smaller than
// SmallSpecModel drafts nothing.
func (s Spec) For(m *models.Model, d backends.Backend) backends.SpecOptions {
	src := s.Source
	if src == backends.SpecDefault || !s.Chosen && m != nil && weightBytes(m) < SmallSpecModel {
		src = backends.SpecOff
	}
	return backends.SpecOptions{Source: src, Max: s.Max, Min: s.Min, MaxBatchTokens: s.MaxBatchTokens, Draft: d}
}

// weightBytes is the size of m's tensors.
func weightBytes(m *models.Model) uint64 {
	var n uint64
	if m.File != nil {
		for _, t := range m.File.Tensors {
			n += t.Size
		}
	}
	return n
}

// SameVocab reports how the draft model's vocabulary differs from the
// target's; drafts are token ids, so they must mean the same tokens.
func SameVocab(target, draft *models.Model) error {
	if target.Tokenizer == nil || draft.Tokenizer == nil {
		return fmt.Errorf("a model has no vocabulary")
	}
	a, b := target.Tokenizer.Vocab().Tokens, draft.Tokenizer.Vocab().Tokens
	if len(a) != len(b) {
		return fmt.Errorf("its vocabulary has %d tokens, the model's %d: a draft model needs the same vocabulary", len(b), len(a))
	}
	for i := range a {
		if a[i] != b[i] {
			return fmt.Errorf("token %d is %q in it, %q in the model: a draft model needs the same vocabulary", i, b[i], a[i])
		}
	}
	return nil
}
