package gorgonia

import (
	"fmt"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/lora"
)

// sequence is a token stream of a Backend: a block table of one of its KV
// pools, and the adapter its tokens run with.
type sequence struct {
	backends.TableSequence
	owner *Backend
	call  uint64
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
	return &sequence{owner: b, TableSequence: backends.TableSequence{Table: t}}, nil
}

// past gathers every cached key and value of the sequence.
func (s *sequence) past() pastKV {
	c := s.owner.m.cfg
	n := s.Table.Len()
	p := pastKV{n: n}
	if n == 0 {
		return p
	}
	row := c.KVHeads * c.HeadDim
	p.k, p.v = make([][]float32, c.Layers), make([][]float32, c.Layers)
	for l := range c.Layers {
		p.k[l], p.v[l] = make([]float32, n*row), make([]float32, n*row)
		gatherPast(s.Table, l, n, p.k[l], p.v[l])
	}
	return p
}

// ShareFrom implements backends.Sequence by sharing src's blocks.
func (s *sequence) ShareFrom(src backends.Sequence) error {
	o, ok := src.(*sequence)
	if !ok || o.owner != s.owner {
		return fmt.Errorf("gorgonia: share from a sequence of another backend")
	}
	return s.ShareTable(&o.TableSequence)
}

// SetAdapter implements backends.AdapterSequence.
func (s *sequence) SetAdapter(a *lora.Adapter, scale float32) error {
	if s.Table == nil {
		return backends.ErrClosed
	}
	if a != nil {
		if err := s.owner.fitAdapter(a); err != nil {
			return err
		}
	}
	return s.UseAdapter(a, scale)
}
