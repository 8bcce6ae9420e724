package backends

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/ruvllm/ruvllm/models"
)

// Options configure a backend opened with Open; the zero value is ready to
// use. A backend ignores the options that mean nothing to it.
type Options struct {
	// Threads is the number of threads a forward pass uses, the caller's
	// included; 0 means runtime.NumCPU().
	Threads int
	// MaxBatch is the most tokens one internal pass holds; Forward splits
	// larger calls. It sizes the activation buffers, which are allocated
	// once. 0 means DefaultBatch, llama.cpp's default micro-batch.
	MaxBatch int
	// KVBytes is the memory of each KV pool (one per precision that
	// sequences ask for, made at the first such sequence): the keys and
	// values of every sequence, and the prefix cache in the blocks they do
	// not hold. 0 means KVTokens positions.
	KVBytes int64
	// KVTokens is the positions of each KV pool when KVBytes is 0; 0 means
	// the model's context length (one sequence of full length, or several
	// sharing it, as llama.cpp's n_ctx).
	KVTokens int
	// KVHotTokens and KVWarmTokens shape a Tiered KV pool: the most recent
	// positions before a token's own block that it attends to at F16, and
	// those before them at 8 bits (both rounded up to whole blocks); older
	// positions are read at 4 bits. The zero values keep only the block
	// being filled at F16 and no 8-bit tier.
	KVHotTokens, KVWarmTokens int
	// KVSequences is how many sequences are expected to fill KV blocks at
	// once (the engine's Parallel); it sizes the F16 and 8-bit parts of a
	// quantized pool. 0 means 1.
	KVSequences int
	// KVStoreDir, when set, is a directory where the backend keeps the full
	// KV blocks its sequences commit, at most KVStoreMax bytes of them
	// (least recently used evicted), in a subdirectory of the model file's
	// own: a prompt that starts with stored blocks restores them instead
	// of computing them, also after a restart or a crash. F32 caches do
	// not spill.
	KVStoreDir string
	KVStoreMax int64
	// Sparsity is the level at which a backend that runs sparsified files
	// sparsely ("native-sparse") zeroes the small inputs of their
	// matrices: a fraction, each matrix's threshold read from the file's
	// calibration. 0 means the level the file was calibrated for.
	Sparsity float64
	// NoRepack keeps only the file's layout of the weights. By default a
	// backend may copy some weight formats into a layout its kernels run
	// faster on (native: Q4_0, Q4_K and Q5_K, rows packed 8 at a time, which
	// decode, batches and prompts all read, the file's pages of those
	// matrices then dropped from memory), and may lay out
	// again the matrices of a sparsified file that share an input (native:
	// q, k, v and gate, up stacked into one, in place of the file's pages).
	NoRepack bool
}

// Opener makes a backend for a loaded model. The backend uses the model's
// file in place: the caller closes the model after the backend.
type Opener func(m *models.Model, o Options) (Backend, error)

// DefaultBackend is the backend Open picks for the name "".
const DefaultBackend = "native"

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// Register makes a backend available to Open under name. Backends register
// themselves when their package is initialised, as database/sql drivers do,
// so that this package needs to import none of them: a program links in the
// backends it wants with a blank import. Registering a name twice panics.
func Register(name string, open Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[name]; dup || name == "" || open == nil {
		panic(fmt.Sprintf("backends: Register %q twice, without a name or without an opener", name))
	}
	openers[name] = open
}

// Names lists the registered backends, sorted.
func Names() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	names := make([]string, 0, len(openers))
	for n := range openers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open runs the model m on the backend registered as name ("" means
// DefaultBackend).
func Open(name string, m *models.Model, o Options) (Backend, error) {
	if name == "" {
		name = DefaultBackend
	}
	openersMu.RLock()
	open, ok := openers[name]
	openersMu.RUnlock()
	if !ok {
		known := Names()
		if len(known) == 0 {
			return nil, fmt.Errorf("backends: no backend %q: this program links in no backend", name)
		}
		return nil, fmt.Errorf("backends: no backend %q (known: %s)", name, strings.Join(known, ", "))
	}
	if m == nil || m.Config == nil {
		return nil, fmt.Errorf("backends: %s: the model was loaded without a runnable architecture", name)
	}
	if o.KVStoreDir != "" && o.KVStoreMax <= 0 {
		return nil, fmt.Errorf("backends: a KV store in %s needs a positive size, not %d", o.KVStoreDir, o.KVStoreMax)
	}
	if o.Threads < 0 || o.MaxBatch < 0 || o.KVBytes < 0 || o.KVTokens < 0 || o.KVHotTokens < 0 || o.KVWarmTokens < 0 || o.KVSequences < 0 || !(o.Sparsity >= 0 && o.Sparsity < 1) {
		return nil, fmt.Errorf("backends: threads %d, max batch %d, KV bytes %d, KV tokens %d, hot %d, warm %d and sequences %d must not be negative, sparsity %g must be in [0, 1)",
			o.Threads, o.MaxBatch, o.KVBytes, o.KVTokens, o.KVHotTokens, o.KVWarmTokens, o.KVSequences, o.Sparsity)
	}
	return open(m, o)
}
