package native

import (
	"fmt"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
)

// sequence is a token stream of a Backend and its KV cache.
type sequence struct {
	owner  *Backend
	cache  *kvcache.Cache // nil once closed
	tokens []int          // the cached tokens; capacity MaxLen
	call   uint64         // the last Forward call that named this sequence
	// adapter (nil: none) is applied to the sequence's tokens with its
	// updates multiplied by adapterScale.
	adapter      *lora.Adapter
	adapterScale float32
}

// NewSequence makes an empty sequence with a KV cache for opts.MaxLen tokens
// (the model's trained context when 0, and never more than it).
func (b *Backend) NewSequence(opts backends.SequenceOptions) (backends.Sequence, error) {
	if b.closed {
		return nil, backends.ErrClosed
	}
	n := opts.MaxLen
	if n == 0 {
		n = b.cfg.ContextLength
	}
	if n < 0 || n > b.cfg.ContextLength {
		return nil, fmt.Errorf("native: sequence length %d is outside 1 … %d, the model's context length", n, b.cfg.ContextLength)
	}
	// The cache holds a whole number of attnPad positions, as llama.cpp's
	// does, so that attention can always run over the padded length.
	c, err := kvcache.New(kvcache.Options{
		Layers:  b.cfg.Layers,
		KVHeads: b.cfg.KVHeads,
		HeadDim: b.cfg.HeadDim,
		MaxLen:  (n + attnPad - 1) / attnPad * attnPad,
		Type:    opts.KV,
	})
	if err != nil {
		return nil, err
	}
	b.growAttention(n)
	return &sequence{owner: b, cache: c, tokens: make([]int, 0, n)}, nil
}

func (s *sequence) Len() int { return len(s.tokens) }

func (s *sequence) MaxLen() int { return cap(s.tokens) }

func (s *sequence) Tokens() []int { return s.tokens }

func (s *sequence) Truncate(n int) error {
	if s.cache == nil {
		return backends.ErrClosed
	}
	if err := s.cache.Truncate(n); err != nil {
		return err
	}
	s.tokens = s.tokens[:n]
	return nil
}

func (s *sequence) Reset() {
	if s.cache != nil {
		s.cache.Reset()
	}
	s.tokens = s.tokens[:0]
}

func (s *sequence) CacheBytes() int64 {
	if s.cache == nil {
		return 0
	}
	return s.cache.Bytes()
}

func (s *sequence) Close() error {
	s.cache = nil
	s.tokens = nil
	s.adapter = nil
	return nil
}
