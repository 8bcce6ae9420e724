package native

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"

	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/neuralfield"
)

// kvArithmetic names the arithmetic of the keys and values this backend
// computes; raise it when a change would make them differ in any bit, so
// that blocks stored by an older build are never restored by a newer one.
const kvArithmetic = "ruvllm native kv 1"

// kvStore is the backend's store of KV blocks (Options.KVStoreDir): one
// for all its pools, in a subdirectory named by the model file's hash.
type kvStore struct {
	dir   string
	max   int64
	model [32]byte // SHA-256 of the model file
	store *neuralfield.Store
}

// openStore opens the backend's store, at the first pool that spills.
func (b *Backend) openStore(o kvcache.PoolOptions) (*neuralfield.Store, error) {
	st := b.kvStore
	if st.store != nil {
		return st.store, nil
	}
	// Hashing the model file costs a read of it, once, and only with a
	// store: its bytes are what makes the stored keys and values.
	st.model = sha256.Sum256(b.file.Bytes())
	dir := filepath.Join(st.dir, hex.EncodeToString(st.model[:8]))
	s, err := neuralfield.Open(neuralfield.Options{Dir: dir, PageBytes: kvcache.StorePageBytes(o), MaxBytes: st.max, QueuePages: 64})
	if err != nil {
		return nil, fmt.Errorf("native: KV store: %w", err)
	}
	st.store = s
	return s, nil
}

// storeKey is the key a pool of options o keys its blocks under: the
// model file, the arithmetic, the page format, the precision and tiers,
// the block size and the byte order of the stored halves.
func (b *Backend) storeKey(o kvcache.PoolOptions) neuralfield.Key {
	h := sha256.New()
	h.Write([]byte(kvArithmetic))
	h.Write(b.kvStore.model[:])
	var buf [8]byte
	bt := o.BlockTokens
	for _, x := range []int{kvcache.StorePageFormat, int(o.Type), (o.HotTokens + bt - 1) / bt, (o.WarmTokens + bt - 1) / bt, bt, o.Layers, o.KVHeads, o.HeadDim} {
		binary.LittleEndian.PutUint64(buf[:], uint64(x))
		h.Write(buf[:])
	}
	binary.NativeEndian.PutUint16(buf[:], 1)
	h.Write(buf[:2])
	var k neuralfield.Key
	h.Sum(k[:0])
	return k
}

// adapterStoreKey is the store namespace of a pool's blocks computed with
// adapter a at scale.
func adapterStoreKey(pool neuralfield.Key, a *lora.Adapter, scale float32) neuralfield.Key {
	h := sha256.New()
	h.Write(pool[:])
	d := a.Digest()
	h.Write(d[:])
	var buf [4]byte
	binary.LittleEndian.PutUint32(buf[:], math.Float32bits(scale))
	h.Write(buf[:])
	var k neuralfield.Key
	h.Sum(k[:0])
	return k
}
