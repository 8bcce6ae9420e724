// Package grammar constrains generation to a language: a JSON schema, a
// GBNF grammar (llama.cpp's), a regular expression (Python's re, as vLLM
// takes it), a list of choices, or any grammar built from Expr, is
// compiled to rules over bytes; a lazily built automaton over those rules
// says which bytes may come next, and a Matcher walks a trie of the
// vocabulary's token texts through it to mask, at each step, the tokens
// that would not keep the output a valid prefix. It knows nothing of
// models beyond each token's bytes, so it serves any vocabulary:
// SentencePiece pieces and byte-fallback tokens, byte-level BPE tokens,
// and tokens that end inside a multi-byte character.
package grammar
