package neuralfield

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// keyOf and pageOf make a page whose every byte follows from its number, so
// that a test can tell a right page from a torn, stale or foreign one.
func keyOf(n int) Key { return sha256.Sum256([]byte("page " + strconv.Itoa(n))) }

func pageOf(n, size int) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	binary.LittleEndian.PutUint64(b, uint64(n))
	return b
}

func openTest(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// flush waits until the writer has written what Put queued.
func flush(t testing.TB, s *Store) {
	t.Helper()
	for range 5000 {
		st := s.Stats()
		if st.Queued == 0 && st.Written+st.Dropped+st.Duplicates >= st.Puts {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the writer did not catch up: %+v", s.Stats())
}

// get reads the page of key.
func get(s *Store, key Key) ([]byte, error) {
	var got []byte
	err := s.Get(key, func(p []byte) error {
		got = append([]byte(nil), p...)
		return nil
	})
	return got, err
}

func TestPutGetReopen(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, PageBytes: 5000, MaxBytes: 1 << 20}
	s := openTest(t, o)
	for n := range 10 {
		p := pageOf(n, 1000+n*300)
		if !s.Put(keyOf(n), p[:10], p[10:]) {
			t.Fatalf("Put %d refused", n)
		}
	}
	flush(t, s)
	if s.Put(keyOf(3), pageOf(3, 1000)) {
		t.Error("a second Put of one key was queued")
	}
	if s.Put(keyOf(99), make([]byte, o.PageBytes+1)) || s.Put(keyOf(98)) {
		t.Error("a page larger than PageBytes, or an empty one, was queued")
	}
	check := func(s *Store) {
		t.Helper()
		for n := range 10 {
			got, err := get(s, keyOf(n))
			if err != nil || !bytes.Equal(got, pageOf(n, 1000+n*300)) {
				t.Fatalf("page %d: %d bytes, %v", n, len(got), err)
			}
		}
		if _, err := get(s, keyOf(10)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a missing page: %v", err)
		}
	}
	check(s)
	if st := s.Stats(); st.Pages != 10 || st.Written != 10 || st.Gets != 10 || st.Misses != 1 || st.Bytes > o.MaxBytes {
		t.Fatalf("stats %+v", st)
	}
	if _, err := Open(o); !errors.Is(err, ErrInUse) {
		t.Fatalf("a second Open of an open store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, o)
	check(s)
	if st := s.Stats(); st.Pages != 10 {
		t.Fatalf("after reopening: %+v", st)
	}
}

// TestEvictsLeastRecentlyUsed fills a store of 6 pages (two segments of 3)
// with 10: the pages left are the most recently written or read, and the
// files never pass MaxBytes.
func TestEvictsLeastRecentlyUsed(t *testing.T) {
	const page = 4096
	g := geometryFor(page, 3*(page+entryBytes)+headerBytes+pageAlign)
	o := Options{Dir: t.TempDir(), PageBytes: page, MaxBytes: 2*g.fileBytes() + 100, SegmentBytes: g.fileBytes()}
	s := openTest(t, o)
	if st := s.Stats(); st.Slots != 6 || st.Bytes > o.MaxBytes {
		t.Fatalf("geometry %+v (%+v)", st, g)
	}
	for n := range 6 {
		s.Put(keyOf(n), pageOf(n, page))
		flush(t, s)
	}
	// Read 0 and 1: they become the most recent.
	for _, n := range []int{0, 1} {
		if _, err := get(s, keyOf(n)); err != nil {
			t.Fatal(err)
		}
	}
	for n := 6; n < 10; n++ {
		s.Put(keyOf(n), pageOf(n, page))
		flush(t, s)
	}
	for n := range 10 {
		_, err := get(s, keyOf(n))
		if want := n < 2 || n >= 6; (err == nil) != want {
			t.Errorf("page %d: %v, want kept %v", n, err, want)
		}
	}
	if st := s.Stats(); st.Evictions != 4 || st.Pages != 6 {
		t.Fatalf("stats %+v", st)
	}
	size := int64(0)
	files, _ := filepath.Glob(filepath.Join(o.Dir, "*"))
	for _, f := range files {
		fi, _ := os.Stat(f)
		size += fi.Size()
	}
	if size > o.MaxBytes {
		t.Fatalf("the files take %d bytes, more than %d", size, o.MaxBytes)
	}
}

// corrupt opens the single segment of a store in dir and changes it.
func corrupt(t *testing.T, dir string, change func(data []byte, g geometry)) {
	t.Helper()
	path := filepath.Join(dir, segName(0))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, ok := parseHeader(data)
	if !ok {
		t.Fatal("no header")
	}
	change(data, geometry{pageStride: int64(h.pageStride), slots: int64(h.slots)})
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHostileFiles damages a closed store's file in the ways a crash, a
// disk or a person might, and checks that Open copes and that every page
// it serves is the one written under its key.
func TestHostileFiles(t *testing.T) {
	const page = 3000
	cases := []struct {
		name   string
		change func(data []byte, g geometry)
		// lost are the pages that must not be served; kept, those that
		// must still be.
		lost, kept []int
		checksum   bool // the damage shows only when the page is read
	}{
		{"page bit flip", func(d []byte, g geometry) { d[g.pagesAt()+2*g.pageStride+100] ^= 4 }, []int{2}, []int{0, 1, 3}, true},
		{"entry bit flip", func(d []byte, g geometry) { d[headerBytes+1*entryBytes+20] ^= 1 }, []int{1}, []int{0, 2, 3}, false},
		{"entry length past the page", func(d []byte, g geometry) {
			e := d[headerBytes+3*entryBytes:]
			binary.LittleEndian.PutUint32(e[48:], page+1)
			binary.LittleEndian.PutUint32(e[entryCRCAt:], checksum(e[:entryCRCAt]))
		}, []int{3}, []int{0, 1, 2}, false},
		{"entry of another key", func(d []byte, g geometry) {
			// A valid entry claiming page 0's slot holds page 7: its
			// checksum is page 0's, so the read fails.
			e := d[headerBytes:]
			k := keyOf(7)
			copy(e[16:48], k[:])
			binary.LittleEndian.PutUint32(e[entryCRCAt:], checksum(e[:entryCRCAt]))
		}, []int{0, 7}, []int{1, 2, 3}, false},
		{"truncated", func(d []byte, g geometry) {}, []int{0, 1, 2, 3}, nil, false},
		{"header bit flip", func(d []byte, g geometry) { d[12] ^= 8 }, []int{0, 1, 2, 3}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Options{Dir: t.TempDir(), PageBytes: page, MaxBytes: 1 << 20}
			s := openTest(t, o)
			for n := range 4 {
				s.Put(keyOf(n), pageOf(n, page))
			}
			flush(t, s)
			s.Close()
			corrupt(t, o.Dir, c.change)
			if c.name == "truncated" {
				if err := os.Truncate(filepath.Join(o.Dir, segName(0)), headerBytes+100); err != nil {
					t.Fatal(err)
				}
			}
			s = openTest(t, o)
			for _, n := range c.lost {
				_, err := get(s, keyOf(n))
				if err == nil {
					t.Errorf("page %d was served", n)
				}
			}
			for _, n := range c.kept {
				if got, err := get(s, keyOf(n)); err != nil || !bytes.Equal(got, pageOf(n, page)) {
					t.Errorf("page %d: %v", n, err)
				}
			}
			if st := s.Stats(); c.checksum && st.ChecksumFailures != 1 {
				t.Errorf("checksum failures %d, want 1", st.ChecksumFailures)
			}
			// A failed page is gone for good.
			for _, n := range c.lost {
				if s.Has(keyOf(n)) {
					t.Errorf("page %d is still indexed after failing", n)
				}
			}
		})
	}
}

// TestGeometryChange reopens a store with another page size: its files are
// remade, empty, and nothing of the old pages is served.
func TestGeometryChange(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{Dir: dir, PageBytes: 5000, MaxBytes: 1 << 20})
	s.Put(keyOf(1), pageOf(1, 5000))
	flush(t, s)
	s.Close()
	s = openTest(t, Options{Dir: dir, PageBytes: 9000, MaxBytes: 1 << 19})
	if s.Has(keyOf(1)) || s.Stats().Pages != 0 {
		t.Fatalf("a page of the old geometry survived: %+v", s.Stats())
	}
}

// TestConcurrent puts and gets from several goroutines at once (run it
// with -race): every page read is its key's.
func TestConcurrent(t *testing.T) {
	const page = 4096
	s := openTest(t, Options{Dir: t.TempDir(), PageBytes: page, MaxBytes: 40 * (page + entryBytes), QueuePages: 4})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range 500 {
				n := r.IntN(60)
				if r.IntN(2) == 0 {
					s.Put(keyOf(n), pageOf(n, page))
					continue
				}
				got, err := get(s, keyOf(n))
				if err == nil && !bytes.Equal(got, pageOf(n, page)) {
					t.Errorf("page %d read wrong", n)
				} else if err != nil && !errors.Is(err, ErrNotFound) {
					t.Errorf("page %d: %v", n, err)
				}
				s.Prefetch(keyOf(n), keyOf(n+1))
			}
		}()
	}
	wg.Wait()
	flush(t, s)
	if st := s.Stats(); st.ChecksumFailures != 0 || st.Pages > st.Slots {
		t.Fatalf("stats %+v", st)
	}
}

// The crash test's child: it writes pages as fast as it can until it is
// killed. It runs when the test binary is started with NEURALFIELD_CHILD
// set to a store directory.
func TestMain(m *testing.M) {
	if dir := os.Getenv("NEURALFIELD_CHILD"); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

const crashPage = 16 << 10

func crashOptions(dir string) Options {
	return Options{Dir: dir, PageBytes: crashPage, MaxBytes: 3 << 20, SegmentBytes: 1 << 20, QueuePages: 8}
}

func crashChild(dir string) {
	s, err := Open(crashOptions(dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("open")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for {
		n := r.IntN(1000)
		if !s.Put(keyOf(n), pageOf(n, crashPage-r.IntN(100))) {
			time.Sleep(50 * time.Microsecond)
		}
		if r.IntN(4) == 0 {
			_, _ = get(s, keyOf(r.IntN(1000)))
		}
	}
}

// TestKillAtRandomMoments kills a writing process with SIGKILL at 60
// random moments, reopening the store after each: every page the store
// serves is exactly the page of its key, none fails its checksum (the
// write order leaves no torn page valid), and the files stay within
// MaxBytes.
func TestKillAtRandomMoments(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child process 60 times")
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(11, 12))
	total := 0
	for round := range 60 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "NEURALFIELD_CHILD="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5)
		if _, err := out.Read(buf); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: the child did not open the store: %v", round, err)
		}
		time.Sleep(time.Duration(r.IntN(40000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()

		s, err := Open(crashOptions(dir))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		pages := 0
		for n := range 1000 {
			var page []byte
			err := s.Get(keyOf(n), func(p []byte) error {
				page = append(page[:0], p...)
				return nil
			})
			switch {
			case errors.Is(err, ErrNotFound):
			case err != nil:
				t.Fatalf("round %d: page %d: %v", round, n, err)
			case len(page) < 8 || !bytes.Equal(page, pageOf(n, len(page))):
				t.Fatalf("round %d: page %d holds other bytes", round, n)
			default:
				pages++
			}
		}
		st := s.Stats()
		s.Close()
		if st.ChecksumFailures != 0 || st.Bytes > crashOptions(dir).MaxBytes {
			t.Fatalf("round %d: %+v", round, st)
		}
		total += pages
	}
	if total == 0 {
		t.Fatal("no page survived any kill: the child wrote nothing")
	}
	t.Logf("%d pages read back over 60 kills", total)
}
