package grammar

import (
	"math"
	"slices"
	"strings"
)

// Vocabulary is what each token of a model's vocabulary adds to the
// output, arranged as a trie for Matchers. It is immutable and safe for
// concurrent use; build it once per model (and rendering of special
// tokens) and share it.
type Vocabulary struct {
	size   int
	pieces []string
	eog    []int32
	isEOG  []bool

	// The trie of the non-empty pieces, in preorder: node i adds byte
	// tb[i] at depth depth[i] (0 for the first byte of a piece), its
	// subtree ends before skip[i], and the tokens whose piece ends there
	// are toks[tokStart[i]:tokStart[i+1]].
	tb       []byte
	depth    []int32
	skip     []int32
	tokStart []int32
	toks     []int32
	maxDepth int
}

// NewVocabulary describes a vocabulary whose token id writes pieces[id] to
// the output (raw bytes, perhaps part of a UTF-8 character). Tokens with an
// empty piece never match (a control token that is not written), except
// the end-of-generation tokens (eog), which end the output and are allowed
// exactly when it is a whole match. pieces is kept, not copied.
func NewVocabulary(pieces []string, eog []int32) *Vocabulary {
	v := &Vocabulary{size: len(pieces), pieces: pieces, isEOG: make([]bool, len(pieces))}
	for _, id := range eog {
		if id >= 0 && int(id) < len(pieces) && !v.isEOG[id] {
			v.isEOG[id] = true
			v.eog = append(v.eog, id)
		}
	}
	var ids []int32
	for id, p := range pieces {
		if p != "" && !v.isEOG[id] {
			ids = append(ids, int32(id))
		}
	}
	slices.SortFunc(ids, func(a, b int32) int {
		if c := strings.Compare(pieces[a], pieces[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	var path []int32 // the nodes of the previous piece
	prev := ""
	for _, id := range ids {
		p := pieces[id]
		l := commonPrefix(prev, p)
		path = path[:min(l, len(path))]
		for d := len(path); d < len(p); d++ {
			path = append(path, int32(len(v.tb)))
			v.tb = append(v.tb, p[d])
			v.depth = append(v.depth, int32(d))
			v.tokStart = append(v.tokStart, int32(len(v.toks)))
		}
		// The piece ends at the newest node: sorted order puts a piece
		// before its extensions, and equal pieces side by side.
		v.toks = append(v.toks, id)
		v.maxDepth = max(v.maxDepth, len(p))
		prev = p
	}
	v.tokStart = append(v.tokStart, int32(len(v.toks)))
	// A subtree ends at the next node that is no deeper.
	v.skip = make([]int32, len(v.tb))
	var open []int32
	for i, d := range v.depth {
		for len(open) > 0 && v.depth[open[len(open)-1]] >= d {
			v.skip[open[len(open)-1]] = int32(i)
			open = open[:len(open)-1]
		}
		open = append(open, int32(i))
	}
	for _, i := range open {
		v.skip[i] = int32(len(v.tb))
	}
	return v
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Size is the number of tokens.
func (v *Vocabulary) Size() int { return v.size }

// MaxTokenBytes is the length of the vocabulary's longest token: an
// output of n bytes takes at least n/MaxTokenBytes tokens.
func (v *Vocabulary) MaxTokenBytes() int { return v.maxDepth }

// MaskWords is the length of a mask: one bit per token.
func (v *Vocabulary) MaskWords() int { return (v.size + 63) / 64 }

// noLimit is a byte budget that limits nothing.
const noLimit = math.MaxInt32
