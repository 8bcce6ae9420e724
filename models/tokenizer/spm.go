package tokenizer

import "strings"

// spaceMark is U+2581 LOWER ONE EIGHTH BLOCK, which SentencePiece writes for a space.
const spaceMark = "\u2581"

// spm is llama.cpp's SentencePiece tokenizer for "llama" vocabularies: the
// text, spaces written as ▁, starts as one symbol per UTF-8 character; the
// adjacent pair whose concatenation is the highest-scoring token is merged
// until no pair forms a token; a symbol that is no token is written as its
// byte tokens <0xNN>.
type spm struct {
	ids    map[string]ID
	scores []float32 // nil: every score is 0
	// byteIDs[b] is the token for byte b: <0xNN>, else the one-byte text,
	// else UNK, else -1 (the byte is dropped).
	byteIDs [256]ID
}

func newSPM(v *Vocab) *spm {
	e := &spm{ids: v.IDs, scores: v.Scores}
	const hex = "0123456789ABCDEF"
	for b := range 256 {
		id, ok := v.IDs[string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})] // <0xNN>
		if !ok {
			id, ok = v.IDs[string([]byte{byte(b)})]
		}
		if !ok {
			id = v.UNK
		}
		e.byteIDs[b] = id
	}
	return e
}

// spmSymbol is a span of the escaped text in the doubly linked list of symbols.
type spmSymbol struct {
	start, n   int // bytes; n == 0 once merged into its left neighbour
	prev, next int // -1 at the ends
}

// spmBigram is a candidate merge of two adjacent symbols (int32s keep the
// heap entries small: merging long texts is heap-bound).
type spmBigram struct {
	left, right int32
	score       float32
	size        int32 // byte length of the merged text, to spot stale candidates
}

// before orders the queue: higher score first, then the leftmost pair.
func (a spmBigram) before(b spmBigram) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}

// bigramQueue is a binary max-heap of candidate merges.
type bigramQueue []spmBigram

func (q *bigramQueue) push(b spmBigram) {
	*q = append(*q, b)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *bigramQueue) pop() spmBigram {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		best, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l].before(h[best]) {
			best = l
		}
		if r < len(h) && h[r].before(h[best]) {
			best = r
		}
		if best == i {
			break
		}
		h[i], h[best] = h[best], h[i]
		i = best
	}
	*q = h
	return top
}

// utf8SeqLen is the length of a UTF-8 sequence by its first byte, as llama.cpp
// splits text into characters: a stray continuation byte counts as one.
func utf8SeqLen(b byte) int {
	switch {
	case b < 0xC0:
		return 1
	case b < 0xE0:
		return 2
	case b < 0xF0:
		return 3
	default:
		return 4
	}
}

// encode appends the ids of text; spaces become ▁ here, the space prefix is
// the caller's business since it depends on the fragment's place.
func (e *spm) encode(text string, out []ID) []ID {
	if text == "" {
		return out
	}
	s := strings.ReplaceAll(text, " ", spaceMark)

	symbols := make([]spmSymbol, 0, len(s))
	for off := 0; off < len(s); {
		n := min(utf8SeqLen(s[off]), len(s)-off)
		i := len(symbols)
		symbols = append(symbols, spmSymbol{start: off, n: n, prev: i - 1, next: i + 1})
		off += n
	}
	symbols[len(symbols)-1].next = -1

	queue := make(bigramQueue, 0, len(symbols))
	tryAdd := func(left, right int) {
		if left < 0 || right < 0 {
			return
		}
		l := symbols[left]
		size := l.n + symbols[right].n
		id, ok := e.ids[s[l.start:l.start+size]]
		if !ok {
			return
		}
		var score float32
		if e.scores != nil {
			score = e.scores[id]
		}
		queue.push(spmBigram{left: int32(left), right: int32(right), score: score, size: int32(size)})
	}
	for i := 1; i < len(symbols); i++ {
		tryAdd(i-1, i)
	}

	for len(queue) > 0 {
		b := queue.pop()
		l, r := &symbols[b.left], &symbols[b.right]
		// A candidate whose symbols changed since it was queued is stale.
		if l.n == 0 || r.n == 0 || l.n+r.n != int(b.size) {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			symbols[r.next].prev = int(b.left)
		}
		tryAdd(l.prev, int(b.left))
		tryAdd(int(b.left), l.next)
	}

	for i := 0; i != -1; i = symbols[i].next {
		out = e.resegment(s[symbols[i].start:symbols[i].start+symbols[i].n], out)
	}
	return out
}

// resegment writes one final symbol: its token, or its bytes. Every merge
// produced a vocabulary token, so only single characters can be unknown here
// and llama.cpp's recursion into the merge's halves never has work to do.
func (e *spm) resegment(sym string, out []ID) []ID {
	if id, ok := e.ids[sym]; ok {
		return append(out, id)
	}
	for i := 0; i < len(sym); i++ {
		if id := e.byteIDs[sym[i]]; id >= 0 {
			out = append(out, id)
		}
	}
	return out
}
