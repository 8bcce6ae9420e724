package grammar

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

func trailingZeros(x uint64) int { return bits.TrailingZeros64(x) }

// node is one frame of a parse stack: the position in Grammar.elems still
// to match, and the frame below it (-1: none). Nodes are interned, so that
// equal stacks have equal ids.
type node struct {
	pos, parent int32
	// min is the fewest bytes that finish this stack.
	min int32
}

// state is a set of parse stacks, each with a byte element on top: the
// ways the input so far can continue. States are interned, so that the
// transitions between them, computed once, form a deterministic automaton
// built as it is explored.
type state struct {
	stacks []int32 // node ids, sorted
	accept bool    // the input so far is a whole match
	min    int32   // fewest bytes to a whole match
	// next[b] is 1 when no stack takes b, else 2 plus the state after b;
	// all computed at the first transition.
	next *[256]int32
}

// dead is the state of an input that no continuation can make a match.
const dead = -1

// automaton runs one Grammar: it is the lazily built deterministic
// automaton over its states. It is not safe for concurrent use.
type automaton struct {
	g        *Grammar
	nodes    []node
	nodeIdx  map[uint64]int32
	states   []state
	stateIdx map[string]int32

	// Scratch of fillTransitions.
	seen   map[uint64]struct{}
	out    []int32
	key    []byte
	sigs   []uint64
	groups []byte
	tables [][256]int32 // the rest of the chunk newTable hands out
	chunk  int          // the size of the last chunk

	// stackTotal is the parse stacks of all states, which bounds their
	// memory; overflow is set when an expansion passed maxStateStacks.
	stackTotal int
	overflow   bool
}

// maxStateStacks bounds the parse stacks of one state (and eight times it
// the positions an expansion may visit to find them). Only a grammar
// ambiguous beyond use reaches it (repetitions of things that can match
// the empty string, nested: ("a"?){255} inside {256}, through rules as
// well as groups, so that no bound on the grammar's text prevents it), and
// a state past it is dead: the match ends there, rather than the server
// spending seconds and gigabytes on every token.
const maxStateStacks = 1 << 16

func newAutomaton(g *Grammar) *automaton {
	return &automaton{
		g:        g,
		nodeIdx:  map[uint64]int32{},
		stateIdx: map[string]int32{},
		seen:     map[uint64]struct{}{},
	}
}

// start is the state before any input.
func (a *automaton) start() int32 {
	clear(a.seen)
	out, accept := a.out[:0], false
	for _, p := range a.g.rules[a.g.root] {
		out, accept = a.expand(p, -1, out, accept)
	}
	a.out = out
	if a.overflow {
		a.overflow = false
		return dead
	}
	return a.intern(out, accept)
}

// step is the state after byte b in state s, or dead.
func (a *automaton) step(s int32, b byte) int32 {
	nx := a.states[s].next
	if nx == nil {
		nx = a.fillTransitions(s)
	}
	return nx[b] - 2
}

// fillTransitions computes every transition of s at once. Bytes that the
// same stacks accept lead to the same state, so it expands once per group
// of such bytes (a string's characters are one group) rather than once per
// byte.
func (a *automaton) fillTransitions(s int32) *[256]int32 {
	g := a.g
	stacks := a.states[s].stacks
	words := (len(stacks) + 63) / 64
	if cap(a.sigs) < 256*words {
		a.sigs = make([]uint64, 256*words)
	}
	sigs := a.sigs[:256*words]
	clear(sigs)
	for i, id := range stacks {
		set := &g.sets[g.elems[a.nodes[id].pos].arg]
		for w, bits := range set {
			for ; bits != 0; bits &= bits - 1 {
				b := w*64 + trailingZeros(bits)
				sigs[b*words+i/64] |= 1 << (i % 64)
			}
		}
	}
	nx := a.newTable()
	// The groups met so far, by the first byte of each: few per state.
	a.groups = a.groups[:0]
	for b := range 256 {
		sig := sigs[b*words : (b+1)*words]
		if !anyBit(sig) {
			nx[b] = dead + 2
			continue
		}
		t := int32(dead - 1)
		for _, first := range a.groups {
			if slices.Equal(sigs[int(first)*words:(int(first)+1)*words], sig) {
				t = nx[first] - 2
				break
			}
		}
		if t == dead-1 {
			t = a.follow(stacks, sig)
			a.groups = append(a.groups, byte(b))
		}
		nx[b] = t + 2
	}
	a.states[s].next = nx
	return nx
}

// maxTableChunk is the most transition tables newTable allocates at once.
const maxTableChunk = 64

// newTable returns a zeroed transition table, from a chunk allocated with
// others (chunks double up to maxTableChunk): states come in bursts, and
// one allocation per state would keep the collector busy.
func (a *automaton) newTable() *[256]int32 {
	if len(a.tables) == 0 {
		a.chunk = min(max(2*a.chunk, 2), maxTableChunk)
		a.tables = make([][256]int32, a.chunk)
	}
	t := &a.tables[0]
	a.tables = a.tables[1:]
	return t
}

// follow is the state after a byte that the stacks marked in sig accept.
func (a *automaton) follow(stacks []int32, sig []uint64) int32 {
	clear(a.seen)
	out, accept := a.out[:0], false
	for i, id := range stacks {
		if sig[i/64]&(1<<(i%64)) != 0 {
			n := a.nodes[id]
			out, accept = a.expand(n.pos+1, n.parent, out, accept)
		}
	}
	a.out = out
	if (len(out) == 0 && !accept) || a.overflow {
		a.overflow = false
		return dead
	}
	return a.intern(out, accept)
}

// expand adds to out the stacks that continue at pos with parent below,
// each with a byte element on top, and reports whether one of them has
// nothing left to match. A rule reference that ends its alternative does
// not push a frame (the rule returns straight to the parent), so that
// right recursion keeps stacks flat; seen cuts the cycles that rules
// matching the empty string make.
func (a *automaton) expand(pos, parent int32, out []int32, accept bool) ([]int32, bool) {
	key := uint64(uint32(pos))<<32 | uint64(uint32(parent))
	if _, ok := a.seen[key]; ok || a.overflow {
		return out, accept
	}
	if len(a.seen) >= 8*maxStateStacks {
		// As many steps through rules without a byte: give up before
		// the search (and its recursion) grows without bound.
		a.overflow = true
		return out, accept
	}
	a.seen[key] = struct{}{}
	g := a.g
	switch el := g.elems[pos]; el.kind {
	case elemByte:
		if len(out) >= maxStateStacks {
			a.overflow = true
			return out, accept
		}
		return append(out, a.node(pos, parent)), accept
	case elemEnd:
		if parent < 0 {
			return out, true
		}
		p := a.nodes[parent]
		return a.expand(p.pos, p.parent, out, accept)
	default:
		cont := parent
		if g.elems[pos+1].kind != elemEnd {
			cont = a.node(pos+1, parent)
		}
		for _, start := range g.rules[el.arg] {
			out, accept = a.expand(start, cont, out, accept)
		}
		return out, accept
	}
}

func (a *automaton) node(pos, parent int32) int32 {
	key := uint64(uint32(pos))<<32 | uint64(uint32(parent))
	if id, ok := a.nodeIdx[key]; ok {
		return id
	}
	m := int64(a.g.minRest[pos])
	if parent >= 0 {
		m += int64(a.nodes[parent].min)
	}
	id := int32(len(a.nodes))
	a.nodes = append(a.nodes, node{pos: pos, parent: parent, min: int32(min(m, unreachable))})
	a.nodeIdx[key] = id
	return id
}

// intern returns the state of the stacks (sorted and deduplicated here;
// the slice is scratch) and accept.
func (a *automaton) intern(stacks []int32, accept bool) int32 {
	slices.Sort(stacks)
	stacks = slices.Compact(stacks)
	a.key = a.key[:0]
	for _, id := range stacks {
		a.key = binary.LittleEndian.AppendUint32(a.key, uint32(id))
	}
	if accept {
		a.key = append(a.key, 1)
	}
	if id, ok := a.stateIdx[string(a.key)]; ok {
		return id
	}
	st := state{stacks: slices.Clone(stacks), accept: accept}
	if !accept {
		st.min = unreachable
		for _, id := range stacks {
			st.min = min(st.min, a.nodes[id].min)
		}
	}
	id := int32(len(a.states))
	a.states = append(a.states, st)
	a.stackTotal += len(st.stacks)
	a.stateIdx[string(a.key)] = id
	return id
}

// restart forgets every state but s, which it returns under its new id:
// the automaton's memory stays bounded however long the input.
func (a *automaton) restart(s int32) int32 {
	st := a.states[s]
	clear(a.stateIdx)
	a.states = a.states[:0]
	a.stackTotal = 0
	return a.intern(st.stacks, st.accept)
}

// complete reports whether s is a whole match that nothing may extend.
func (a *automaton) complete(s int32) bool {
	return s >= 0 && a.states[s].accept && len(a.states[s].stacks) == 0
}
