package grammar

import (
	"fmt"
	"slices"
	"unicode/utf8"
)

// Choice compiles the grammar of exactly one of options, byte for byte
// (vLLM's guided_choice and structured_outputs.choice), for a client that
// wants the model to pick a label. The options are merged into a trie, so
// that the grammar stays deterministic however many share a prefix. It
// fails, wrapping ErrGrammar, on an empty list, an empty option (a
// choice of nothing would end the output before it starts), an option
// that is not valid UTF-8, or options past MaxElements bytes in all.
func Choice(options []string) (*Grammar, error) {
	if len(options) == 0 {
		return nil, fmt.Errorf("%w: choice: the list of options is empty", ErrGrammar)
	}
	total := 0
	for i, o := range options {
		switch {
		case o == "":
			return nil, fmt.Errorf("%w: choice: option %d is the empty string", ErrGrammar, i)
		case !utf8.ValidString(o):
			return nil, fmt.Errorf("%w: choice: option %d is not valid UTF-8", ErrGrammar, i)
		}
		if total += len(o); total > MaxElements {
			return nil, fmt.Errorf("%w: choice: the options hold more than %d bytes", ErrGrammar, MaxElements)
		}
	}
	sorted := slices.Clone(options)
	slices.Sort(sorted)
	return Compile(choiceTrie(slices.Compact(sorted)), nil)
}

// choiceTrie matches one of opts (sorted, distinct, at most one of them
// empty): their common prefix, then one branch for each next byte.
func choiceTrie(opts []string) *Expr {
	if len(opts) == 1 {
		return Lit(opts[0])
	}
	first, last := opts[0], opts[len(opts)-1]
	n := 0 // sorted: the first and last share the prefix all share
	for n < len(first) && n < len(last) && first[n] == last[n] {
		n++
	}
	if n > 0 {
		rest := make([]string, len(opts))
		for i, o := range opts {
			rest[i] = o[n:]
		}
		return Seq(Lit(first[:n]), choiceTrie(rest))
	}
	var alts []*Expr
	for i := 0; i < len(opts); {
		if opts[i] == "" {
			alts = append(alts, Empty())
			i++
			continue
		}
		j := i + 1
		for j < len(opts) && opts[j] != "" && opts[j][0] == opts[i][0] {
			j++
		}
		alts = append(alts, choiceTrie(opts[i:j]))
		i = j
	}
	return Alt(alts...)
}
