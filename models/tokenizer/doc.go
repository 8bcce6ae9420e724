// Package tokenizer turns text into token ids and back the way llama.cpp does,
// from the tokenizer.ggml.* metadata of a GGUF file: SentencePiece-style merges
// for "llama" vocabularies, byte-level BPE for "gpt2" ones and WordPiece for
// "bert" ones, with special-token splitting, BOS/EOS handling and a streaming
// decoder that never emits a broken UTF-8 sequence.
package tokenizer
