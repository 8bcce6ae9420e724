package native

import (
	"fmt"
	"math"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// kvBlockTokens is the positions of one block of the KV pools: attnPad, so
// that the padded length attention runs its value dot products over always
// ends at a block's end, and the dot products over a row's pieces carry
// their accumulators exactly as over llama.cpp's contiguous cache.
const kvBlockTokens = attnPad

// sequence is a token stream of a Backend: a block table of one of its KV
// pools.
type sequence struct {
	owner *Backend
	table *kvcache.BlockTable // nil once closed
	call  uint64              // the last Forward call that named this sequence
	// adapter (nil: none) is applied to the sequence's tokens with its
	// updates multiplied by adapterScale.
	adapter      *lora.Adapter
	adapterScale float32
}

// NewSequence makes an empty sequence of up to opts.MaxLen tokens (the
// model's trained context when 0) in the backend's KV pool of precision
// opts.KV, which the first sequence of that precision allocates
// (Options.KVBytes or KVTokens). A sequence may be longer than the trained
// context, as llama.cpp allows, when the pool holds it; the model's quality
// past its training is the caller's to weigh.
func (b *Backend) NewSequence(opts backends.SequenceOptions) (backends.Sequence, error) {
	if b.closed {
		return nil, backends.ErrClosed
	}
	n := opts.MaxLen
	if n == 0 {
		n = b.cfg.ContextLength
	}
	if n < 0 {
		return nil, fmt.Errorf("native: sequence length %d is negative", n)
	}
	p, err := b.kvPool(opts.KV)
	if err != nil {
		return nil, err
	}
	t, err := p.NewTable(n)
	if err != nil {
		return nil, fmt.Errorf("native: %w (raise the KV memory)", err)
	}
	b.growAttention(n)
	return &sequence{owner: b, table: t}, nil
}

// kvPool is the backend's pool of precision kv, made at its first use.
func (b *Backend) kvPool(kv kvcache.Precision) (*kvcache.Pool, error) {
	if kv != kvcache.F16 && kv != kvcache.F32 {
		return nil, fmt.Errorf("native: unknown KV precision %d", int(kv))
	}
	if p := b.kv[kv]; p != nil {
		return p, nil
	}
	o := kvcache.PoolOptions{
		Layers:      b.cfg.Layers,
		KVHeads:     b.cfg.KVHeads,
		HeadDim:     b.cfg.HeadDim,
		BlockTokens: kvBlockTokens,
		Type:        kv,
		Bytes:       b.kvBytes,
	}
	if o.Bytes == 0 {
		tokens := b.kvTokens
		if tokens == 0 {
			tokens = b.cfg.ContextLength
		}
		o.Blocks = (tokens + kvBlockTokens - 1) / kvBlockTokens
	}
	p, err := kvcache.NewPool(o)
	if err != nil {
		return nil, fmt.Errorf("native: KV pool: %w", err)
	}
	b.kv[kv] = p
	return p, nil
}

// KVStats reports the state of the backend's KV pools, summed; a pool not
// made yet counts nothing.
func (b *Backend) KVStats() kvcache.Stats {
	var s kvcache.Stats
	for _, p := range b.kv {
		if p == nil {
			continue
		}
		ps := p.Stats()
		s.BlockTokens, s.BlockBytes = ps.BlockTokens, max(s.BlockBytes, ps.BlockBytes)
		s.Blocks += ps.Blocks
		s.UsedBlocks += ps.UsedBlocks
		s.SharedBlocks += ps.SharedBlocks
		s.CachedBlocks += ps.CachedBlocks
		s.FreeBlocks += ps.FreeBlocks
		s.TotalBytes += ps.TotalBytes
		s.UsedBytes += ps.UsedBytes
		s.CachedBytes += ps.CachedBytes
		s.FreeBytes += ps.FreeBytes
		s.HitTokens += ps.HitTokens
		s.MissTokens += ps.MissTokens
		s.Evictions += ps.Evictions
		s.Copies += ps.Copies
		s.Dedups += ps.Dedups
	}
	return s
}

func (s *sequence) Len() int {
	if s.table == nil {
		return 0
	}
	return s.table.Len()
}

func (s *sequence) MaxLen() int {
	if s.table == nil {
		return 0
	}
	return s.table.MaxLen()
}

func (s *sequence) Tokens() []tokenizer.ID {
	if s.table == nil {
		return nil
	}
	return s.table.Tokens()
}

func (s *sequence) Truncate(n int) error {
	if s.table == nil {
		return backends.ErrClosed
	}
	return s.table.Truncate(n)
}

// Reuse implements backends.Sequence: the sequence's own tokens or
// committed blocks of any sequence of the same pool, run with the same
// adapter and scale.
func (s *sequence) Reuse(tokens []tokenizer.ID, limit int) int {
	if s.table == nil {
		return 0
	}
	return s.table.Reuse(tokens, limit)
}

// ShareFrom implements backends.Sequence by sharing src's blocks.
func (s *sequence) ShareFrom(src backends.Sequence) error {
	o, ok := src.(*sequence)
	switch {
	case s.table == nil:
		return backends.ErrClosed
	case !ok || o.owner != s.owner || o.table == nil:
		return fmt.Errorf("native: share from a sequence of another backend or a closed one")
	case o.table.Pool() != s.table.Pool():
		return fmt.Errorf("native: share between KV caches of different precision")
	case o.Len() > s.MaxLen():
		return fmt.Errorf("native: %d tokens to share do not fit in %d: %w", o.Len(), s.MaxLen(), backends.ErrContextFull)
	}
	s.adapter, s.adapterScale = o.adapter, o.adapterScale
	s.table.Share(o.table)
	return nil
}

func (s *sequence) Reset() {
	if s.table != nil {
		s.table.Release()
	}
}

func (s *sequence) CacheBytes() int64 {
	if s.table == nil {
		return 0
	}
	return s.table.Bytes()
}

func (s *sequence) Close() error {
	if s.table != nil {
		s.table.Release()
	}
	s.table = nil
	s.adapter = nil
	return nil
}

// namespace is the prefix-index namespace of keys and values computed with
// adapter a at scale: 0 for the base model, else a's id and the scale's bits
// mixed, so that tables share blocks only with tables of the same run.
func namespace(a *lora.Adapter, scale float32) uint64 {
	if a == nil {
		return 0
	}
	h := a.ID()*0x9e3779b97f4a7c15 ^ uint64(math.Float32bits(scale))
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	return h | 1
}
