package backends

import (
	"fmt"
	"io"
	"math"

	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// TableSequence is what the sequences of backends whose KV cache is a
// kvcache block table share: the Sequence methods that only read or reset
// the table, and the adapter the sequence runs with. A backend's sequence
// embeds it and adds the methods that depend on the backend (ShareFrom,
// SetAdapter's fit check).
type TableSequence struct {
	// Table is the sequence's keys and values; nil once closed.
	Table *kvcache.BlockTable
	// Variant (0: none) marks keys and values that the backend computes
	// differently for this sequence whatever its adapter (native: LongRoPE's
	// long factors for a sequence longer than the original context), so
	// that only tables of the same variant share blocks. Set it with
	// NewTableSequence.
	Variant uint64
	// adapter (nil: none) is applied with its updates multiplied by scale.
	adapter *lora.Adapter
	scale   float32
}

// NewTableSequence is the sequence of table t, of the given variant (see
// TableSequence.Variant), in that variant's prefix namespace.
func NewTableSequence(t *kvcache.BlockTable, variant uint64) TableSequence {
	if variant != 0 {
		t.SetNamespace(RunNamespace(nil, 0, variant))
	}
	return TableSequence{Table: t, Variant: variant}
}

// Len implements Sequence.
func (s *TableSequence) Len() int {
	if s.Table == nil {
		return 0
	}
	return s.Table.Len()
}

// MaxLen implements Sequence.
func (s *TableSequence) MaxLen() int {
	if s.Table == nil {
		return 0
	}
	return s.Table.MaxLen()
}

// Tokens implements Sequence.
func (s *TableSequence) Tokens() []tokenizer.ID {
	if s.Table == nil {
		return nil
	}
	return s.Table.Tokens()
}

// Truncate implements Sequence.
func (s *TableSequence) Truncate(n int) error {
	if s.Table == nil {
		return ErrClosed
	}
	return s.Table.Truncate(n)
}

// Reuse implements Sequence: the sequence's own tokens or committed blocks
// of any sequence of the same pool, run with the same adapter and scale.
func (s *TableSequence) Reuse(tokens []tokenizer.ID, limit int) int {
	if s.Table == nil {
		return 0
	}
	return s.Table.Reuse(tokens, limit)
}

// Reset implements Sequence.
func (s *TableSequence) Reset() {
	if s.Table != nil {
		s.Table.Release()
	}
}

// CacheBytes implements Sequence.
func (s *TableSequence) CacheBytes() int64 {
	if s.Table == nil {
		return 0
	}
	return s.Table.Bytes()
}

// Close implements Sequence.
func (s *TableSequence) Close() error {
	if s.Table != nil {
		s.Table.Release()
	}
	s.Table, s.adapter = nil, nil
	return nil
}

// Adapter implements AdapterSequence.
func (s *TableSequence) Adapter() (*lora.Adapter, float32) { return s.adapter, s.scale }

// UseAdapter makes the tokens appended from now on run with a at scale,
// after the backend has checked that a fits; when the adapter or scale
// changes the table forgets its tokens and moves to the run's prefix
// namespace. It fails, changing nothing, on a closed sequence or a scale
// that is not finite.
func (s *TableSequence) UseAdapter(a *lora.Adapter, scale float32) error {
	if s.Table == nil {
		return ErrClosed
	}
	if a == nil {
		scale = 0
	} else if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return fmt.Errorf("backends: adapter scale %v is not finite", scale)
	}
	if a != s.adapter || scale != s.scale {
		s.Table.SetNamespace(RunNamespace(a, scale, s.Variant))
	}
	s.adapter, s.scale = a, scale
	return nil
}

// ShareTable makes s hold src's tokens and adapter, as Sequence.ShareFrom
// asks; the backend has checked that src is one of its own.
func (s *TableSequence) ShareTable(src *TableSequence) error {
	switch {
	case s.Table == nil:
		return ErrClosed
	case src.Table == nil:
		return fmt.Errorf("backends: share from a closed sequence")
	case src.Table.Pool() != s.Table.Pool():
		return fmt.Errorf("backends: share between KV caches of different precision")
	case src.Variant != s.Variant:
		return fmt.Errorf("backends: share between sequences whose keys are computed differently (variants %#x and %#x)", src.Variant, s.Variant)
	case src.Len() > s.MaxLen():
		return fmt.Errorf("backends: %d tokens to share do not fit in %d: %w", src.Len(), s.MaxLen(), ErrContextFull)
	}
	s.adapter, s.scale = src.adapter, src.scale
	s.Table.Share(src.Table)
	return nil
}

// RunNamespace is the prefix-index namespace of keys and values computed
// with adapter a at scale in a sequence of the given variant: 0 for the base
// model's plain run, else a's id, the scale's bits and the variant mixed,
// so that tables share blocks only with tables of the same run.
func RunNamespace(a *lora.Adapter, scale float32, variant uint64) uint64 {
	if a == nil && variant == 0 {
		return 0
	}
	h := variant * 0x2545f4914f6cdd1d
	if a != nil {
		h ^= a.ID()*0x9e3779b97f4a7c15 ^ uint64(math.Float32bits(scale))
	}
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	return h | 1
}

// SaveState implements StateSequence: the table's tokens, keys and values
// (kvcache's state). A sequence running an adapter is refused: its keys
// and values are the adapter's.
func (s *TableSequence) SaveState(w io.Writer) (int64, error) {
	switch {
	case s.Table == nil:
		return 0, ErrClosed
	case s.adapter != nil:
		return 0, fmt.Errorf("backends: the sequence runs the adapter %q; only the base model's cache is saved", s.adapter.Name)
	}
	return s.Table.WriteState(w)
}

// LoadState implements StateSequence; the sequence leaves its adapter
// first, so that the keys and values read are the base model's.
func (s *TableSequence) LoadState(r io.Reader) (int, int64, error) {
	if s.Table == nil {
		return 0, 0, ErrClosed
	}
	if err := s.UseAdapter(nil, 0); err != nil {
		return 0, 0, err
	}
	return s.Table.ReadState(r)
}
