package grammar

// Bounds of a Matcher's memory.
const (
	// maxStates is how many automaton states a Matcher keeps before it
	// forgets all but the current one; maxStatesStacks how many parse
	// stacks (4 bytes each) they may hold in all.
	maxStates       = 8192
	maxStatesStacks = 1 << 22
	// maxMaskBytes bounds a Matcher's cache of masks.
	maxMaskBytes = 8 << 20
)

// cachedMask is the mask of a state without a budget, and the most bytes
// any token it allows leaves to match (the budget it needs).
type cachedMask struct {
	bits []uint64
	need int32
}

// Matcher follows one output through a grammar, token by token: Mask says
// which tokens may come next, Accept takes the one chosen. It is the
// per-sequence state of a constraint; it is not safe for concurrent use.
// In steady state (states and masks already met) neither allocates. A
// grammar so ambiguous that the ways to continue would pass 65536 at once
// (maxStateStacks) ends the match there: Mask then allows nothing.
type Matcher struct {
	v     *Vocabulary
	a     *automaton
	cur   int32
	masks map[int32]cachedMask
	// maskCap is how many masks the cache holds.
	maskCap int
	path    []int32 // the trie walk's state at each depth
}

// NewMatcher starts a match of g with the tokens of v.
func NewMatcher(g *Grammar, v *Vocabulary) *Matcher {
	m := &Matcher{
		v:       v,
		a:       newAutomaton(g),
		masks:   map[int32]cachedMask{},
		maskCap: max(1, maxMaskBytes/(8*v.MaskWords()+1)),
		path:    make([]int32, v.maxDepth+1),
	}
	m.cur = m.a.start()
	return m
}

// Mask sets in allowed (MaskWords words, one bit per token id) the tokens
// that keep the output a prefix of a match, and reports whether there is
// any. budget is how many tokens, this one included, may still follow:
// when it is short, only tokens after which a match can still be finished
// in time are allowed, so that even a model that would ramble on ends its
// output whole (as long as every byte is a token of its own, which
// byte-fallback and byte-level vocabularies guarantee); budget <= 0 sets no
// limit. A whole output that nothing short enough can extend allows
// nothing: it ends there.
func (m *Matcher) Mask(allowed []uint64, budget int) bool {
	clear(allowed)
	if m.cur == dead {
		return false
	}
	if len(m.a.states) > maxStates || m.a.stackTotal > maxStatesStacks {
		m.cur = m.a.restart(m.cur)
		clear(m.masks)
	}
	c, ok := m.masks[m.cur]
	if !ok {
		c.bits = make([]uint64, len(allowed))
		c.need = m.fill(c.bits, m.cur, noLimit)
		if len(m.masks) >= m.maskCap {
			clear(m.masks)
		}
		m.masks[m.cur] = c
	}
	limit := int64(budget) - 1
	if budget <= 0 || int64(c.need) <= limit {
		copy(allowed, c.bits)
		return anyBit(allowed)
	}
	m.fill(allowed, m.cur, int32(max(limit, 0)))
	if !anyBit(allowed) {
		if m.a.states[m.cur].accept {
			// The output is whole and nothing more fits: it ends here
			// (an end-of-generation token would have been allowed).
			return false
		}
		// No token finishes in time by the count of one token a byte,
		// which overcounts a vocabulary of longer tokens: the best left
		// is to head for the end, by the tokens that leave the least to
		// write.
		m.fill(allowed, m.cur, m.least(m.cur))
	}
	return anyBit(allowed)
}

// least is the fewest bytes any token allowed in state s leaves to match.
func (m *Matcher) least(s int32) int32 {
	v, a := m.v, m.a
	path := m.path
	path[0] = s
	least := int32(unreachable)
	tb, depth, skip, tokStart := v.tb, v.depth, v.skip, v.tokStart
	for i := 0; i < len(tb); {
		d := depth[i]
		to := a.step(path[d], tb[i])
		if to == dead {
			i = int(skip[i])
			continue
		}
		path[d+1] = to
		if tokStart[i] != tokStart[i+1] {
			least = min(least, a.states[to].min)
		}
		i++
	}
	return least
}

// fill sets in dst the tokens allowed in state s after which a match can
// be finished in at most limit bytes, and returns the most bytes one of
// them leaves.
func (m *Matcher) fill(dst []uint64, s int32, limit int32) int32 {
	v, a := m.v, m.a
	path := m.path
	path[0] = s
	var need int32
	tb, depth, skip, tokStart, toks := v.tb, v.depth, v.skip, v.tokStart, v.toks
	for i := 0; i < len(tb); {
		d := depth[i]
		to := a.step(path[d], tb[i])
		if to == dead {
			i = int(skip[i])
			continue
		}
		path[d+1] = to
		if lo, hi := tokStart[i], tokStart[i+1]; lo != hi {
			if mn := a.states[to].min; mn <= limit {
				for _, t := range toks[lo:hi] {
					dst[t>>6] |= 1 << (t & 63)
				}
				need = max(need, mn)
			}
		}
		i++
	}
	if a.states[s].accept {
		for _, t := range v.eog {
			dst[t>>6] |= 1 << (t & 63)
		}
	}
	return need
}

func anyBit(bits []uint64) bool {
	for _, w := range bits {
		if w != 0 {
			return true
		}
	}
	return false
}

// Accept advances past token id and reports whether the output is still a
// prefix of a match. An end-of-generation token is accepted exactly when
// the output is a whole match.
func (m *Matcher) Accept(id int32) bool {
	if m.cur == dead || id < 0 || int(id) >= m.v.size {
		m.cur = dead
		return false
	}
	if m.v.isEOG[id] {
		if !m.a.states[m.cur].accept {
			m.cur = dead
		}
		return m.cur != dead
	}
	p := m.v.pieces[id]
	if p == "" {
		m.cur = dead
		return false
	}
	return m.AcceptBytes(p)
}

// AcceptBytes advances past the bytes of s, as if a token had written
// them, and reports whether the output is still a prefix of a match.
func (m *Matcher) AcceptBytes(s string) bool {
	for i := 0; i < len(s) && m.cur != dead; i++ {
		m.cur = m.a.step(m.cur, s[i])
	}
	return m.cur != dead
}

// Complete reports whether the output is a whole match that nothing may
// extend: the generation can end here without waiting for an
// end-of-generation token.
func (m *Matcher) Complete() bool { return m.a.complete(m.cur) }

// Matched reports whether the output so far is a whole match.
func (m *Matcher) Matched() bool { return m.cur != dead && m.a.states[m.cur].accept }

// Remaining is the fewest bytes that make the output a whole match, or -1
// if none can.
func (m *Matcher) Remaining() int {
	if m.cur == dead {
		return -1
	}
	if n := m.a.states[m.cur].min; n != unreachable {
		return int(n)
	}
	return -1
}
