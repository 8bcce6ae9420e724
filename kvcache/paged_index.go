package kvcache

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
)

// The prefix index maps a full block's chain hash, hash(parent's chain
// hash, the block's tokens), to the block. The hash only picks a bucket: a
// lookup accepts a block only when its stored tokens equal the wanted ones
// and its parent is, by registration id, the block matched just before, so
// a collision (or a crafted prompt) costs a longer bucket walk, never wrong
// keys and values. The seed is random per pool, so that a client cannot aim
// collisions at one bucket.
//
// Keys and values depend on more than the tokens: a LoRA adapter (and its
// scale) changes them. A table's namespace stands for that; chains of
// different namespaces never meet, as the first block of a chain records
// its namespace where the others record their parent.

// chainHash is the default hash of a block: maphash of the parent's chain
// hash and the block's tokens.
func (p *Pool) chainHash(parent uint64, tokens []int32) uint64 {
	var h maphash.Hash
	h.SetSeed(p.seed)
	var buf [8 * 32]byte
	binary.LittleEndian.PutUint64(buf[:], parent)
	n := 8
	for _, t := range tokens {
		if n == len(buf) {
			h.Write(buf[:])
			n = 0
		}
		binary.LittleEndian.PutUint64(buf[n:], uint64(t))
		n += 8
	}
	h.Write(buf[:n])
	return h.Sum64()
}

// lookup returns the registered block with chain hash h, the given tokens
// and parent: the id of the block before it, or for the first block of a
// chain (root) the namespace. It returns -1 when there is none.
func (p *Pool) lookup(h, parent uint64, root bool, tokens []int32) int {
	for b := p.buckets[h&p.mask]; b >= 0; b = p.meta[b].bnext {
		m := &p.meta[b]
		if m.hash == h && m.parent == parent && m.root == root && slices.Equal(p.blockTokens(int(b)), tokens) {
			return int(b)
		}
	}
	return -1
}

// blockTokens is the token record of block b; meaningful while registered.
func (p *Pool) blockTokens(b int) []int32 { return p.tokens[b*p.bt : (b+1)*p.bt] }

// register enters block b, whose keys and values are written for tokens
// after the block with id parent (or first in namespace parent, when root),
// in the index under chain hash h.
func (p *Pool) register(b int, h, parent uint64, root bool, tokens []int32) {
	m := &p.meta[b]
	m.id, m.parent, m.root, m.hash = p.nextID, parent, root, h
	p.nextID++
	copy(p.blockTokens(b), tokens)
	i := h & p.mask
	m.bnext = p.buckets[i]
	p.buckets[i] = int32(b)
}

// unregister takes block b out of the index; its contents are no longer
// promised to anyone.
func (p *Pool) unregister(b int) {
	m := &p.meta[b]
	if m.id == 0 {
		return
	}
	for at := &p.buckets[m.hash&p.mask]; *at >= 0; at = &p.meta[*at].bnext {
		if int(*at) == b {
			*at = m.bnext
			break
		}
	}
	m.id, m.parent, m.root, m.hash, m.bnext = 0, 0, false, 0, -1
	m.keyed = false
}

// Commit enters the table's full blocks whose keys and values are now
// written into the prefix index, so that Match can hand them to other
// tables; call it after the forward pass that wrote them. When an equal
// block (same tokens after the same chain) is already cached, the table
// shares that one and gives its own copy back: block ids read before Commit
// may change. Committed blocks are never written again; a table that needs
// to (after Truncate into one) copies it first.
func (t *BlockTable) Commit() { t.CommitBelow(len(t.tokens)) }

// CommitBelow is Commit of the full blocks within the first n tokens only:
// the tokens past n are drafts of speculative decoding, which may be
// truncated away, so the blocks holding them stay out of the prefix index
// (and out of the store) until the tokens are kept and a later Commit
// enters them.
func (t *BlockTable) CommitBelow(n int) {
	p := t.pool
	full := min(max(n, 0), len(t.tokens)) / p.bt
	for i := t.committed; i < full; i++ {
		parentHash, parentID := t.namespace, t.namespace
		if i > 0 {
			pm := &p.meta[t.blocks[i-1]]
			parentHash, parentID = pm.hash, pm.id
		}
		tokens := t.tokens[i*p.bt : (i+1)*p.bt]
		h := p.hash(parentHash, tokens)
		b := t.blocks[i]
		if p.tier != nil && !p.meta[b].sealed {
			// Committed without Store completing it (a caller that wrote
			// no keys): make its quantized forms from what it holds.
			for l := range p.opt.Layers {
				p.quantizeLayer(b, l)
			}
			p.seal(b)
		}
		switch e := p.lookup(h, parentID, i == 0, tokens); {
		case e == b:
			// A fork of this table committed it already.
		case e >= 0:
			p.incRef(e)
			t.replaceNeeds(i, b, e)
			if p.tier != nil {
				p.adoptForms(e, b)
			}
			p.decRef(b)
			t.blocks[i] = e
			p.dedups++
			t.keyBlock(i, true)
		default:
			// b may be registered already, after a parent this table does
			// not hold: a fork of this table swapped the parent for an
			// equal cached block, which has been evicted since, so that
			// entry can no longer be reached. Keys and values depend on
			// the tokens and the namespace only, so b is as right after
			// this table's chain: enter it under this one.
			p.unregister(b)
			p.register(b, h, parentID, i == 0, tokens)
			t.keyBlock(i, true)
		}
	}
	t.committed = max(t.committed, full)
	t.setWindow(len(t.tokens))
}

// Match empties t (as Release) and shares into it the longest chain of
// cached full blocks of its namespace that starts tokens, at most MaxLen
// positions; it
// returns the number of tokens the shared blocks hold, a multiple of
// BlockTokens. The table then holds those tokens, committed; the caller
// computes the rest. Only whole blocks are shared: a prompt whose last
// block is partial recomputes it. To recompute at least the last prompt
// token (for its logits), Match the whole prompt and Truncate to one less:
// the block holding that token is copied when it is written, so every other
// cached position still counts.
func (t *BlockTable) Match(tokens []int32) int {
	return t.match(tokens, t.maxLen/t.pool.bt)
}

// match is Match of at most maxBlocks blocks: the index's chain, then what
// the store holds past it (spill.go).
func (t *BlockTable) match(tokens []int32, maxBlocks int) int {
	t.Release()
	p := t.pool
	t.chain(tokens, func(b int) {
		if len(t.blocks) < maxBlocks {
			p.incRef(b)
			t.pushBlock(b)
		}
	})
	last := -1
	if len(t.blocks) > 0 {
		last = t.blocks[len(t.blocks)-1]
		t.touch()
	}
	if p.store != nil && t.storeReach(tokens, len(t.blocks), last, maxBlocks) > 0 {
		restored := t.restore(tokens)
		p.store.hitTokens += uint64(restored * p.bt)
	}
	if p.store != nil && t.storeOK {
		p.store.missTk += uint64(len(tokens) - len(t.blocks)*p.bt)
	}
	n := len(t.blocks) * p.bt
	t.tokens = append(t.tokens, tokens[:n]...)
	t.committed = len(t.blocks)
	t.setWindow(n)
	p.hits += uint64(n)
	p.misses += uint64(len(tokens) - n)
	return n
}

// Reuse makes the table hold the longest prefix of tokens, at most limit of
// them, whose keys and values are cached: the table's own tokens, or a
// chain of committed blocks from the prefix index, whichever is longer. It
// returns the number of tokens kept; the caller computes the rest. A
// partial block at the end (the index's last block cut at limit, or the
// table's own) is copied when the table writes it, so the cached blocks
// stay as they are for the next prompt.
func (t *BlockTable) Reuse(tokens []int32, limit int) int {
	limit = max(min(limit, len(tokens), t.maxLen), 0)
	p := t.pool
	own := 0
	for own < min(len(t.tokens), limit) && t.tokens[own] == tokens[own] {
		own++
	}
	own = t.exactCut(own, t.blocks)
	if t.reusable(tokens, limit) > own {
		// Restoring from the store may fall short of what it promised (a
		// page that fails its checksum, no room): keep the table's own
		// blocks until it is done.
		var keep *BlockTable
		if own > 0 && p.store != nil {
			keep = t.Fork()
			defer keep.Release()
		}
		hits, misses := p.hits, p.misses
		n := t.match(tokens, min(t.maxLen, limit+p.bt-1)/p.bt)
		if n > limit {
			n = t.exactCut(limit, t.blocks)
			// Truncate cannot fail below Len.
			_ = t.Truncate(n)
		}
		if n >= own || keep == nil {
			return n
		}
		t.Share(keep)
		p.hits, p.misses = hits, misses
	}
	// Truncate cannot fail below Len.
	_ = t.Truncate(own)
	p.hits += uint64(own)
	p.misses += uint64(len(tokens) - own)
	return own
}

// reusable is the tokens Reuse would keep of the index's chain for tokens,
// and of the store's past it, at most limit, changing nothing.
func (t *BlockTable) reusable(tokens []int32, limit int) int {
	p := t.pool
	n, cut, last := 0, -1, -1
	t.chain(tokens, func(b int) {
		if n <= limit && limit < n+p.bt {
			cut = b
		}
		n += p.bt
		last = b
	})
	if p.store != nil && n < limit {
		n += p.bt * t.storeReach(tokens, n/p.bt, last, (limit+p.bt-1)/p.bt)
		if n > limit {
			// The store's last block comes back with its exact form.
			return limit
		}
	}
	if n <= limit {
		return n
	}
	if p.tier != nil && limit%p.bt != 0 && p.meta[cut].half < 0 {
		return limit / p.bt * p.bt
	}
	return limit
}

// exactCut is n (within the positions of blocks), or in a tiered pool,
// when n falls inside a block that has lost its exact form, the start of
// that block: the table would write after n into a copy rebuilt from a
// quantized form, and recomputing the block's first tokens instead keeps
// every form exact.
func (t *BlockTable) exactCut(n int, blocks []int) int {
	p := t.pool
	if p.tier == nil || n%p.bt == 0 || p.meta[blocks[n/p.bt]].half >= 0 {
		return n
	}
	return n / p.bt * p.bt
}

// chain calls visit with each block of the longest chain of cached full
// blocks of the table's namespace that starts tokens, at most MaxLen
// positions, in order.
func (t *BlockTable) chain(tokens []int32, visit func(b int)) {
	p := t.pool
	parentHash, parentID := t.namespace, t.namespace
	for i := range min(len(tokens), t.maxLen) / p.bt {
		blk := tokens[i*p.bt : (i+1)*p.bt]
		h := p.hash(parentHash, blk)
		b := p.lookup(h, parentID, i == 0, blk)
		if b < 0 {
			return
		}
		visit(b)
		parentHash, parentID = h, p.meta[b].id
	}
}

// Match is NewTable followed by the table's Match: a new table sharing the
// longest cached prefix of tokens, and the number of tokens it holds.
func (p *Pool) Match(tokens []int32, maxLen int) (*BlockTable, int, error) {
	t, err := p.NewTable(maxLen)
	if err != nil {
		return nil, 0, err
	}
	return t, t.Match(tokens), nil
}
