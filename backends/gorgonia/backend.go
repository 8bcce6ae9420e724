package gorgonia

import (
	"fmt"
	"runtime"
	"sync"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
)

// kvBlockTokens is the positions of one block of the backend's KV pools.
const kvBlockTokens = 32

// Backend runs a model as Gorgonia graphs: each step of a Forward call is
// one graph over the step's tokens, attending to the keys and values its
// sequence holds in a kvcache pool. It implements backends.Backend and
// backends.AdapterSequence's SetAdapter; like any Backend it is driven by
// one goroutine at a time.
type Backend struct {
	m        *Model
	threads  int
	kv       [2]*kvcache.Pool
	kvBytes  int64
	kvTokens int
	call     uint64
	closed   bool
	// factors caches adapters' factors as tensors, by adapter id.
	factorsMu sync.Mutex
	factors   map[uint64]map[string]*factorTensors
}

var _ backends.Backend = (*Backend)(nil)

func init() {
	backends.Register("gorgonia", func(m *models.Model, o backends.Options) (backends.Backend, error) {
		model, err := NewModel(m.File, m.Config)
		if err != nil {
			return nil, err
		}
		return New(model, o)
	})
}

// New makes a backend running m.
func New(m *Model, o backends.Options) (*Backend, error) {
	if m.cfg.ContextLength <= 0 {
		return nil, fmt.Errorf("gorgonia: context length %d must be positive", m.cfg.ContextLength)
	}
	b := &Backend{m: m, threads: o.Threads, kvBytes: o.KVBytes, kvTokens: o.KVTokens, factors: map[uint64]map[string]*factorTensors{}}
	if b.threads == 0 {
		b.threads = runtime.NumCPU()
	}
	return b, nil
}

// Model describes the loaded model.
func (b *Backend) Model() backends.ModelInfo {
	c := b.m.cfg
	return backends.ModelInfo{Arch: c.Arch, Name: c.Name, VocabSize: c.VocabSize, Dim: c.Dim, Layers: c.Layers, ContextLength: c.ContextLength}
}

// Threads is the number of threads Gorgonia's products may use.
func (b *Backend) Threads() int { return b.threads }

// Close marks the backend closed.
func (b *Backend) Close() error {
	b.closed = true
	return nil
}

// kvPool is the backend's pool of precision kv, made at its first use.
func (b *Backend) kvPool(kv kvcache.Precision) (*kvcache.Pool, error) {
	if kv != kvcache.F16 && kv != kvcache.F32 {
		return nil, fmt.Errorf("gorgonia: unknown KV precision %d", int(kv))
	}
	if p := b.kv[kv]; p != nil {
		return p, nil
	}
	c := b.m.cfg
	o := kvcache.PoolOptions{Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, BlockTokens: kvBlockTokens, Type: kv, Bytes: b.kvBytes}
	if o.Bytes == 0 {
		tokens := b.kvTokens
		if tokens == 0 {
			tokens = c.ContextLength
		}
		o.Blocks = (tokens + kvBlockTokens - 1) / kvBlockTokens
	}
	p, err := kvcache.NewPool(o)
	if err != nil {
		return nil, fmt.Errorf("gorgonia: KV pool: %w", err)
	}
	b.kv[kv] = p
	return p, nil
}

// Forward implements backends.Backend: every step is checked first, then
// each runs as its own graph.
func (b *Backend) Forward(steps []backends.Step) error {
	if err := b.check(steps); err != nil {
		return err
	}
	for i := range steps {
		if err := b.step(&steps[i]); err != nil {
			return fmt.Errorf("gorgonia: step %d: %w", i, err)
		}
	}
	return nil
}

// check validates every step before Forward changes anything.
func (b *Backend) check(steps []backends.Step) error {
	if b.closed {
		return backends.ErrClosed
	}
	b.call++
	vocab, dim := b.m.cfg.VocabSize, b.m.cfg.Dim
	var need [2]int
	for i := range steps {
		st := &steps[i]
		s, ok := st.Seq.(*sequence)
		switch {
		case !ok || s == nil || s.owner != b:
			return fmt.Errorf("gorgonia: step %d: the sequence was not made by this backend", i)
		case s.Table == nil:
			return fmt.Errorf("gorgonia: step %d: %w", i, backends.ErrClosed)
		case s.call == b.call:
			return fmt.Errorf("gorgonia: step %d: the sequence appears twice in one call", i)
		case len(st.Tokens) == 0:
			return fmt.Errorf("gorgonia: step %d has no tokens", i)
		case s.Len()+len(st.Tokens) > s.MaxLen():
			return fmt.Errorf("gorgonia: step %d: %d tokens after %d do not fit in %d: %w",
				i, len(st.Tokens), s.Len(), s.MaxLen(), backends.ErrContextFull)
		case st.Outputs != backends.LastToken && st.Outputs != backends.AllTokens:
			return fmt.Errorf("gorgonia: step %d: unknown outputs %d", i, st.Outputs)
		}
		s.call = b.call
		need[s.Table.Pool().Type()] += s.Table.Need(len(st.Tokens))
		for _, t := range st.Tokens {
			if t < 0 || int(t) >= vocab {
				return fmt.Errorf("gorgonia: step %d: token %d is outside the vocabulary of %d", i, t, vocab)
			}
		}
		n := st.OutputRows()
		if st.Logits != nil && len(st.Logits) != n*vocab {
			return fmt.Errorf("gorgonia: step %d: logits buffer of %d floats, want %d×%d", i, len(st.Logits), n, vocab)
		}
		if st.Hidden != nil && len(st.Hidden) != n*dim {
			return fmt.Errorf("gorgonia: step %d: hidden buffer of %d floats, want %d×%d", i, len(st.Hidden), n, dim)
		}
	}
	for i, p := range b.kv {
		if p != nil && need[i] > p.Available() {
			return fmt.Errorf("gorgonia: the steps need %d KV blocks, %d are free or evictable of %d: %w",
				need[i], p.Available(), p.Blocks(), backends.ErrNoRoom)
		}
	}
	return nil
}

// step runs one step's graph, stores its keys and values and copies out
// the outputs it asks for.
func (b *Backend) step(st *backends.Step) error {
	s := st.Seq.(*sequence)
	t := len(st.Tokens)
	n := newNet(newGraph(), b.m, t, s.Len(), s.past())
	n.roundKV = s.Table.Pool().Type() == kvcache.F16
	n.keepKV = true
	if a, scale := s.Adapter(); a != nil {
		n.lora = b.adapterNodes(n, a, scale)
	}
	r0 := t - 1
	if st.Outputs == backends.AllTokens {
		r0 = 0
	}
	var logits *G.Node
	if err := build(func() { logits = n.forward(n.embed(st.Tokens), r0, t) }); err != nil {
		return err
	}
	vm := G.NewTapeMachine(n.g, G.TraceExec())
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return err
	}
	pos := s.Len()
	if _, err := s.Table.Append(st.Tokens); err != nil {
		return err // check made room
	}
	for l := range b.m.cfg.Layers {
		s.Table.Store(l, pos, n.attn[l].newK, n.attn[l].newV)
	}
	s.Table.Commit()
	if st.Logits != nil {
		copy(st.Logits, floats(logits))
	}
	if st.Hidden != nil {
		copy(st.Hidden, floats(n.hidden))
	}
	return nil
}

// factorTensors are one target's factors transposed for the graph.
type factorTensors struct {
	at, bt *tensor.Dense
	scale  float32
	rank   int
}

// adapterNodes makes the nodes of adapter a's factors in n's graph, with
// its scales multiplied by scale.
func (b *Backend) adapterNodes(n *net, a *lora.Adapter, scale float32) map[string]*loraFactors {
	b.factorsMu.Lock()
	fs, ok := b.factors[a.ID()]
	if !ok {
		fs = factorsOf(a)
		b.factors[a.ID()] = fs
	}
	b.factorsMu.Unlock()
	out := make(map[string]*loraFactors, len(fs))
	for name, f := range fs {
		out[name] = &loraFactors{at: n.dense(f.at), bt: n.dense(f.bt), scale: f.scale * scale}
	}
	return out
}

// factorsOf transposes every update of a: A (rank, in) to at (in, rank), B
// (out, rank) to bt (rank, out).
func factorsOf(a *lora.Adapter) map[string]*factorTensors {
	fs := map[string]*factorTensors{}
	for _, t := range a.Targets() {
		fs[t.Name] = &factorTensors{at: transposed(t.A, t.Rank, t.In), bt: transposed(t.B(), t.Out, t.Rank), scale: t.Scale, rank: t.Rank}
	}
	return fs
}

// fitAdapter checks that every update of a has the shape of a matrix the
// graph multiplies by.
func (b *Backend) fitAdapter(a *lora.Adapter) error {
	for _, t := range a.Targets() {
		m, ok := b.m.targets[t.Name]
		if !ok {
			return fmt.Errorf("gorgonia: adapter %q updates %s, which is not a linear layer of this model: %w", a.Name, t.Name, lora.ErrInvalid)
		}
		if m.out != t.Out || m.in != t.In {
			return fmt.Errorf("gorgonia: adapter %q: the update of %s is (%d, %d), the weight (%d, %d): %w", a.Name, t.Name, t.Out, t.In, m.out, m.in, lora.ErrInvalid)
		}
	}
	return nil
}

// gatherPast reads the keys and values of positions [0, n) of layer l from
// t into k and v, (n, kv_heads·head_dim) each, widened to F32.
func gatherPast(t *kvcache.BlockTable, l, n int, k, v []float32) {
	p := t.Pool()
	o := p.Options()
	bt, hd, heads := p.BlockTokens(), o.HeadDim, o.KVHeads
	row := heads * hd
	for pos := range n {
		blk, off := t.Locate(pos)
		for h := range heads {
			ks := (h*bt + off) * hd
			if p.Type() == kvcache.F16 {
				kernels.FP16ToFP32Row(p.KeysF16(blk, l)[ks:ks+hd], k[pos*row+h*hd:pos*row+(h+1)*hd])
				vals := p.ValuesF16(blk, l)
				for i := range hd {
					v[pos*row+h*hd+i] = kernels.FP16ToFP32(vals[(h*hd+i)*bt+off])
				}
				continue
			}
			copy(k[pos*row+h*hd:pos*row+(h+1)*hd], p.KeysF32(blk, l)[ks:ks+hd])
			vals := p.ValuesF32(blk, l)
			for i := range hd {
				v[pos*row+h*hd+i] = vals[(h*hd+i)*bt+off]
			}
		}
	}
}
