package native

import (
	"fmt"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/lora"
)

// LoRA adapters run next to the base weights, never merged into them: after
// a linear layer's matrix product over the whole pass, each run of rows whose
// sequence has an adapter gets that adapter's low-rank update added,
// y += scale·s·B·(A·x). Rows of one sequence are contiguous in a pass and
// runs of consecutive sequences sharing an adapter are merged, so the rows
// are grouped by adapter; the update of a row depends on that row alone, so a
// sequence's outputs do not depend on what else is in the batch.

// adapterRun is a run of consecutive rows of a pass that share an adapter.
type adapterRun struct {
	a     *lora.Adapter
	scale float32
	row0  int // first row in the buffers the run's linear layers read and write
	n     int
}

var _ backends.AdapterSequence = (*sequence)(nil)

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
	if err := s.UseAdapter(a, scale); err != nil {
		return err
	}
	if a != nil && s.owner.kvStore != nil && s.Variant == 0 {
		// The adapter's blocks chain in the store from a key of the
		// pool's, the adapter's digest and the scale. A sequence of
		// another variant (LongRoPE's long factors) computes other keys
		// for the same tokens: it stays out of the store.
		if k, ok := s.owner.storeKeys[s.Table.Pool().Type()]; ok {
			s.Table.SetStoreNamespace(adapterStoreKey(k, a, scale))
		}
	}
	return nil
}

// fitAdapter checks that every update of a has the shape of a matrix the
// forward pass multiplies by, and grows the adapter scratch for it.
func (b *Backend) fitAdapter(a *lora.Adapter) error {
	if b.byName == nil {
		b.byName = map[string]*matrix{}
		for _, m := range b.w.matrices() {
			if m != b.w.output || !b.cfg.TiedOutput { // a tied output is token_embd: not a target
				b.byName[m.name] = m
			}
		}
	}
	for _, t := range a.Targets() {
		m, ok := b.byName[t.Name]
		if !ok && b.isExperts(t.Name) {
			return fmt.Errorf("native: adapter %q updates %s, the experts of a mixture of experts: adapters on the experts are not supported (adapters on attention and the router are): %w", a.Name, t.Name, lora.ErrInvalid)
		}
		if !ok {
			return fmt.Errorf("native: adapter %q updates %s, which is not a linear layer of this model: %w", a.Name, t.Name, lora.ErrInvalid)
		}
		if m.rows != t.Out || m.cols != t.In {
			return fmt.Errorf("native: adapter %q: the update of %s is (%d, %d), the weight (%d, %d): %w", a.Name, t.Name, t.Out, t.In, m.rows, m.cols, lora.ErrInvalid)
		}
	}
	// A run has at most maxBatch rows (the output projection fewer).
	if need := a.ScratchFloats(b.maxBatch); len(b.buf.loraScratch) < need {
		b.buf.loraScratch = make([]float32, need)
	}
	return nil
}

// isExperts reports whether name is one of the experts' stacked tensors.
func (b *Backend) isExperts(name string) bool {
	for _, ly := range b.moeLayers {
		for _, m := range []*expertMatrix{ly.gate, ly.up, ly.down} {
			if m.name == name {
				return true
			}
		}
	}
	return false
}

// addRun appends row to runs, extending the last run when it has the same
// adapter and ends just before row.
func addRun(runs []adapterRun, s *sequence, row, n int) []adapterRun {
	a, scale := s.Adapter()
	if a == nil {
		return runs
	}
	if k := len(runs) - 1; k >= 0 && runs[k].a == a && runs[k].scale == scale && runs[k].row0+runs[k].n == row {
		runs[k].n += n
		return runs
	}
	return append(runs, adapterRun{a: a, scale: scale, row0: row, n: n})
}

// applyAdapters adds the updates of w of every run to out (n, w.rows),
// given the layer's input x (n, w.cols).
func (b *Backend) applyAdapters(w *matrix, x, out []float32, runs []adapterRun) {
	for _, r := range runs {
		r.a.Apply(w.name, x[r.row0*w.cols:], r.n, out[r.row0*w.rows:], r.scale, b.buf.loraScratch)
	}
}
