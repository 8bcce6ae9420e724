package gorgonia

import (
	"fmt"
	"math"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// sequence is a token stream of a Backend: a block table of one of its KV
// pools, and the adapter its tokens run with.
type sequence struct {
	owner        *Backend
	table        *kvcache.BlockTable // nil once closed
	call         uint64
	adapter      *lora.Adapter
	adapterScale float32
}

var _ backends.AdapterSequence = (*sequence)(nil)

// NewSequence makes an empty sequence of up to opts.MaxLen tokens (the
// model's trained context when 0) in the pool of precision opts.KV.
func (b *Backend) NewSequence(opts backends.SequenceOptions) (backends.Sequence, error) {
	if b.closed {
		return nil, backends.ErrClosed
	}
	n := opts.MaxLen
	if n == 0 {
		n = b.m.cfg.ContextLength
	}
	if n < 0 {
		return nil, fmt.Errorf("gorgonia: sequence length %d is negative", n)
	}
	p, err := b.kvPool(opts.KV)
	if err != nil {
		return nil, err
	}
	t, err := p.NewTable(n)
	if err != nil {
		return nil, fmt.Errorf("gorgonia: %w (raise the KV memory)", err)
	}
	return &sequence{owner: b, table: t}, nil
}

// past gathers every cached key and value of the sequence.
func (s *sequence) past() pastKV {
	c := s.owner.m.cfg
	n := s.table.Len()
	p := pastKV{n: n}
	if n == 0 {
		return p
	}
	row := c.KVHeads * c.HeadDim
	p.k, p.v = make([][]float32, c.Layers), make([][]float32, c.Layers)
	for l := range c.Layers {
		p.k[l], p.v[l] = make([]float32, n*row), make([]float32, n*row)
		gatherPast(s.table, l, n, p.k[l], p.v[l])
	}
	return p
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
		return fmt.Errorf("gorgonia: share from a sequence of another backend or a closed one")
	case o.table.Pool() != s.table.Pool():
		return fmt.Errorf("gorgonia: share between KV caches of different precision")
	case o.Len() > s.MaxLen():
		return fmt.Errorf("gorgonia: %d tokens to share do not fit in %d: %w", o.Len(), s.MaxLen(), backends.ErrContextFull)
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
	s.table, s.adapter = nil, nil
	return nil
}

// SetAdapter implements backends.AdapterSequence.
func (s *sequence) SetAdapter(a *lora.Adapter, scale float32) error {
	if s.table == nil {
		return backends.ErrClosed
	}
	if a == nil {
		scale = 0
	} else {
		if err := checkScale(scale); err != nil {
			return err
		}
		if err := s.owner.fitAdapter(a); err != nil {
			return err
		}
	}
	if a != s.adapter || scale != s.adapterScale {
		s.table.SetNamespace(namespace(a, scale))
	}
	s.adapter, s.adapterScale = a, scale
	return nil
}

// Adapter implements backends.AdapterSequence.
func (s *sequence) Adapter() (*lora.Adapter, float32) { return s.adapter, s.adapterScale }

// namespace is the prefix-index namespace of keys and values computed with
// adapter a at scale, 0 for the base model.
func namespace(a *lora.Adapter, scale float32) uint64 {
	if a == nil {
		return 0
	}
	h := a.ID()*0x9e3779b97f4a7c15 ^ uint64(math.Float32bits(scale))
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	return h | 1
}
