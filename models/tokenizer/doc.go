// Package tokenizer turns text into token ids and back the way llama.cpp does,
// from the tokenizer.ggml.* metadata of a GGUF file: SentencePiece-style merges
// for "llama" vocabularies, byte-level BPE for "gpt2" ones and WordPiece for
// "bert" ones, with special-token splitting, BOS/EOS handling and a streaming
// decoder that never emits a broken UTF-8 sequence.
package tokenizer

// ID is a token id: an index into the vocabulary. It is the one type a token
// has from the tokenizer through the engine, the backends and the KV cache to
// the sampler, 32 bits as llama.cpp's llama_token. It is an alias, so that the
// packages below this one (kvcache) hold tokens without importing it.
type ID = int32
