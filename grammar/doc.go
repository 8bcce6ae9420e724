// Package grammar constrains generation to a language: a JSON schema, a
// GBNF grammar (llama.cpp's), a regular expression (Python's re, as vLLM
// takes it), a list of choices, or any grammar built from Expr, is
// compiled to rules over bytes; a lazily built automaton over those rules
// says which bytes may come next, and a Matcher walks a trie of the
// vocabulary's token texts through it to mask, at each step, the tokens
// that would not keep the output a valid prefix. It knows nothing of
// models beyond each token's bytes, so it serves any vocabulary:
// SentencePiece pieces and byte-fallback tokens, byte-level BPE tokens,
// and tokens that end inside a multi-byte character. A JSON schema's
// output is always valid under it; where a grammar cannot say all that a
// schema allows it says a part (docs/structured-output.md lists which, and
// what is refused and why), and where it must combine keywords (a pattern
// with lengths or a format, lookaheads, multipleOf) it goes through an
// automaton over characters (nfa.go).
package grammar
