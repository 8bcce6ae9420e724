package backends

import (
	"errors"
	"io"

	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// Errors a Backend wraps so that callers can tell them apart with errors.Is.
var (
	// ErrContextFull means a step would take a sequence past its MaxLen.
	ErrContextFull = errors.New("backends: sequence is full")
	// ErrNoRoom means the backend's KV memory cannot hold the tokens of a
	// Forward call now, though each sequence is within its MaxLen: the
	// memory is shared between sequences (a pool of blocks) and the others
	// hold it. Nothing has changed; the call fits once other sequences are
	// Reset or closed, or with fewer steps. The engine answers it by
	// holding prefill back and preempting sequences.
	ErrNoRoom = errors.New("backends: no room in the KV cache")
	// ErrClosed means a sequence or backend was used after Close.
	ErrClosed = errors.New("backends: use after close")
)

// Backend runs the forward pass of one loaded model over batches of tokens.
//
// The contract every backend keeps:
//
//   - One goroutine at a time drives a Backend (the engine's scheduler):
//     Forward and the methods of the sequences it created never run
//     concurrently. The backend parallelises each call internally.
//   - Forward checks every step before it changes anything. On an error
//     that wraps ErrContextFull, ErrNoRoom or ErrClosed, or that reports a
//     bad step (a foreign or repeated sequence, a token outside the
//     vocabulary, a buffer of the wrong size), no sequence has changed. Any
//     other error (a failure inside the pass) leaves the sequences of the
//     call undefined: the caller resets them.
//   - A sequence's outputs depend only on its own tokens and adapter, not on
//     what else shares the call or how a long prompt is split over calls.
//   - Buffers belong to the caller; a decode step (one token per sequence)
//     allocates nothing.
//   - A backend may offer more through the optional interfaces below
//     (KVPools, AdapterSequence); callers type-assert to find them.
//
// Backends are opened by name with Open; see Register.
type Backend interface {
	// Model describes the loaded model.
	Model() ModelInfo
	// Threads is the number of threads a forward pass uses.
	Threads() int
	// NewSequence creates an empty sequence of up to opts.MaxLen tokens.
	// Where the backend shares its KV memory between sequences, the memory
	// is taken as tokens are appended (Forward then fails with ErrNoRoom
	// when there is none); else it is sized once here.
	NewSequence(opts SequenceOptions) (Sequence, error)
	// Forward appends each step's tokens to its sequence, runs the model
	// over all of them in one pass, and writes the outputs each step asks for
	// into its buffers. Steps may mix a prefill chunk of one sequence with
	// single decode tokens of others; a sequence appears at most once per
	// call.
	Forward(steps []Step) error
	// Close releases the backend; it and its sequences must not be used after.
	Close() error
}

// KVPools is a Backend whose sequences share KV block pools, with prefix
// caching across sequences; the engine reports their state in its Stats.
type KVPools interface {
	KVStats() kvcache.Stats
}

// ModelInfo is what a caller needs to size buffers and report the model.
type ModelInfo struct {
	Arch          string // general.architecture, as "llama" or "qwen2"
	Name          string // general.name, may be empty
	VocabSize     int    // length of one row of logits
	Dim           int    // length of one row of hidden states
	Layers        int    // transformer blocks
	ContextLength int    // context the model was trained with
}

// SequenceOptions configure a new sequence.
type SequenceOptions struct {
	// MaxLen is the most tokens the sequence can hold; 0 means the model's
	// trained context length.
	MaxLen int
	// KV is the precision of the cached keys and values; the zero value is
	// F16, llama.cpp's default.
	KV kvcache.Precision
}

// Sequence is one token stream and its KV cache: the prompt and generated
// tokens of one request. Positions are implicit: the next token a step
// appends sits at position Len().
type Sequence interface {
	// Len is the number of tokens whose keys and values are cached.
	Len() int
	// MaxLen is the most tokens the sequence can hold.
	MaxLen() int
	// Tokens are the cached tokens, in order. The slice is the sequence's
	// own: read it, don't keep or change it.
	Tokens() []tokenizer.ID
	// Truncate keeps the first n tokens and forgets the rest, so that a new
	// prompt sharing a prefix with the cached tokens recomputes only the
	// part that differs.
	Truncate(n int) error
	// Reuse makes the sequence hold the longest prefix of tokens, at most
	// limit of them, whose keys and values are cached, and returns its
	// length; everything past it is forgotten and the caller computes the
	// rest. The cache may be the sequence's own tokens or, where the
	// backend shares one cache between its sequences, what another
	// sequence computed with the same adapter and scale.
	Reuse(tokens []tokenizer.ID, limit int) int
	// ShareFrom makes the sequence hold src's tokens, as the n choices of
	// one request share their prompt: a shared cache holds them once until
	// one of the sequences writes, other caches copy. The sequence takes
	// src's adapter. It fails, changing nothing, when src does not fit or
	// is another backend's.
	ShareFrom(src Sequence) error
	// Reset forgets every token; the memory stays allocated for reuse.
	Reset()
	// CacheBytes is the memory of the KV cache the sequence holds; memory
	// it shares with other sequences counts in full for each.
	CacheBytes() int64
	// Close releases the KV cache; the sequence must not be used after.
	Close() error
}

// AdapterSequence is a Sequence that can run with a LoRA adapter; the
// native backend's sequences are. It is an optional interface, so that the
// Backend and Sequence interfaces stay small and a backend without adapters
// needs nothing: a caller type-asserts a Sequence to it.
//
// Each sequence carries its own adapter, so one Forward call may mix
// sequences with different adapters and with none. Like the other methods
// of a sequence, SetAdapter must not run concurrently with Forward.
type AdapterSequence interface {
	Sequence
	// SetAdapter makes the tokens appended from now on run with adapter a
	// (nil: none), its updates multiplied by scale (a request's lora_scale;
	// 1 applies the adapter as trained). The cached keys and values were
	// computed with the previous adapter, so when the adapter or scale
	// changes the sequence forgets its tokens (as Reset): call it before
	// comparing Tokens() with a prompt for prefix reuse. It fails, changing
	// nothing, when a does not fit the model.
	SetAdapter(a *lora.Adapter, scale float32) error
	// Adapter is the sequence's adapter and scale; nil when it has none.
	Adapter() (*lora.Adapter, float32)
}

// StateSequence is a Sequence whose tokens and cached keys and values can
// be written out and read back, into it or another sequence of the same
// backend, in this process or a later one (llama-server's slot save and
// restore). It is optional: a caller type-asserts a Sequence to it. Like
// the other methods of a sequence, its methods must not run concurrently
// with Forward.
type StateSequence interface {
	Sequence
	// SaveState writes the sequence's state to w and returns the bytes
	// written; it changes nothing.
	SaveState(w io.Writer) (int64, error)
	// LoadState replaces what the sequence holds with a state SaveState
	// wrote (running no adapter) and returns the tokens restored and the
	// bytes read; on an error the sequence is left empty.
	LoadState(r io.Reader) (tokens int, read int64, err error)
}

// Outputs says which tokens of a step produce outputs.
type Outputs int

const (
	// LastToken produces outputs for the step's last token only, as a
	// prefill chunk before sampling or a decode step needs.
	LastToken Outputs = iota
	// AllTokens produces outputs for every token of the step, as
	// perplexity, prompt logprobs and embeddings need.
	AllTokens
)

// Step is the work Forward does for one sequence: append Tokens and compute
// the outputs asked for. n below is 1 for LastToken and len(Tokens) for
// AllTokens; a nil buffer means that output is not wanted. Buffers are the
// caller's and are reused across calls, so a decode step allocates nothing.
type Step struct {
	Seq     Sequence
	Tokens  []tokenizer.ID // at least one; ids in [0, VocabSize)
	Outputs Outputs
	// Logits (n, VocabSize) receives the unnormalised next-token scores of
	// the chosen tokens, row after row.
	Logits []float32
	// Hidden (n, Dim) receives the final normalised hidden states of the
	// chosen tokens (what the output projection would multiply), for
	// embeddings.
	Hidden []float32
	// Draft is how many of the step's last tokens are drafted by
	// speculative decoding (fewer than len(Tokens)), to be verified
	// against the logits of every token (AllTokens): a backend that is a
	// DraftVerifier computes each token of such a step as a decode step of
	// that one token would, and keeps the blocks holding drafted tokens
	// out of its prefix cache, since the caller truncates the rejected
	// ones away. 0 for every other step.
	Draft int
}

// DraftVerifier is a Backend that honours Step.Draft, so that the engine
// can verify drafted tokens in its forward passes (speculative decoding)
// and get exactly the tokens it gets without drafts. It is optional: the
// engine drafts nothing for a backend that is not one, or that reports
// false.
type DraftVerifier interface {
	VerifiesDrafts() bool
}

// OutputRows is n: the number of rows Logits and Hidden must have.
func (s *Step) OutputRows() int {
	if s.Outputs == AllTokens {
		return len(s.Tokens)
	}
	return 1
}

// ErrFileForm is wrapped by the error a backend's opener returns for a
// file it runs only in another form (native-sparse: a sparsified file).
var ErrFileForm = errors.New("the file is not in the form this backend runs")

// ErrUnsupportedArchitecture is wrapped by the error a backend's opener
// returns for a model of an architecture it refuses to run. Every backend
// registers each architecture package models describes, to serve or to
// refuse it with this error and why (TestFamiliesEveryBackend), so that a
// family cannot be half registered.
var ErrUnsupportedArchitecture = errors.New("architecture not supported by this backend")
