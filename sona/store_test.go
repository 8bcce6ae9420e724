package sona

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// records reads every record of the store at path.
func records(t *testing.T, s Store) []string {
	t.Helper()
	var out []string
	if err := s.Load(func(rec []byte) error { out = append(out, string(rec)); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func openStore(t *testing.T, path string) *FileStore {
	t.Helper()
	s, err := OpenFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestFileStore(t *testing.T) {
	write := func(t *testing.T, recs ...string) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "router.log")
		s := openStore(t, path)
		for _, r := range recs {
			if err := s.Append([]byte(r)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	asides := func(path string) []string {
		m, _ := filepath.Glob(path + ".bad-*")
		return m
	}
	t.Run("records come back in order", func(t *testing.T) {
		path := write(t, "one", "two", "three")
		s := openStore(t, path)
		if got := records(t, s); !slices.Equal(got, []string{"one", "two", "three"}) || s.Records() != 3 || s.Repaired != "" {
			t.Fatalf("records %q, count %d, repaired %q", got, s.Records(), s.Repaired)
		}
	})
	t.Run("a torn append is cut off", func(t *testing.T) {
		path := write(t, "one", "two")
		f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		f.Write(frame([]byte("three"))[:10])
		f.Close()
		s := openStore(t, path)
		if got := records(t, s); !slices.Equal(got, []string{"one", "two"}) || !strings.Contains(s.Repaired, "torn") || len(asides(path)) != 0 {
			t.Fatalf("records %q, repaired %q, asides %v", got, s.Repaired, asides(path))
		}
		// Appending goes on after the cut.
		s.Append([]byte("four"))
		s.Close()
		if got := records(t, openStore(t, path)); !slices.Equal(got, []string{"one", "two", "four"}) {
			t.Fatalf("after the cut: %q", got)
		}
	})
	t.Run("damage in the middle keeps a copy aside", func(t *testing.T) {
		path := write(t, "first", "second", "third")
		b, _ := os.ReadFile(path)
		b[headerSize+recordHeader+len("first")+recordHeader+2] ^= 0x40 // inside "second"
		os.WriteFile(path, b, 0o600)
		s := openStore(t, path)
		got := records(t, s)
		aside := asides(path)
		if !slices.Equal(got, []string{"first"}) || len(aside) != 1 || !strings.Contains(s.Repaired, "damaged") {
			t.Fatalf("records %q, asides %v, repaired %q", got, aside, s.Repaired)
		}
		if saved, _ := os.ReadFile(aside[0]); string(saved) != string(b) {
			t.Fatal("the copy aside is not the damaged file")
		}
	})
	t.Run("a file that is no store is moved aside", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "router.log")
		os.WriteFile(path, []byte("not a router store at all"), 0o600)
		s := openStore(t, path)
		if got := records(t, s); len(got) != 0 || len(asides(path)) != 1 || !strings.Contains(s.Repaired, "moved") {
			t.Fatalf("records %q, asides %v, repaired %q", got, asides(path), s.Repaired)
		}
	})
	t.Run("compaction replaces the records", func(t *testing.T) {
		path := write(t, "a", "b", "c", "d")
		s := openStore(t, path)
		if err := s.Compact([][]byte{[]byte("x"), []byte("y")}); err != nil {
			t.Fatal(err)
		}
		s.Append([]byte("z"))
		s.Close()
		if got := records(t, openStore(t, path)); !slices.Equal(got, []string{"x", "y", "z"}) {
			t.Fatalf("after compaction: %q", got)
		}
		if left, _ := filepath.Glob(path + ".compact-*"); len(left) != 0 {
			t.Fatalf("compaction left %v", left)
		}
	})
	t.Run("a closed store refuses", func(t *testing.T) {
		s := openStore(t, filepath.Join(t.TempDir(), "router.log"))
		s.Close()
		if s.Append([]byte("x")) == nil || s.Load(func([]byte) error { return nil }) == nil || s.Compact(nil) == nil {
			t.Fatal("a closed store accepted a call")
		}
	})
}

// routerWithStore opens a router over the store at path.
func routerWithStore(t *testing.T, path string, o Options) *Router {
	t.Helper()
	s, err := OpenFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	o.Store = s
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRouterRemembersAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "router.log")
	o := Options{CostWeight: 0.3, NoExplore: true, Seed: 4}
	r := routerWithStore(t, path, o)
	p := prompts{rand.New(rand.NewPCG(4, 4))}
	train(t, r, p, 120)
	// Ratings are kept too.
	d, _ := r.Decide(Request{ID: "rated", Text: p.code()}, twoArms())
	r.Observe("rated", Outcome{Finish: "stop", Cost: 1})
	if err := r.Feedback("rated", -1); err != nil {
		t.Fatal(err)
	}
	probe := make([]string, 40)
	for i := range probe {
		probe[i] = p.code()
		if i%2 == 1 {
			probe[i] = p.chat()
		}
	}
	decide := func(r *Router) []Decision {
		var out []Decision
		for _, text := range probe {
			d, err := r.Decide(Request{Text: text}, twoArms())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
		return out
	}
	before := decide(r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	again := routerWithStore(t, path, o)
	defer again.Close()
	after := decide(again)
	for i := range before {
		b, a := before[i], after[i]
		if a.Arm != b.Arm || a.Neighbours != b.Neighbours || abs(a.Score-b.Score) > 1e-4 {
			t.Fatalf("probe %d: %+v before the restart, %+v after", i, b, a)
		}
	}
	tr, ok := again.bank.find("rated")
	if !ok || tr.outs[0].qweight != 1 || tr.outs[0].quality != 0 || again.names[tr.outs[0].arm] != d.Arm {
		t.Fatalf("the rated trajectory came back as %+v", tr)
	}
	fresh, _ := New(o)
	if f := decide(fresh); f[0].Neighbours != 0 || after[0].Neighbours == 0 {
		t.Fatal("the restarted router should know neighbours a fresh one does not")
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestRouterStoreIsCompacted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "router.log")
	r := routerWithStore(t, path, Options{BankSize: 8, Seed: 1})
	p := prompts{rand.New(rand.NewPCG(1, 1))}
	train(t, r, p, 100)
	if n := r.opt.Store.Records(); n > 2*8+1 {
		t.Fatalf("the store holds %d records for a bank of 8", n)
	}
	r.Close()
	// Another feature size cannot use the records: they are dropped.
	other := routerWithStore(t, path, Options{BankSize: 8, FeatureBits: 12})
	defer other.Close()
	if other.replaySkipped == 0 || other.bank.used != 0 || other.opt.Store.Records() != 0 {
		t.Fatalf("skipped %d, bank %d, store %d", other.replaySkipped, other.bank.used, other.opt.Store.Records())
	}
}

func TestReplaySurvivesHostileRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "router.log")
	r := routerWithStore(t, path, Options{Seed: 1})
	train(t, r, prompts{rand.New(rand.NewPCG(1, 1))}, 10)
	var good []byte
	r.opt.Store.Load(func(rec []byte) error {
		if good == nil {
			good = append([]byte(nil), rec...)
		}
		return nil
	})
	r.Close()
	s := openStore(t, path)
	// Records whose checksums are right but whose contents are not: each
	// must be skipped, none may crash the replay.
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range 300 {
		bad := append([]byte(nil), good...)
		switch i % 3 {
		case 0:
			bad = bad[:rng.IntN(len(bad))]
		case 1:
			bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
		case 2:
			bad = append([]byte{recFeedback}, bad[1:]...)
		}
		s.Append(bad)
	}
	s.Append([]byte{})
	s.Append([]byte("?garbage"))
	s.Close()
	again := routerWithStore(t, path, Options{Seed: 1})
	defer again.Close()
	if again.bank.used < 10 {
		t.Fatalf("only %d trajectories came back", again.bank.used)
	}
	if _, err := again.Decide(Request{Text: "hello"}, twoArms()); err != nil {
		t.Fatal(err)
	}
}
