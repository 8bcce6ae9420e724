package kvcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/neuralfield"
)

// storeOptions are a store for pools of options o in dir.
func storeOptions(dir string, o PoolOptions) neuralfield.Options {
	return neuralfield.Options{Dir: dir, PageBytes: StorePageBytes(o), MaxBytes: 4 << 20, QueuePages: 64}
}

func openStore(t testing.TB, dir string, o PoolOptions) *neuralfield.Store {
	t.Helper()
	s, err := neuralfield.Open(storeOptions(dir, o))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// waitWritten waits until the store has written n pages.
func waitWritten(t testing.TB, s *neuralfield.Store, n uint64) {
	t.Helper()
	for range 5000 {
		if st := s.Stats(); st.Written >= n && st.Queued == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the store wrote %d pages of %d", s.Stats().Written, n)
}

var testStoreKey = neuralfield.Key(sha256.Sum256([]byte("kvcache test model")))

// TestSpillRestore writes a table's blocks through a store, closes
// everything (a restart), and matches the same prompt on a new pool with a
// reopened store: the full blocks come back with their tokens' keys and
// values (exact forms and, in a tiered pool, the same quantized forms),
// counted as hits; under another StoreKey (another model) nothing does.
func TestSpillRestore(t *testing.T) {
	for _, prec := range []Precision{F16, Q8, Tiered} {
		t.Run(prec.String(), func(t *testing.T) {
			dir := t.TempDir()
			o := small
			o.Type, o.HotTokens, o.WarmTokens, o.StoreKey = prec, 4, 4, testStoreKey
			o.Store = openStore(t, dir, o)
			p := newTestPool(t, o, 16)
			tab := newTestTable(t, p, 40)
			prompt := seq(100, 23) // 5 full blocks of 4 and 3 more tokens
			appendStored(t, tab, prompt...)
			tab.Commit()
			waitWritten(t, o.Store, 5)
			if st := p.Stats(); st.SpilledBlocks != 5 || st.Store.Pages != 5 {
				t.Fatalf("spilled %d, store %+v", st.SpilledBlocks, st.Store)
			}
			o.Store.Close()

			for _, c := range []struct {
				key  neuralfield.Key
				want int
			}{{testStoreKey, 20}, {neuralfield.Key{1}, 0}} {
				o.Store, o.StoreKey = openStore(t, dir, o), c.key
				q := newTestPool(t, o, 16)
				back := newTestTable(t, q, 40)
				if n := back.Match(append(prompt, 7, 7)); n != c.want {
					t.Fatalf("restored %d tokens, want %d", n, c.want)
				}
				st := q.Stats()
				if st.RestoredBlocks != uint64(c.want/4) || st.StoreHitTokens != uint64(c.want) || st.HitTokens != uint64(c.want) || st.Restores != min(1, uint64(c.want)) {
					t.Fatalf("stats after restoring %d: %+v", c.want, st)
				}
				if c.want > 0 {
					// The restored table continues like the one that wrote
					// the blocks: same data, same quantized forms.
					appendStored(t, back, prompt[20:]...)
					mustCheck(t, q, back)
				}
				o.Store.Close()
			}
		})
	}
}

// TestStoreNamespaces: a table of another namespace (an adapter) spills
// nothing until it has a store namespace, and then only finds its own.
func TestStoreNamespaces(t *testing.T) {
	dir := t.TempDir()
	o := small
	o.Type, o.StoreKey = F16, testStoreKey
	o.Store = openStore(t, dir, o)
	p := newTestPool(t, o, 16)
	tab := newTestTable(t, p, 40)
	tab.SetNamespace(1)
	appendStored(t, tab, seq(5, 8)...)
	tab.Commit()
	if p.Stats().SpilledBlocks != 0 {
		t.Fatal("a namespace without a store key spilled")
	}
	tab.SetNamespace(1)
	tab.SetStoreNamespace(neuralfield.Key{9})
	appendStored(t, tab, seq(5, 8)...)
	tab.Commit()
	waitWritten(t, o.Store, 2)
	// A fresh pool: only a table of the same store namespace finds them.
	q := newTestPool(t, o, 16)
	for i, c := range []struct {
		ns   neuralfield.Key
		want int
	}{{neuralfield.Key{9}, 8}, {neuralfield.Key{8}, 0}, {testStoreKey, 0}} {
		u := newTestTable(t, q, 40)
		// Namespaces in RAM stand for store namespaces one to one.
		u.SetNamespace(uint64(10 + i))
		if c.ns != testStoreKey {
			u.SetStoreNamespace(c.ns)
		} else {
			u.SetNamespace(0)
		}
		if n := u.Match(seq(5, 8)); n != c.want {
			t.Errorf("store namespace %x: restored %d, want %d", c.ns[:2], n, c.want)
		}
		u.Release()
	}
}

// TestRestoreRefusesOtherTokens: a page whose tokens are not the prompt's
// (a forged or colliding key) is not restored.
func TestRestoreRefusesOtherTokens(t *testing.T) {
	o := small
	o.Type, o.StoreKey = F16, testStoreKey
	o.Store = openStore(t, t.TempDir(), o)
	p := newTestPool(t, o, 16)
	prompt := seq(40, 4)
	key := p.store.chainKey(&o.StoreKey, prompt)
	page := make([]byte, StorePageBytes(o))
	page[0] = 99 // token 0 is 99, not 40
	o.Store.Put(key, page)
	waitWritten(t, o.Store, 1)
	tab := newTestTable(t, p, 40)
	if n := tab.Match(prompt); n != 0 {
		t.Fatalf("restored %d tokens from a page of other tokens", n)
	}
	if st := p.Stats(); st.StoreTokenMismatches != 1 {
		t.Fatalf("mismatches %d", st.StoreTokenMismatches)
	}
}

// TestPagedRandomOpsWithStore runs the random-operations model on pools
// that spill to a store: whatever the store restores after RAM evicted it
// must hold the right keys and values.
func TestPagedRandomOpsWithStore(t *testing.T) {
	for _, prec := range []Precision{F16, Tiered} {
		t.Run(prec.String(), func(t *testing.T) {
			o := small
			o.Type, o.StoreKey = prec, testStoreKey
			o.HotTokens, o.WarmTokens, o.HotSlots, o.WarmSlots = 4, 4, 6, 3
			o.Store = openStore(t, t.TempDir(), o)
			p := newTestPool(t, o, 16)
			runRandomOps(t, p, rand.New(rand.NewPCG(7, uint64(prec))), 3000)
			st := p.Stats()
			t.Logf("spilled %d, restored %d blocks", st.SpilledBlocks, st.RestoredBlocks)
			if st.RestoredBlocks == 0 {
				t.Fatalf("nothing was restored: %+v", st)
			}
		})
	}
}

// BenchmarkRestore restores a 1,504-token prompt (47 blocks of the
// tinyllama-1.1b shape: 22 layers, 4 kv heads of 64) from a store whose
// files are in the page cache into a new pool, as a restarted server does
// for a returning chat. Its MB/s count the keys and values restored as
// their exact form (704 KiB a block), in both precisions: the F16 pool
// copies that form; the tiered pool checks pages that also hold the 4-bit
// form (198 KiB more) and copies that, and the exact form of its last
// three blocks.
func BenchmarkRestore(b *testing.B) {
	for _, prec := range []Precision{F16, Tiered} {
		b.Run(prec.String(), func(b *testing.B) {
			o := PoolOptions{Layers: 22, KVHeads: 4, HeadDim: 64, BlockTokens: 32, Type: prec, HotTokens: 64, StoreKey: testStoreKey}
			so := storeOptions(b.TempDir(), o)
			so.MaxBytes = 256 << 20
			s, err := neuralfield.Open(so)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			o.Store = s
			p := newTestPool(b, o, 64)
			prompt := seq(1, 47*32)
			tab := newTestTable(b, p, len(prompt))
			// Keys and values of any bits will do: every layer is written,
			// so the blocks are full and quantized. In passes of 256
			// tokens, as a pool's exact slots allow.
			k := make([]float32, 256*4*64)
			for i := range k {
				k[i] = float32(i%1000) / 100
			}
			for at := 0; at < len(prompt); at += 256 {
				n := min(256, len(prompt)-at)
				if _, err := tab.Append(prompt[at : at+n]); err != nil {
					b.Fatal(err)
				}
				for l := range o.Layers {
					tab.Store(l, at, k[:n*4*64], k[:n*4*64])
				}
				tab.Commit()
			}
			waitWritten(b, s, 47)
			exact := int64(StorePageBytes(o) - 4*32)
			b.SetBytes(47 * exact)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				q := newTestPool(b, o, 64)
				back := newTestTable(b, q, len(prompt))
				b.StartTimer()
				if n := back.Match(prompt); n != len(prompt) {
					b.Fatalf("restored %d tokens", n)
				}
			}
		})
	}
}

// TestRestoreForms: a quantized pool restores old blocks in their static
// form alone and the last ones, which a row continuing the table reads at
// F16 or 8 bits, with their exact and warm forms too; a restore cut short
// by a bad page gives the blocks then last their exact forms, and the table
// continues as the one that wrote the blocks.
func TestRestoreForms(t *testing.T) {
	for _, c := range []struct {
		name     string
		prec     Precision
		bad      int // a block whose page holds other tokens; -1: none
		restored int
	}{
		{"tiered", Tiered, -1, 10},
		{"tiered cut", Tiered, 6, 6},
		{"q4 cut", Q4, 3, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			o := small
			o.Type, o.HotTokens, o.WarmTokens, o.StoreKey = c.prec, 4, 4, testStoreKey
			o.Store = openStore(t, dir, o)
			p := newTestPool(t, o, 24)
			tab := newTestTable(t, p, 60)
			prompt := seq(300, 42) // 10 full blocks of 4 and 2 more tokens
			appendStored(t, tab, prompt...)
			tab.Commit()
			waitWritten(t, o.Store, 10)
			o.Store.Close()
			if c.bad >= 0 {
				damagePage(t, dir, prompt[4*c.bad:4*c.bad+4])
			}

			o.Store = openStore(t, dir, o)
			q := newTestPool(t, o, 24)
			back := newTestTable(t, q, 60)
			if n := back.Match(prompt); n != 4*c.restored {
				t.Fatalf("restored %d tokens, want %d: %+v", n, 4*c.restored, q.Stats())
			}
			from := c.restored - 1 - q.tier.hotBlocks - q.tier.warmBlocks
			for i, b := range back.Blocks() {
				if m := &q.meta[b]; (m.half >= 0) != (i >= from) || c.prec == Tiered && (m.warm >= 0) != (i >= from) {
					t.Errorf("block %d of %d: exact slot %d, warm slot %d", i, c.restored, m.half, m.warm)
				}
			}
			mustCheck(t, q, back)
			appendStored(t, back, prompt[4*c.restored:]...)
			back.Commit()
			mustCheck(t, q, back)
			o.Store.Close()
		})
	}
}

// damagePage flips a byte of the stored page that starts with tokens, in
// the store's files in dir, so that it fails its checksum.
func damagePage(t *testing.T, dir string, tokens []int32) {
	t.Helper()
	want := make([]byte, 4*len(tokens))
	for i, tok := range tokens {
		binary.LittleEndian.PutUint32(want[4*i:], uint32(tok))
	}
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		if at := bytes.Index(b, want); at >= 0 {
			b[at+len(want)] ^= 0x10
			if err := os.WriteFile(name, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no page of tokens %v in %s", tokens, dir)
}
