package native

import (
	"fmt"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kvcache"
)

// kvBlockTokens is the positions of one block of the KV pools: attnPad, so
// that the padded length attention runs its value dot products over always
// ends at a block's end, and the dot products over a row's pieces carry
// their accumulators exactly as over llama.cpp's contiguous cache.
const kvBlockTokens = attnPad

// sequence is a token stream of a Backend: a block table of one of its KV
// pools.
type sequence struct {
	backends.TableSequence
	owner *Backend
	call  uint64 // the last Forward call that named this sequence
	// long says the sequence may grow past the model's original context
	// and so takes LongRoPE's long factors (llama.cpp's n_ctx_seq >
	// n_ctx_orig); always false for a model without them. Its keys are
	// the TableSequence's variant longVariant.
	long bool
}

// longVariant is the TableSequence variant of sequences rotated by
// LongRoPE's long factors.
const longVariant = 1

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
	b.growAttention(n, p.Tiered())
	long := b.longRotary > 0 && n > b.cfg.RopeOrigCtx
	var variant uint64
	if long {
		variant = longVariant
	}
	return &sequence{owner: b, TableSequence: backends.NewTableSequence(t, variant), long: long}, nil
}

// kvPrecisions is the number of KV precisions, the pools a backend may make.
const kvPrecisions = int(kvcache.Tiered) + 1

// kvPool is the backend's pool of precision kv, made at its first use.
func (b *Backend) kvPool(kv kvcache.Precision) (*kvcache.Pool, error) {
	if kv < 0 || int(kv) >= kvPrecisions {
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
		Sequences:   b.kvSeqs,
	}
	if kv == kvcache.Tiered {
		o.HotTokens, o.WarmTokens = b.kvHot, b.kvWarm
	}
	if kv.Quantized() {
		// A pass writes every block of its tokens exactly: one pass's
		// worth (a block more for each sequence's start and end in a
		// block), and each sequence's hot blocks.
		seqs := max(b.kvSeqs, 1)
		o.HotSlots = (b.maxBatch+kvBlockTokens-1)/kvBlockTokens + 2*seqs + seqs*((b.kvHot+kvBlockTokens-1)/kvBlockTokens+1)
	}
	if o.Bytes == 0 {
		tokens := b.kvTokens
		if tokens == 0 {
			tokens = b.cfg.ContextLength
		}
		o.Blocks = (tokens + kvBlockTokens - 1) / kvBlockTokens
	}
	if b.kvStore != nil && kv != kvcache.F32 {
		s, err := b.openStore(o)
		if err != nil {
			return nil, err
		}
		o.Store, o.StoreKey = s, b.storeKey(o)
		b.storeKeys[kv] = o.StoreKey
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
		s.F32Blocks += ps.F32Blocks
		s.F16Blocks += ps.F16Blocks
		s.Q8Blocks += ps.Q8Blocks
		s.Q4Blocks += ps.Q4Blocks
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
		s.SpilledBlocks += ps.SpilledBlocks
		s.RestoredBlocks += ps.RestoredBlocks
		s.StoreHitTokens += ps.StoreHitTokens
		s.StoreMissTokens += ps.StoreMissTokens
		s.Restores += ps.Restores
		s.RestoreSeconds += ps.RestoreSeconds
		for i := range s.RestoreBuckets {
			s.RestoreBuckets[i] += ps.RestoreBuckets[i]
		}
		s.StoreTokenMismatches += ps.StoreTokenMismatches
		// The pools share one store: its state counts once.
		s.Store = ps.Store
		s.Evictions += ps.Evictions
		s.Copies += ps.Copies
		s.Dedups += ps.Dedups
	}
	return s
}

// ShareFrom implements backends.Sequence by sharing src's blocks.
func (s *sequence) ShareFrom(src backends.Sequence) error {
	o, ok := src.(*sequence)
	if !ok || o.owner != s.owner {
		return fmt.Errorf("native: share from a sequence of another backend")
	}
	return s.ShareTable(&o.TableSequence)
}
