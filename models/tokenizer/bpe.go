package tokenizer

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpe is byte-level BPE as llama.cpp runs it: the text is cut into
// words by the vocabulary's pre-tokenizer, each word is byte-encoded (see
// byteunicode.go; raw-byte vocabularies skip this) and split into characters, and within a word the adjacent
// pair with the lowest merge rank (the leftmost among equals) is merged until
// no pair has a rank. The resulting symbols are looked up as tokens.
type bpe struct {
	pre *preTokenizer
	ids map[string]ID
	// ranks is the position of each merge in tokenizer.ggml.merges.
	ranks map[bpePair]int
	// byteIDs is the token of each byte for symbols that are no token, -1
	// when there is none: the one-byte token, or <0xNN> for raw-byte
	// vocabularies.
	byteIDs [256]ID
	scratch sync.Pool // *bpeScratch
}

// bpePair is a merge: two adjacent symbols, as token text.
type bpePair struct{ left, right string }

// bpeScratch holds the buffers of one encode call.
type bpeScratch struct {
	cpts       []rune
	text       splitText
	ends       [2][]int
	word       []byte
	syms       []bpeSymbol
	candidates bpeQueue
}

// bpeSymbol is a run of a word's bytes, word[start:end], in a doubly linked
// list of the word's current symbols; a symbol merged into its left
// neighbour is dead.
type bpeSymbol struct {
	start, end int
	prev, next int
	dead       bool
}

// newBPE builds the byte-level BPE encoder of v, with the pre-tokenizer named
// by v.Pre. Token lookups use v.IDs (built from v.Tokens when nil, the last of
// equal texts winning as in llama.cpp).
func newBPE(v *Vocab) (encoder, error) {
	pre, err := newPreTokenizer(v.Pre)
	if err != nil {
		return nil, err
	}
	e := &bpe{
		pre:   pre,
		ids:   v.IDs,
		ranks: make(map[bpePair]int, len(v.Merges)),
	}
	if e.ids == nil {
		e.ids = make(map[string]ID, len(v.Tokens))
		for id, t := range v.Tokens {
			e.ids[t] = ID(id)
		}
	}
	for b := range e.byteIDs {
		text := string([]byte{byte(b)})
		if pre.spec.rawBytes {
			text = fmt.Sprintf("<0x%02X>", b)
		}
		id, ok := e.ids[text]
		if !ok {
			id = -1
		}
		e.byteIDs[b] = id
	}
	for rank, m := range v.Merges {
		// The separator is the first space after the first byte, so a merge
		// may have a left part starting with a space.
		if len(m) < 2 {
			continue
		}
		sp := strings.IndexByte(m[1:], ' ')
		if sp < 0 {
			continue
		}
		p := bpePair{m[:sp+1], m[sp+2:]}
		if _, dup := e.ranks[p]; !dup {
			e.ranks[p] = rank
		}
	}
	e.scratch.New = func() any { return new(bpeScratch) }
	return e, nil
}

// encode appends the tokens of text, which holds no special tokens.
func (e *bpe) encode(text string, out []ID) []ID {
	sc := e.scratch.Get().(*bpeScratch)
	defer e.scratch.Put(sc)
	sc.cpts = decodeCodepoints(text, sc.cpts[:0])
	sc.text.reset(sc.cpts)
	lo := 0
	for _, hi := range e.pre.splitEnds(&sc.text, &sc.ends) {
		if e.pre.spec.rawBytes {
			sc.word = sc.word[:0]
			for _, c := range sc.cpts[lo:hi] {
				sc.word = appendCodepoint(sc.word, c)
			}
		} else {
			sc.word = appendByteEncoded(sc.word[:0], sc.cpts[lo:hi])
		}
		lo = hi
		out = e.encodeWord(string(sc.word), out, sc)
	}
	return out
}

// encodeWord appends the tokens of one byte-encoded word.
func (e *bpe) encodeWord(word string, out []ID, sc *bpeScratch) []ID {
	if word == "" {
		return out
	}
	if e.pre.spec.ignoreMerges || e.pre.spec.wholeNewlines && strings.Trim(word, "\n") == "" {
		if id, ok := e.ids[word]; ok {
			return append(out, id)
		}
	}
	syms := sc.syms[:0]
	for i := 0; i < len(word); {
		_, n := utf8.DecodeRuneInString(word[i:])
		syms = append(syms, bpeSymbol{start: i, end: i + n, prev: len(syms) - 1, next: len(syms) + 1})
		i += n
	}
	syms[len(syms)-1].next = -1

	q := sc.candidates[:0]
	for i := 1; i < len(syms); i++ {
		q = e.pushPair(q, word, syms, i-1, i)
	}
	for len(q) > 0 {
		var c bpeCandidate
		c, q = q.pop()
		l, r := &syms[c.left], &syms[c.right]
		// Skip a pair one of whose symbols has changed since it was queued.
		if l.dead || r.dead || l.end != r.start || r.end != c.end {
			continue
		}
		l.end = r.end
		l.next = r.next
		r.dead = true
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		if l.prev >= 0 {
			q = e.pushPair(q, word, syms, l.prev, c.left)
		}
		if l.next >= 0 {
			q = e.pushPair(q, word, syms, c.left, l.next)
		}
	}
	sc.syms, sc.candidates = syms, q

	for i := 0; i >= 0; i = syms[i].next {
		s := word[syms[i].start:syms[i].end]
		if id, ok := e.ids[s]; ok {
			out = append(out, id)
			continue
		}
		// Not a token (the merges and the token list disagree): llama.cpp
		// emits the tokens of the symbol's bytes and drops the bytes that
		// have none.
		for j := 0; j < len(s); j++ {
			if id := e.byteIDs[s[j]]; id >= 0 {
				out = append(out, id)
			}
		}
	}
	return out
}

// pushPair queues the merge of symbols left and right when there is one.
func (e *bpe) pushPair(q bpeQueue, word string, syms []bpeSymbol, left, right int) bpeQueue {
	l, r := syms[left], syms[right]
	rank, ok := e.ranks[bpePair{word[l.start:l.end], word[r.start:r.end]}]
	if !ok {
		return q
	}
	return q.push(bpeCandidate{rank: rank, left: left, right: right, end: r.end})
}

// bpeCandidate is a queued merge of syms[left] and syms[right]; end is where
// the right symbol ended when it was queued.
type bpeCandidate struct {
	rank        int
	left, right int
	end         int
}

func (a bpeCandidate) before(b bpeCandidate) bool {
	return a.rank < b.rank || a.rank == b.rank && a.left < b.left
}

// bpeQueue is a binary min-heap of candidates ordered by rank, then by
// position.
type bpeQueue []bpeCandidate

func (q bpeQueue) push(c bpeCandidate) bpeQueue {
	q = append(q, c)
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q[i].before(q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
	return q
}

func (q bpeQueue) pop() (bpeCandidate, bpeQueue) {
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < len(q) && q[l].before(q[small]) {
			small = l
		}
		if r < len(q) && q[r].before(q[small]) {
			small = r
		}
		if small == i {
			break
		}
		q[i], q[small] = q[small], q[i]
		i = small
	}
	return top, q
}
