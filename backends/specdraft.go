package backends

import (
	"errors"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// The draft sources. Each fills a slot's spec.tokens[1:1+k] with up to k
// proposed tokens after the slot's cached tokens and its pending one
// (spec.tokens[0] = next), without allocating.

// Prompt lookup (SpecNgram): matches of the context's last tokens.
const (
	// ngramMin is the shortest match that proposes anything: a single
	// token's earlier successor is right too rarely to pay for its check.
	ngramMin = 2
	// ngramMax is the longest match compared; longer ones rank equal.
	ngramMax = 16
	// ngramWindow is how many tokens back the lookup searches, so that
	// its cost per step is bounded in long contexts.
	ngramWindow = 1 << 14
)

// lookup finds in toks, followed by the pending token next, the most
// recent earlier occurrence of the longest suffix (ngramMin to ngramMax
// tokens) of toks+next, and returns where the tokens that followed it
// start (an index into toks+next) and the length of the match; -1 when
// there is none.
func lookup(toks []tokenizer.ID, next tokenizer.ID) (start, match int) {
	n := len(toks)
	start = -1
	for e := n - 1; e >= max(0, n-ngramWindow); e-- {
		if toks[e] != next {
			continue
		}
		// toks[e] ends the candidate; compare backwards from the token
		// before next (toks[n-1]) with the one before toks[e].
		m := 1
		for m < ngramMax && e-m >= 0 && toks[e-m] == toks[n-m] {
			m++
		}
		if m > match {
			start, match = e+1, m
			if m == ngramMax {
				break
			}
		}
	}
	if match < ngramMin {
		return -1, 0
	}
	return start, match
}

// fillNgram writes into dst the tokens of toks+next from start on (a
// match lookup found), read on through dst itself where they run past the
// end: a loop repeats. It returns len(dst).
func fillNgram(toks []tokenizer.ID, next tokenizer.ID, start int, dst []tokenizer.ID) int {
	n := len(toks) + 1 // toks and next
	for t := range dst {
		i := start + t
		switch {
		case i < len(toks):
			dst[t] = toks[i]
		case i == len(toks):
			dst[t] = next
		default:
			dst[t] = dst[i-n]
		}
	}
	return len(dst)
}

// suffixCache is SpecSuffix's memory of the model's recent outputs: a ring
// of tokens, each request's output (after a few tokens of its prompt) a
// segment of it tagged with the adapter's namespace, and a hash chain
// from every three consecutive tokens to their earlier occurrences, as a
// compressor's match finder keeps one. Its memory is fixed when it is
// made (16 bytes a token and a head table); the oldest outputs are
// overwritten. A lookup takes the occurrences of the context's longest
// matching suffix and walks their continuations, each step taking the
// token most of them continue with: SuffixDecoding's most frequent path
// in a suffix tree, over a bounded set of occurrences.
type suffixCache struct {
	size   int64 // ring positions, a power of two
	tok    []tokenizer.ID
	seg    []uint32 // segment of each position
	prev   []int64  // earlier position with the same key; -1 none
	head   []int64  // (buckets) latest position of each key; -1 none
	total  int64    // positions ever written
	segs   uint32   // segments ever started
	segNS  []uint64 // namespace of segment id % len
	segID  []uint32 // the segment whose namespace segNS holds
	segPos int      // tokens written into the current segment

	cand  []int64 // scratch: occurrences being walked
	match []int   // their match lengths
}

const (
	suffixKey = 3 // tokens a hash chain key covers
	// suffixVisit bounds the occurrences a lookup looks at, and
	// suffixMaxMatch the length of a match it compares.
	suffixVisit    = 64
	suffixMaxMatch = 32
	// suffixMinShare is the least share of the live occurrences that must
	// continue with the proposed token, multiplied along the draft: the
	// walk stops when the path gets less likely than that.
	suffixMinShare = 0.3
	// suffixPromptTail is how many prompt tokens come before an output in
	// its segment, so that the output's start can be matched.
	suffixPromptTail = 16
	suffixSegments   = 4096
)

// newSuffixCache makes a cache of at least tokens positions.
func newSuffixCache(tokens int) *suffixCache {
	size := int64(1024)
	for size < int64(tokens) {
		size *= 2
	}
	c := &suffixCache{
		size:  size,
		tok:   make([]tokenizer.ID, size),
		seg:   make([]uint32, size),
		prev:  make([]int64, size),
		head:  make([]int64, size/2),
		segNS: make([]uint64, suffixSegments),
		segID: make([]uint32, suffixSegments),
		cand:  make([]int64, 0, suffixVisit),
		match: make([]int, 0, suffixVisit),
	}
	for i := range c.head {
		c.head[i] = -1
	}
	return c
}

// key is the bucket of three tokens in namespace ns.
func (c *suffixCache) key(ns uint64, a, b, d tokenizer.ID) int {
	h := ns ^ 0x9e3779b97f4a7c15
	for _, t := range [3]tokenizer.ID{a, b, d} {
		h ^= uint64(uint32(t))
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 29
	}
	return int(h & uint64(len(c.head)-1))
}

// begin starts a segment of namespace ns.
func (c *suffixCache) begin(ns uint64) {
	c.segs++
	if c.segs == 0 {
		c.segs = 1 // 0 marks never-written positions
	}
	i := c.segs % suffixSegments
	c.segNS[i], c.segID[i] = ns, c.segs
	c.segPos = 0
}

// add appends tokens to the current segment, namespace ns.
func (c *suffixCache) add(ns uint64, toks []tokenizer.ID) {
	for _, t := range toks {
		a := c.total
		i := a & (c.size - 1)
		c.tok[i], c.seg[i], c.prev[i] = t, c.segs, -1
		c.total++
		c.segPos++
		if c.segPos >= suffixKey {
			k := c.key(ns, c.at(a-2), c.at(a-1), t)
			c.prev[i] = c.head[k]
			c.head[k] = a
		}
	}
}

func (c *suffixCache) at(a int64) tokenizer.ID { return c.tok[a&(c.size-1)] }

// live reports whether position a still holds what segment seg wrote.
func (c *suffixCache) live(a int64, seg uint32) bool {
	return a >= 0 && a < c.total && a >= c.total-c.size && c.seg[a&(c.size-1)] == seg
}

// nsOf is the namespace of segment seg, and whether it is still known.
func (c *suffixCache) nsOf(seg uint32) (uint64, bool) {
	i := seg % suffixSegments
	return c.segNS[i], c.segID[i] == seg
}

// draft proposes up to len(dst) tokens after toks+next from the outputs
// of namespace ns, and returns how many and the length of the match they
// follow.
func (c *suffixCache) draft(ns uint64, toks []tokenizer.ID, next tokenizer.ID, dst []tokenizer.ID) (int, int) {
	n := len(toks)
	if n+1 < suffixKey || len(dst) == 0 {
		return 0, 0
	}
	// ctx(j) is the j-th token from the end of toks+next (0: next).
	ctx := func(j int) tokenizer.ID {
		if j == 0 {
			return next
		}
		return toks[n-j]
	}
	c.cand, c.match = c.cand[:0], c.match[:0]
	best := 0
	a := c.head[c.key(ns, ctx(2), ctx(1), ctx(0))]
	for visits := 0; a >= 0 && visits < suffixVisit && a >= c.total-c.size; visits++ {
		i := a & (c.size - 1)
		seg := c.seg[i]
		next := c.prev[i]
		if s, ok := c.nsOf(seg); ok && s == ns && c.live(a+1, seg) {
			m := 0
			for m < suffixMaxMatch && m <= n && c.live(a-int64(m), seg) && c.at(a-int64(m)) == ctx(m) {
				m++
			}
			if m >= suffixKey && m >= best {
				if m > best {
					c.cand, c.match = c.cand[:0], c.match[:0]
					best = m
				}
				c.cand = append(c.cand, a+1)
				c.match = append(c.match, m)
			}
		}
		a = next
	}
	if len(c.cand) == 0 {
		return 0, 0
	}
	// Walk the continuations: at each step the token most occurrences
	// continue with (the latest among equals, as candidates come latest
	// first), keeping those that do.
	share := 1.0
	k := 0
	for k < len(dst) && len(c.cand) > 0 {
		var top tokenizer.ID
		topN := 0
		for i, p := range c.cand {
			t := c.at(p)
			cnt := 0
			for _, q := range c.cand[i:] {
				if c.at(q) == t {
					cnt++
				}
			}
			if cnt > topN {
				top, topN = t, cnt
			}
		}
		share *= float64(topN) / float64(len(c.cand))
		if share < suffixMinShare {
			break
		}
		dst[k] = top
		k++
		kept := c.cand[:0]
		for _, p := range c.cand {
			if c.at(p) == top && c.live(p+1, c.seg[p&(c.size-1)]) {
				kept = append(kept, p+1)
			}
		}
		c.cand = kept
	}
	return k, best
}

// modelDrafter is SpecDraft: the draft model and a sequence of it for
// each slot, which follows the slot's tokens (reusing what it holds) and
// drafts greedily, every drafting slot in one Forward call per drafted
// position.
type modelDrafter struct {
	b      Backend
	seqs   []Sequence
	feed   [][]tokenizer.ID // per slot: the tokens to catch up on, (MaxLen+1)
	logits [][]float32      // per slot: (vocab)
	steps  []Step
	who    []int // slot of each step
	failed bool  // the draft model failed: draft nothing more
}

func newModelDrafter(b Backend, slots int, o SequenceOptions) (*modelDrafter, error) {
	d := &modelDrafter{b: b, seqs: make([]Sequence, slots), feed: make([][]tokenizer.ID, slots),
		logits: make([][]float32, slots), steps: make([]Step, 0, slots), who: make([]int, 0, slots)}
	vocab := b.Model().VocabSize
	for i := range d.seqs {
		s, err := b.NewSequence(o)
		if err != nil {
			d.close()
			return nil, err
		}
		d.seqs[i] = s
		d.feed[i] = make([]tokenizer.ID, 0, s.MaxLen()+1)
		d.logits[i] = make([]float32, vocab)
	}
	return d, nil
}

func (d *modelDrafter) close() {
	for _, s := range d.seqs {
		if s != nil {
			s.Close()
		}
	}
}

// draft fills, for each slot of slots, up to its want tokens after its
// cached tokens and its pending one: spec.tokens[1:1+n], n returned in
// got. A draft model that finds no room for them drafts nothing this time.
func (d *modelDrafter) draft(slots []*slot, want, got []int) {
	if d.failed {
		return
	}
	d.steps, d.who = d.steps[:0], d.who[:0]
	for i, s := range slots {
		got[i] = 0
		if want[i] == 0 {
			continue
		}
		seq := d.seqs[s.id]
		toks := s.seq.Tokens()
		if len(toks)+want[i] > seq.MaxLen() {
			continue
		}
		k := seq.Reuse(toks, len(toks))
		f := append(d.feed[s.id][:0], toks[k:]...)
		f = append(f, s.next[0])
		d.feed[s.id] = f
		d.steps = append(d.steps, Step{Seq: seq, Tokens: f, Logits: d.logits[s.id]})
		d.who = append(d.who, i)
	}
	for pos := 0; len(d.steps) > 0; pos++ {
		if err := d.b.Forward(d.steps); err != nil {
			if !errors.Is(err, ErrNoRoom) {
				// A failure inside the pass leaves the sequences
				// undefined: forget them.
				for _, st := range d.steps {
					st.Seq.Reset()
				}
			}
			for _, i := range d.who {
				got[i] = 0
			}
			break
		}
		kept := 0
		for j, i := range d.who {
			s := slots[i]
			t := tokenizer.ID(argmaxRow(d.logits[s.id]))
			s.spec.tokens[1+pos] = t
			got[i] = pos + 1
			if pos+1 < want[i] {
				d.feed[s.id] = append(d.feed[s.id][:0], t)
				d.steps[kept] = Step{Seq: d.steps[j].Seq, Tokens: d.feed[s.id], Logits: d.logits[s.id]}
				d.who[kept] = i
				kept++
			}
		}
		clear(d.steps[kept:])
		d.steps, d.who = d.steps[:kept], d.who[:kept]
	}
	clear(d.steps[:cap(d.steps)])
}

// argmaxRow is the first index of the largest logit.
func argmaxRow(w []float32) int { return argmax(w) }
